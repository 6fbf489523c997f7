//! `POST /v1/tasks`, `GET /v1/tasks/{id}`, `POST /v1/tasks/{id}/deliveries`.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use taskwire_core::TaskView;
use taskwire_core::{create_task, CreateTask, DeliveryReason};

pub use super::create_body::{parse_create, LifecycleOptions};
use super::{idempotency_key, now_ms, read_body, task_id, BODY_LIMIT};
use crate::auth::{Credential, Right};
use crate::error::ApiError;
use crate::quotas;
use crate::store::{Idempotency, NewTask, StoreError, TaskRecord};
use crate::wire_json::{json_text, WireJson};
use crate::AppState;
use taskwire_wire::exact::RawJson;

/// `kind` is a short label, not a payload.
const MAX_KIND_BYTES: usize = 64;

/// A new unguessable task id: `tsk_` + 128 random bits in hex.
pub fn new_task_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(format!("random id: {e}")))?;
    let mut id = String::with_capacity(4 + 32);
    id.push_str("tsk_");
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    Ok(id)
}

/// Creates a task for the caller's tenant (idempotent with a key).
pub async fn create(
    State(state): State<AppState>,
    credential: Credential,
    headers: HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    // Judged from the headers: a browser token's body is never read.
    credential.require_tenant_token("creating a task")?;
    let tenant = credential.into_tenant();
    let raw = read_body(raw, BODY_LIMIT).await?;
    let key = idempotency_key(&headers)?;
    let req = parse_create(&raw, "body")?;
    let idempotency = key.map(|key| Idempotency {
        key,
        request: req.request.clone(),
        legacy_request: req.legacy_request.clone(),
    });
    // The create rate, judged in memory before anything reaches the store.
    let token = match state.quotas.take_create(&tenant) {
        Ok(token) => token,
        Err(limited) => {
            // Refusals only: the clone is off the create's path.
            let who = tenant.clone();
            let answer = replay_or(&state, tenant, idempotency, limited).await;
            if let Err(e) = &answer {
                state.hub.metrics.refused(&who, e);
            }
            return answer;
        }
    };
    let (record, created) = match create_for(
        &state,
        tenant,
        idempotency,
        (req.ttl_ms, req.max_attempts),
        req.lifecycle,
        req.kind,
        req.input,
    )
    .await
    {
        Ok(done) => done,
        // Held like the rate's refusals (see `quotas::REFUSAL_DELAY`).
        Err(refusal) if refusal.code == "open-task-quota" => {
            return Err(quotas::answered_late(refusal).await)
        }
        Err(other) => return Err(other),
    };
    // Only a create that made a task spends the token; dropped, it goes
    // back (a replay, or any error above).
    if created {
        token.spend();
    }
    Ok(created_answer(record, created, state.store.epoch()))
}

/// 201 with the new task, or 200 with the one an earlier create under the
/// same key made.
fn created_answer(record: TaskRecord, created: bool, epoch: &str) -> Response {
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    json_text(status, record.to_json(epoch))
}

/// A create past the tenant's rate: an idempotent replay of a task that
/// exists is still answered as before (read back, never queued for the
/// writer, no token spent); anything else gets the 429.
async fn replay_or(
    state: &AppState,
    tenant: String,
    idempotency: Option<Idempotency>,
    limited: ApiError,
) -> Result<Response, ApiError> {
    let Some(idem) = idempotency else {
        return Err(quotas::answered_late(limited).await);
    };
    match state.store.replay(tenant, idem).await? {
        Some(replay) => Ok(created_answer(
            replay.record,
            replay.created,
            state.store.epoch(),
        )),
        None => Err(quotas::answered_late(limited).await),
    }
}

/// Validates with core and stores; shared with the demo workloads.
/// Returns the task and whether it was created now.
pub async fn create_for(
    state: &AppState,
    tenant: String,
    idempotency: Option<Idempotency>,
    (ttl_ms, max_attempts): (f64, u64),
    lifecycle: LifecycleOptions,
    kind: Option<String>,
    input: Option<RawJson>,
) -> Result<(TaskRecord, bool), ApiError> {
    let view = new_task_view(state, "body", (ttl_ms, max_attempts), lifecycle, &kind)?;
    store_new_task(state, tenant, idempotency, view, kind, input).await
}

/// Stores a task made by [`new_task_view`] and offers it to the held
/// claims. The demo makes the view first, to know the task's id before
/// any worker can claim it.
pub async fn store_new_task(
    state: &AppState,
    tenant: String,
    idempotency: Option<Idempotency>,
    view: TaskView,
    kind: Option<String>,
    input: Option<RawJson>,
) -> Result<(TaskRecord, bool), ApiError> {
    let open_task_limit = state.quotas.max_open_tasks(&tenant);
    let created = state
        .store
        .create(NewTask {
            open_task_limit,
            tenant,
            view,
            kind,
            input,
            idempotency,
        })
        .await
        .inspect_err(|e| count_open_task_refusal(state, e))?;
    // A new task is work for one held claim.
    let record = &created.record;
    state
        .hub
        .work
        .offer(&record.tenant, record.kind.as_deref().unwrap_or(""));
    Ok((created.record, created.created))
}

/// A refusal at the open-task quota, counted in the metrics.
pub fn count_open_task_refusal(state: &AppState, e: &StoreError) {
    if let StoreError::OpenTaskQuota { tenant, .. } = e {
        state.hub.metrics.refused_code(tenant, "open-task-quota");
    }
}

/// A new task at version 0, validated by core; errors name their field
/// under `field` (`body`, or `body.items[3]`).
pub fn new_task_view(
    state: &AppState,
    field: &str,
    (ttl_ms, max_attempts): (f64, u64),
    lifecycle: LifecycleOptions,
    kind: &Option<String>,
) -> Result<taskwire_core::TaskView, ApiError> {
    if let Some(kind) = kind {
        if kind.len() > MAX_KIND_BYTES {
            return Err(ApiError::invalid(format!(
                "{field}.kind: must be at most {MAX_KIND_BYTES} bytes, got {}",
                kind.len()
            )));
        }
    }
    let auto_requeue = lifecycle.auto_requeue.unwrap_or(true);
    let task = create_task(&CreateTask {
        deadline_ms: lifecycle.deadline_ms,
        // The server's default grace period, unless the task opted out.
        unknown_grace_ms: lifecycle
            .unknown_grace_ms
            .or(auto_requeue.then_some(state.config.unknown_grace_ms as f64)),
        auto_requeue,
        workflow_version: lifecycle.workflow_version,
        steps: lifecycle.steps,
        budget: lifecycle.budget,
        ..CreateTask::new(new_task_id()?, now_ms(), ttl_ms, max_attempts)
    })
    .map_err(|e| ApiError::invalid(format!("{field}.{}", e.message)))?;
    Ok(task.view().clone())
}

/// The caller's task.
pub async fn get(
    State(state): State<AppState>,
    credential: Credential,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = task_id(path)?;
    credential.require(Right::Watch, &id)?;
    let tenant = credential.into_tenant();
    let record = state.store.get(tenant, id).await?;
    Ok(json_text(
        StatusCode::OK,
        record.to_json(state.store.epoch()),
    ))
}

/// Hands a succeeded task's result over, at most once per key.
pub async fn deliver(
    State(state): State<AppState>,
    credential: Credential,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    let id = task_id(path)?;
    // The right and the scope before the body: a caller who may not
    // deliver gets its 403 or 404 without a byte of the body buffered.
    credential.require(Right::Deliver, &id)?;
    read_body(raw, BODY_LIMIT).await?;
    let tenant = credential.into_tenant();
    let key = idempotency_key(&headers)?
        .ok_or_else(|| ApiError::invalid("Idempotency-Key: header is required"))?;
    let delivery = state
        .store
        .deliver(tenant, id.clone(), key.clone(), now_ms())
        .await?;
    match delivery.reason {
        DeliveryReason::Delivered => Ok((StatusCode::CREATED, WireJson(delivery)).into_response()),
        DeliveryReason::DuplicateDelivery => Ok(WireJson(delivery).into_response()),
        DeliveryReason::NotSucceeded => Err(ApiError::not_succeeded(&id)),
        DeliveryReason::KeyReusedForOtherTask => Err(ApiError::unprocessable(
            "key-reused-for-other-task",
            format!(
                "Idempotency-Key: {} was already used for another task",
                crate::error::quoted(&key)
            ),
        )),
    }
}

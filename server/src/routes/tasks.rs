//! `POST /v1/tasks`, `GET /v1/tasks/{id}`, `POST /v1/tasks/{id}/deliveries`.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use taskwire_core::wire::from_json_serde_bytes;
use taskwire_core::{create_task, CreateTask, DeliveryReason};

use super::{body, idempotency_key, now_ms, task_id};
use crate::auth::{Credential, Right};
use crate::error::ApiError;
use crate::exact_json::{self, RawJson};
use crate::quotas;
use crate::store::{Idempotency, NewTask, StoreError, TaskRecord, EXACT_REQUEST};
use crate::AppState;

/// `kind` is a short label, not a payload.
const MAX_KIND_BYTES: usize = 64;

/// The create body. Unknown fields are ignored (PROTOCOL.md).
///
/// Read by core's codec for the checks and their errors; `input` is then
/// taken from the body as text (see [`exact_body`]), so its `Value` here
/// only serves the comparison with rows of earlier servers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    ttl_ms: f64,
    /// A counter: checked to be a safe integer below.
    max_attempts: f64,
    kind: Option<String>,
    input: Option<Value>,
    deadline_ms: Option<f64>,
    unknown_grace_ms: Option<f64>,
    auto_requeue: Option<bool>,
}

/// The optional lifecycle fields of a create (PROTOCOL.md, "Create a
/// task"); core validates them.
#[derive(Debug, Default, Clone, Copy)]
pub struct LifecycleOptions {
    /// Execution deadline from creation: past it the task is `timed_out`.
    pub deadline_ms: Option<f64>,
    /// Grace period of an `unknown` task (else the server's default).
    pub unknown_grace_ms: Option<f64>,
    /// `false`: an `unknown` task is never re-queued automatically.
    pub auto_requeue: Option<bool>,
}

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
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    credential.require_tenant_token("creating a task")?;
    let tenant = credential.into_tenant();
    let raw = body(raw)?;
    let key = idempotency_key(&headers)?;
    let req: CreateBody = from_json_serde_bytes(&raw, "body")?;
    let max_attempts = taskwire_core::value::to_safe_u64(req.max_attempts).ok_or_else(|| {
        taskwire_core::Error::invalid(format!(
            "body.maxAttempts: must be an integer from 0 to {}, got {}",
            taskwire_core::MAX_SAFE_INTEGER,
            taskwire_core::value::number(req.max_attempts)
        ))
    })?;
    // Core's codec accepted the body, so it is UTF-8 JSON.
    let text = std::str::from_utf8(&raw).map_err(|_| ApiError::invalid("body: not UTF-8"))?;
    let exact = exact_body(text)?;
    let idempotency = key.map(|key| Idempotency {
        key,
        request: exact.request,
        // Earlier servers compared bodies as serde_json values: numbers
        // as doubles, `null` kind or input as absent.
        legacy_request: json!({
            "ttlMs": req.ttl_ms,
            "maxAttempts": max_attempts,
            "kind": req.kind,
            "input": req.input,
        })
        .to_string(),
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
        (req.ttl_ms, max_attempts),
        LifecycleOptions {
            deadline_ms: req.deadline_ms,
            unknown_grace_ms: req.unknown_grace_ms,
            auto_requeue: req.auto_requeue,
        },
        req.kind,
        exact.input,
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

/// What the create body says exactly: `input` as sent, and the request
/// in the canonical form that replays under one key are compared in.
struct ExactBody {
    input: Option<RawJson>,
    request: String,
}

/// Reads `ttlMs`, `maxAttempts`, `kind` and `input` from the body text.
/// Two bodies are the same request when these four are equal JSON values
/// with numbers compared exactly (PROTOCOL.md, "Create a task"); a `null`
/// `kind` or `input` is the same as none, and other fields do not count.
fn exact_body(text: &str) -> Result<ExactBody, ApiError> {
    let members = exact_json::members(text).map_err(|e| ApiError::invalid(format!("body: {e}")))?;
    // Core's codec already refused duplicates of these four (serde's
    // derive does); `rev` keeps to JSON.parse's last-wins all the same.
    let field = |name: &str| {
        members
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
            .filter(|v| *v != "null")
    };
    let mut request = String::from(EXACT_REQUEST);
    for name in ["input", "kind", "maxAttempts", "ttlMs"] {
        let canonical = match field(name) {
            Some(v) => exact_json::canonical(v)
                .map_err(|e| ApiError::invalid(format!("body.{name}: {e}")))?,
            None => "null".to_string(),
        };
        request.push_str(&canonical);
        request.push('\n');
    }
    // The lifecycle fields count only when sent, named: a body without
    // them is the same request, in the same form, as before they existed.
    for name in ["autoRequeue", "deadlineMs", "unknownGraceMs"] {
        if let Some(v) = field(name) {
            let canonical = exact_json::canonical(v)
                .map_err(|e| ApiError::invalid(format!("body.{name}: {e}")))?;
            request.push_str(&format!("{name}={canonical}\n"));
        }
    }
    let input = field("input")
        .map(|v| RawJson::parse(v).map_err(|e| ApiError::invalid(format!("body.input: {e}"))))
        .transpose()?;
    Ok(ExactBody { input, request })
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
    if let Some(kind) = &kind {
        if kind.len() > MAX_KIND_BYTES {
            return Err(ApiError::invalid(format!(
                "body.kind: must be at most {MAX_KIND_BYTES} bytes, got {}",
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
        ..CreateTask::new(new_task_id()?, now_ms(), ttl_ms, max_attempts)
    })
    .map_err(|e| ApiError::invalid(format!("body.{}", e.message)))?;
    let open_task_limit = state.quotas.max_open_tasks(&tenant);
    let created = state
        .store
        .create(NewTask {
            open_task_limit,
            tenant,
            view: task.view().clone(),
            kind,
            input,
            idempotency,
        })
        .await
        .inspect_err(|e| {
            if let StoreError::OpenTaskQuota { tenant, .. } = e {
                state.hub.metrics.refused_code(tenant, "open-task-quota");
            }
        })?;
    Ok((created.record, created.created))
}

/// A JSON answer from text already serialized.
fn json_text(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
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
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    body(raw)?;
    let id = task_id(path)?;
    credential.require(Right::Deliver, &id)?;
    let tenant = credential.into_tenant();
    let key = idempotency_key(&headers)?
        .ok_or_else(|| ApiError::invalid("Idempotency-Key: header is required"))?;
    let delivery = state
        .store
        .deliver(tenant, id.clone(), key.clone(), now_ms())
        .await?;
    match delivery.reason {
        DeliveryReason::Delivered => Ok((StatusCode::CREATED, Json(delivery)).into_response()),
        DeliveryReason::DuplicateDelivery => Ok((StatusCode::OK, Json(delivery)).into_response()),
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

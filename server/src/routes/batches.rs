//! `POST /v1/batches` (PROTOCOL.md §Create a batch): many tasks in one
//! call, whole or nothing, idempotent under an `Idempotency-Key`.

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use taskwire_wire::from_json_serde_bytes;

use super::tasks::{count_open_task_refusal, new_task_view, parse_create};
use super::{check_id, idempotency_key, now_ms, read_body};
use crate::auth::Credential;
use crate::error::ApiError;
use crate::quotas;
use crate::store::batches::{new_batch_id, MAX_ITEMS};
use crate::store::{BatchCreated, Idempotency, NewBatch, NewTask, EXACT_REQUEST};
use crate::wire_json::json_text;
use crate::AppState;
use taskwire_wire::exact;

/// A batch body may be this large (500 items of a few hundred bytes each
/// fit in a fifth of it); other routes keep [`super::BODY_LIMIT`].
pub const BATCH_BODY_LIMIT: usize = 1024 * 1024;

/// The batch id from the path: non-blank, at most 255 bytes.
#[derive(Debug, Clone)]
pub struct BatchId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for BatchId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(id) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(format!("batchId: {}", e.body_text())))?;
        check_id("batchId", &id)?;
        Ok(BatchId(id))
    }
}

/// Creates a batch for the caller's tenant.
pub async fn create(
    State(state): State<AppState>,
    credential: Credential,
    headers: HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    // Judged from the headers, before up to 1 MiB of body is buffered.
    credential.require_tenant_token("creating a batch")?;
    let tenant = credential.into_tenant();
    let raw = read_body(raw, BATCH_BODY_LIMIT).await?;
    let key = idempotency_key(&headers)?;
    let (tasks, request) = read_items(&state, &tenant, &raw)?;
    let idempotency = key.map(|key| Idempotency {
        key,
        // A batch's form is never a single create's, so a key used for
        // one is refused for the other.
        legacy_request: request.clone(),
        request,
    });
    let open_task_limit = state.quotas.max_open_tasks(&tenant);
    if let Some(max) = open_task_limit.filter(|max| tasks.len() as u64 > *max) {
        return Err(quotas::batch_over_quota(&tenant, tasks.len(), max));
    }
    // One create against the rate, however many items.
    let token = match state.quotas.take_create(&tenant) {
        Ok(token) => token,
        Err(limited) => return replay_or(&state, tenant, idempotency, limited).await,
    };
    let created = state
        .store
        .create_batch(NewBatch {
            id: new_batch_id().map_err(ApiError::internal)?,
            tenant,
            tasks,
            idempotency,
            open_task_limit,
            created_at_ms: now_ms(),
        })
        .await
        .inspect(|created| {
            for task in &created.tasks {
                let kind = task.kind.as_deref().unwrap_or("");
                state.hub.work.offer(&task.tenant, kind);
            }
        })
        .inspect_err(|e| count_open_task_refusal(&state, e));
    let created = match created {
        Ok(c) => c,
        Err(e) => {
            let e = ApiError::from(e);
            if e.code == "open-task-quota" {
                return Err(quotas::answered_late(e).await);
            }
            return Err(e);
        }
    };
    if created.created {
        token.spend();
    }
    Ok(answer(&state, created))
}

/// 201 with the new batch, or 200 with the one an earlier create under
/// the same key made.
fn answer(state: &AppState, created: BatchCreated) -> Response {
    let status = if created.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    json_text(status, created.to_json(state.store.epoch()))
}

/// A batch past the tenant's create rate: an idempotent replay is still
/// answered; anything else gets the 429.
async fn replay_or(
    state: &AppState,
    tenant: String,
    idempotency: Option<Idempotency>,
    limited: ApiError,
) -> Result<Response, ApiError> {
    state.hub.metrics.refused(&tenant, &limited);
    let Some(idem) = idempotency else {
        return Err(quotas::answered_late(limited).await);
    };
    match state.store.replay_batch(tenant, idem).await? {
        Some(replay) => Ok(answer(state, replay)),
        None => Err(quotas::answered_late(limited).await),
    }
}

/// The items, each read and checked as a single create's body, and the
/// whole request's canonical form (every item's, in order).
fn read_items(
    state: &AppState,
    tenant: &str,
    raw: &[u8],
) -> Result<(Vec<NewTask>, String), ApiError> {
    // taskwire-wire first: malformed JSON gets its errors, as everywhere.
    let _: serde::de::IgnoredAny = from_json_serde_bytes(raw, "body")?;
    let text = std::str::from_utf8(raw).map_err(|_| ApiError::invalid("body: not UTF-8"))?;
    let members = exact::members(text).map_err(|e| ApiError::invalid(format!("body: {e}")))?;
    let items = members
        .iter()
        .rev()
        .find(|(k, _)| k == "items")
        .map(|(_, v)| *v)
        .ok_or_else(|| ApiError::invalid("body.items: is required"))?;
    let items = exact::elements(items)
        .map_err(|e| ApiError::invalid(format!("body.items: {e}")))?
        .ok_or_else(|| ApiError::invalid("body.items: must be an array of create bodies"))?;
    if items.is_empty() || items.len() > MAX_ITEMS {
        return Err(ApiError::invalid(format!(
            "body.items: must hold 1 to {MAX_ITEMS} items, got {}",
            items.len()
        )));
    }
    let mut request = format!("{EXACT_REQUEST}batch\n");
    let mut tasks = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("body.items[{i}]");
        let parsed = parse_create(item.as_bytes(), &field)?;
        let view = new_task_view(
            state,
            &field,
            (parsed.ttl_ms, parsed.max_attempts),
            parsed.lifecycle,
            &parsed.kind,
        )?;
        request.push_str("item\n");
        request.push_str(&parsed.request);
        tasks.push(NewTask {
            tenant: tenant.to_string(),
            view,
            kind: parsed.kind,
            input: parsed.input,
            idempotency: None,
            open_task_limit: None,
        });
    }
    Ok((tasks, request))
}

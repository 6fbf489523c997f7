//! `POST /v1/tasks`, `GET /v1/tasks/{id}`, `POST /v1/tasks/{id}/deliveries`.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use taskwire_core::wire::from_json_serde_bytes;
use taskwire_core::{create_task, CreateTask, DeliveryReason};

use super::{body, idempotency_key, now_ms, task_id};
use crate::auth::Tenant;
use crate::error::ApiError;
use crate::store::NewTask;
use crate::AppState;

/// `kind` is a short label, not a payload.
const MAX_KIND_BYTES: usize = 64;

/// The create body. Unknown fields are ignored (PROTOCOL.md).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    ttl_ms: f64,
    /// A counter: checked to be a safe integer below.
    max_attempts: f64,
    kind: Option<String>,
    input: Option<Value>,
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
    Tenant(tenant): Tenant,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
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
    let record = create_for(
        &state,
        tenant,
        key,
        req.ttl_ms,
        max_attempts,
        req.kind,
        req.input,
    )
    .await?;
    let status = if record.1 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(record.0)).into_response())
}

/// Validates with core and stores; shared with the demo workloads.
/// Returns the task's JSON and whether it was created now.
pub async fn create_for(
    state: &AppState,
    tenant: String,
    key: Option<String>,
    ttl_ms: f64,
    max_attempts: u64,
    kind: Option<String>,
    input: Option<Value>,
) -> Result<(Value, bool), ApiError> {
    if let Some(kind) = &kind {
        if kind.len() > MAX_KIND_BYTES {
            return Err(ApiError::invalid(format!(
                "body.kind: must be at most {MAX_KIND_BYTES} bytes, got {}",
                kind.len()
            )));
        }
    }
    let task = create_task(&CreateTask::new(
        new_task_id()?,
        now_ms(),
        ttl_ms,
        max_attempts,
    ))
    .map_err(|e| ApiError::invalid(format!("body.{}", e.message)))?;
    // Bodies are compared as JSON values: serde_json's maps are sorted, so
    // key order and whitespace do not matter.
    let request =
        json!({"ttlMs": ttl_ms, "maxAttempts": max_attempts, "kind": kind, "input": input})
            .to_string();
    let created = state
        .store
        .create(NewTask {
            tenant,
            view: task.view().clone(),
            kind,
            input,
            idempotency: key.map(|k| (k, request)),
        })
        .await?;
    Ok((created.record.to_json(), created.created))
}

/// The caller's task.
pub async fn get(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let id = task_id(path)?;
    let record = state.store.get(tenant, id).await?;
    Ok(Json(record.to_json()))
}

/// Hands a succeeded task's result over, at most once per key.
pub async fn deliver(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    body(raw)?;
    let id = task_id(path)?;
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

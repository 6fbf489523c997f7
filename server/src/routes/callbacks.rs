//! `POST /v1/tasks/{id}/callbacks`: executor events, signed (Standard
//! Webhooks), not bearer-authenticated.
//!
//! Order matters: the signature is checked on the raw bytes first, so an
//! unsigned or stale request is 401 before anything is parsed or stored.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use taskwire_core::check_callback_id;
use taskwire_core::wire::from_json_bytes;
use taskwire_core::Event;

use super::{body, check_id, now_secs, task_id};
use crate::error::ApiError;
use crate::store::{Callback, CallbackAnswer};
use crate::AppState;

/// Judges one callback; the answer goes out after its commit.
pub async fn callback(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Json<CallbackAnswer>, ApiError> {
    let raw = body(raw)?;
    let callback_id = state
        .secret
        .verify(&headers, &raw, now_secs())
        .map_err(|refused| {
            state.stats.rejected_signature();
            ApiError::unauthorized(refused.0)
        })?;
    let task_id = task_id(path)?;
    check_id("webhook-id", &callback_id)?;
    check_callback_id(Some(&callback_id))?;
    let event: Event = from_json_bytes(&raw, "event")?;
    let answer = state
        .store
        .callback(Callback {
            task_id,
            callback_id,
            event,
        })
        .await?;
    state.stats.callback(answer.reason);
    Ok(Json(answer))
}

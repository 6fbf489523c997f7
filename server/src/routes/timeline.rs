//! `GET /v1/tasks/{id}/timeline` (PROTOCOL.md §Timeline): the task's
//! history as a person reads it, and for a cancelled task what the
//! cancel did. Core reads the history and writes the answer
//! (`taskwire_core::json::timeline_answer`); this only fetches it.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::task_id;
use crate::auth::{Credential, Right};
use crate::error::ApiError;
use crate::wire_json::json_text;
use crate::AppState;

/// The caller's task's timeline: a tenant token, or a browser token that
/// may watch the task (a timeline says no more than the history a watch
/// is sent).
pub async fn timeline(
    State(state): State<AppState>,
    credential: Credential,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = task_id(path)?;
    credential.require(Right::Watch, &id)?;
    let tenant = credential.into_tenant();
    let (view, history) = state.store.history(tenant, id).await?;
    Ok(json_text(
        StatusCode::OK,
        taskwire_core::json::timeline_answer(&view, &history),
    ))
}

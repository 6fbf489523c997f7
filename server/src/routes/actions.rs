//! `POST /v1/tasks/{id}/cancel` and `POST /v1/tasks/{id}/decisions`: what
//! people ask of a task, through the client API (bearer-authenticated).
//!
//! The body says what is asked; the server adds when (its clock) and who
//! (the caller's credential, `Credential::actor`: `user:<sub>` for a
//! browser token, `tenant:<name>` for a tenant token; never the body, so
//! a page cannot decide in someone else's name). A browser token needs the
//! `cancel` or `decide` right on the task (403 `right-not-granted`; a task
//! out of its scope is 404). Core judges it as any event: a cancel repeated is
//! `duplicate-cancel`, a decision on another artifact or an older version
//! is `stale-decision`, and neither changes anything. Every judged request
//! is answered 200 with core's reason and the task as it is now, so a
//! retry after a lost answer is safe and says what happened.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{Map, Value};
use taskwire_core::{Event, EventKind, Reason, TaskView};
use taskwire_wire::from_json;

use super::{body, now_ms, TaskId};
use crate::auth::{Credential, Right};
use crate::error::ApiError;
use crate::store::Action;
use crate::AppState;

/// The answer to a person's request.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionAnswer {
    /// The task changed (one new version).
    pub changed: bool,
    /// The request repeated one already judged.
    pub duplicate: bool,
    /// Core's reason (`cancel-requested`, `cancelled`, `approved`,
    /// `stale-decision`, …).
    pub reason: Reason,
    /// The task after the request.
    pub task: TaskView,
    /// The store's epoch (PROTOCOL.md §Epoch).
    pub epoch: String,
}

/// Asks to stop the task: `{"reason"?: string}` (an empty body is no
/// reason).
pub async fn cancel(
    State(state): State<AppState>,
    credential: Credential,
    TaskId(id): TaskId,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let raw = body(raw)?;
    let fields = if raw.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        request_fields(&raw)?
    };
    act(state, credential, id, EventKind::Cancel, fields).await
}

/// A decision on the task's held artifact: `{"decision": "approve" |
/// "request_changes" | "reject", "artifactHash": string, "version":
/// number, "reason"?: string}`.
pub async fn decide(
    State(state): State<AppState>,
    credential: Credential,
    TaskId(id): TaskId,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let raw = body(raw)?;
    let fields = request_fields(&raw)?;
    act(state, credential, id, EventKind::Decide, fields).await
}

/// The body's fields, refusing those the server fills in itself.
fn request_fields(raw: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(raw)
        .map_err(|e| ApiError::invalid(format!("body: not JSON ({e})")))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::invalid("body: must be a JSON object"));
    };
    for (name, why) in [
        ("type", "the route says what is asked"),
        ("atMs", "the server's clock says when"),
        ("actor", "the caller's credential says who"),
    ] {
        if fields.contains_key(name) {
            return Err(ApiError::invalid(format!(
                "body.{name}: must not be sent ({why})"
            )));
        }
    }
    Ok(fields)
}

/// Makes the event (validated field by field by core), checks the
/// caller's right on the task (after the body: 400 before 404), and hands
/// it to the store.
async fn act(
    state: AppState,
    credential: Credential,
    task_id: String,
    kind: EventKind,
    mut fields: Map<String, Value>,
) -> Result<Response, ApiError> {
    fields.insert("type".into(), kind.as_str().into());
    fields.insert("atMs".into(), now_ms().into());
    fields.insert("actor".into(), credential.actor().into());
    let event: Event = from_json(&Value::Object(fields).to_string(), "body")?;
    let right = match kind {
        EventKind::Cancel => Right::Cancel,
        _ => Right::Decide,
    };
    credential.require(right, &task_id)?;
    let acted = state
        .store
        .act(Action {
            tenant: credential.into_tenant(),
            task_id,
            event,
        })
        .await?;
    let answer = ActionAnswer {
        changed: acted.answer.changed,
        duplicate: acted.answer.duplicate,
        reason: acted.answer.reason,
        task: acted.task,
        epoch: state.store.epoch().to_string(),
    };
    Ok((StatusCode::OK, Json(answer)).into_response())
}

//! `POST /v1/tasks/{id}/cancel`, `POST /v1/tasks/{id}/decisions` and
//! `POST /v1/batches/{id}/cancel`: what people ask of a task or of the
//! rest of a batch, through the client API (bearer-authenticated).
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

use std::borrow::Cow;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use taskwire_core::json::{from_value, Value};
use taskwire_core::{Event, EventKind, Reason, TaskView};
use taskwire_wire::parse_value;

use super::batches::BatchId;
use super::{now_ms, read_body, TaskId, BODY_LIMIT};
use crate::auth::{Credential, Right};
use crate::error::ApiError;
use crate::store::{Action, BatchCancel};
use crate::wire_json::WireJson;
use crate::AppState;

/// An object's members as core's parser gives them: in document order,
/// duplicates kept (core's reader takes the last, as `JSON.parse` does).
type Members<'a> = Vec<(Cow<'a, str>, Value<'a>)>;

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
    raw: Body,
) -> Result<Response, ApiError> {
    credential.require(Right::Cancel, &id)?;
    let raw = read_body(raw, BODY_LIMIT).await?;
    act(
        state,
        credential,
        id,
        EventKind::Cancel,
        cancel_fields(&raw)?,
    )
    .await
}

/// A decision on the task's held artifact: `{"decision": "approve" |
/// "request_changes" | "reject", "artifactHash": string, "version":
/// number, "reason"?: string}`.
pub async fn decide(
    State(state): State<AppState>,
    credential: Credential,
    TaskId(id): TaskId,
    raw: Body,
) -> Result<Response, ApiError> {
    credential.require(Right::Decide, &id)?;
    let raw = read_body(raw, BODY_LIMIT).await?;
    let fields = request_fields(&raw)?;
    act(state, credential, id, EventKind::Decide, fields).await
}

/// The body's fields, refusing those the server fills in itself.
fn request_fields(raw: &[u8]) -> Result<Members<'_>, ApiError> {
    // The same words as the routes whose body taskwire-wire reads whole.
    let text =
        std::str::from_utf8(raw).map_err(|_| ApiError::invalid("body: body is not valid UTF-8"))?;
    let value = parse_value(text).map_err(|e| ApiError::invalid(format!("body: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(ApiError::invalid("body: must be a JSON object"));
    };
    for (name, why) in [
        ("type", "the route says what is asked"),
        ("atMs", "the server's clock says when"),
        ("actor", "the caller's credential says who"),
    ] {
        if fields.iter().any(|(key, _)| key == name) {
            return Err(ApiError::invalid(format!(
                "body.{name}: must not be sent ({why})"
            )));
        }
    }
    Ok(fields)
}

/// The event a person's request makes: the body's fields (validated field
/// by field by core), the route's `type`, the server's clock and the
/// caller's actor.
fn person_event(
    credential: &Credential,
    kind: EventKind,
    mut fields: Members<'_>,
) -> Result<Event, ApiError> {
    // Read from the tree as it is: no text is written and parsed again.
    fields.extend([
        (Cow::Borrowed("type"), string(kind.as_str())),
        (Cow::Borrowed("atMs"), Value::Number(now_ms())),
        (Cow::Borrowed("actor"), string(credential.actor())),
    ]);
    Ok(from_value(&Value::Object(fields), "body")?)
}

/// The body of a cancel, a task's or a batch's: `{"reason"?: string}`, or
/// an empty body (no reason).
fn cancel_fields(raw: &[u8]) -> Result<Members<'_>, ApiError> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        Ok(Members::new())
    } else {
        request_fields(raw)
    }
}

/// The answer to a batch cancel (PROTOCOL.md §Cancel a batch).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchCancelAnswer {
    /// The batch.
    pub batch_id: String,
    /// How many tasks the batch has.
    pub size: u64,
    /// How many tasks the cancel changed.
    pub changed: u64,
    /// Core's reasons over the tasks that were still open, counted.
    pub reasons: std::collections::BTreeMap<&'static str, u64>,
    /// The store's epoch (PROTOCOL.md §Epoch).
    pub epoch: String,
}

/// `POST /v1/batches/{id}/cancel`: cancels every task of the batch that
/// is not terminal, each as `POST /v1/tasks/{id}/cancel` would, in one
/// commit. A tenant token, or a browser token whose `batch` claim names
/// the batch and which has the `cancel` right. Repeating it is safe: the
/// tasks already asked count as `duplicate-cancel`, nothing changes.
pub async fn cancel_batch(
    State(state): State<AppState>,
    credential: Credential,
    BatchId(batch_id): BatchId,
    raw: Body,
) -> Result<Response, ApiError> {
    credential.require_batch(Right::Cancel, &batch_id)?;
    let raw = read_body(raw, BODY_LIMIT).await?;
    let event = person_event(&credential, EventKind::Cancel, cancel_fields(&raw)?)?;
    let done = state
        .store
        .cancel_batch(BatchCancel {
            tenant: credential.into_tenant(),
            batch_id: batch_id.clone(),
            event,
        })
        .await?;
    let answer = BatchCancelAnswer {
        batch_id,
        size: done.size,
        changed: done.changed,
        reasons: done.reasons,
        epoch: state.store.epoch().to_string(),
    };
    Ok(WireJson(answer).into_response())
}

/// Makes the event and hands it to the store. The caller's right on the
/// task was checked before the body was read (a browser token without it
/// is refused without its body).
async fn act(
    state: AppState,
    credential: Credential,
    task_id: String,
    kind: EventKind,
    fields: Members<'_>,
) -> Result<Response, ApiError> {
    let event = person_event(&credential, kind, fields)?;
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
    Ok(WireJson(answer).into_response())
}

fn string<'a>(s: impl Into<Cow<'a, str>>) -> Value<'a> {
    Value::String(s.into())
}

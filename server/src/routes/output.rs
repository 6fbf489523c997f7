//! `POST /v1/tasks/{id}/output/{stream}`: an executor appends a chunk to
//! a task's output stream (PROTOCOL.md §Live output), signed like a
//! callback with the task's tenant's secret.
//!
//! The order is the callback's (`callbacks.rs`), so that an unsigned
//! request costs almost nothing and learns nothing: the signature headers,
//! the ids and the declared length; the task's tenant (an unknown task is
//! hashed with a decoy key and answered as a wrong signature); the body,
//! hashed as it arrives; the signature; the body's `taskId` and `stream`
//! against the path (a body signed for another task or stream is a 401).
//! Then core checks the chunk (400 naming the field) and judges it in the
//! store ([`crate::store::output`]).
//!
//! A signed append is not remembered as used, unlike a callback: it is
//! addressed by `(attempt, offset)`, so the same request sent again is a
//! `duplicate-chunk`, and after a newer attempt a `stale-attempt`.

use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use taskwire_core::json::{object, Fields, FromJson, Path as JsonPath, Value};
use taskwire_core::output::{Chunk, StreamName, MAX_CHUNK_UNITS};
use taskwire_core::{AppendReason, Appended};
use taskwire_wire::from_json_bytes;

use super::callbacks::{declared_length, joined, read_body, verifier_for};
use super::{check_id, now_secs};
use crate::error::{quoted, ApiError};
use crate::signature::SignedHeaders;
use crate::store::OutputAppend;
use crate::wire_json::json_text;
use crate::AppState;

/// The largest append body: a chunk of core's most UTF-16 units
/// (`MAX_CHUNK_UNITS`), each written as JSON's longest escape (`\u0000`,
/// 6 bytes), and room for the other fields. The other routes' 64 KiB
/// would refuse a chunk core allows.
pub const APPEND_BODY_LIMIT: usize = 6 * MAX_CHUNK_UNITS as usize + 1024;

/// Judges one append; the answer goes out after its commit.
pub async fn append(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let refuse = |message: String| {
        state.stats.rejected_signature();
        ApiError::unauthorized(message)
    };
    let signed = SignedHeaders::parse(&headers, now_secs()).map_err(|r| refuse(r.0))?;
    check_id("webhook-id", &signed.id)?;
    let Path((task_id, stream)) =
        path.map_err(|e| ApiError::invalid(format!("path: {}", e.body_text())))?;
    check_id("taskId", &task_id)?;
    let stream = StreamName::new(&stream, "stream")?;
    if declared_length(&headers)? > APPEND_BODY_LIMIT as u64 {
        return Err(ApiError::too_large(APPEND_BODY_LIMIT));
    }

    let (tenant, mut verifier, keep) = verifier_for(&state, &signed, &task_id).await?;
    let timeout = Duration::from_millis(state.config.callback_body_timeout_ms);
    let limits = (timeout, APPEND_BODY_LIMIT);
    let pieces = read_body(body, &mut verifier, keep, limits).await?;
    if tenant.is_none() || !verifier.finish(&signed) {
        return Err(refuse(format!(
            "webhook-signature: no valid signature for task {} (check the secret of the \
             task's tenant, and the task id)",
            quoted(&task_id)
        )));
    }
    let raw = joined(pieces);
    let body: AppendBody = from_json_bytes(&raw, "body")?;
    if body.task_id != task_id || body.stream != stream.as_str() {
        return Err(refuse(format!(
            "body.taskId: the body is signed for task {} stream {}, not for this one",
            quoted(&body.task_id),
            quoted(&body.stream)
        )));
    }
    let chunk = Chunk::new(body.attempt, body.offset, body.text, "body")?;
    let appended = state
        .store
        .append_output(OutputAppend {
            task_id,
            stream,
            chunk,
        })
        .await?;
    answer(appended, &body.stream)
}

/// An `appended` or `duplicate-chunk` is delivered (200); anything else is
/// a 409 whose code is core's reason and whose message names the field.
fn answer(a: Appended, stream: &str) -> Result<Response, ApiError> {
    let code = a.reason.as_str();
    if a.reason.accepted() {
        return Ok(json_text(StatusCode::OK, appended_json(&a)));
    }
    let message = match a.reason {
        AppendReason::OutputGap => format!(
            "body.offset: starts past the end of stream {}; the next chunk starts at {}",
            quoted(stream),
            a.expected
        ),
        AppendReason::ChunkConflict => format!(
            "body.text: differs from the text stream {} already holds at offset {}",
            quoted(stream),
            a.offset
        ),
        AppendReason::StaleAttempt => {
            "body.attempt: a newer attempt of the task has started; this one's output is fenced off"
                .to_string()
        }
        AppendReason::NotStarted => {
            "body.attempt: this attempt of the task has not started".to_string()
        }
        AppendReason::OutputClosed => {
            "body.attempt: the task has ended; its output is closed".to_string()
        }
        AppendReason::Appended | AppendReason::DuplicateChunk => String::new(),
    };
    Err(ApiError::conflict(code, message))
}

/// The answer to a delivered append: `{reason, attempt, offset, expected,
/// superseded}` (`expected`: where the next chunk starts).
fn appended_json(a: &Appended) -> String {
    object(&[
        ("reason", &a.reason.as_str()),
        ("attempt", &a.attempt),
        ("offset", &a.offset),
        ("expected", &a.expected),
        ("superseded", &a.superseded),
    ])
}

/// An append's body: `{taskId, stream, attempt, offset, text}`. The task
/// and the stream are signed with the chunk, so a signed body cannot be
/// sent to another task or stream.
struct AppendBody {
    task_id: String,
    stream: String,
    attempt: u64,
    offset: u64,
    text: String,
}

impl FromJson for AppendBody {
    fn from_json(value: &Value<'_>, at: JsonPath<'_>) -> Result<Self, taskwire_core::json::Error> {
        let f = Fields::of(value, at)?;
        Ok(AppendBody {
            task_id: f.req("taskId")?,
            stream: f.req("stream")?,
            attempt: f.req("attempt")?,
            offset: f.req("offset")?,
            text: f.req("text")?,
        })
    }
}

//! `POST /v1/tasks/{id}/callbacks`: executor events, signed (Standard
//! Webhooks) with the task's tenant's secret, not bearer-authenticated.
//!
//! Order matters (PROTOCOL.md §Executor callback), so that a request
//! nobody signed costs almost nothing and learns nothing:
//! 1. The headers, before any of the body is read: each signature header
//!    exactly once, a timestamp within the tolerance, a well-formed `v1`
//!    signature (401); the callback id and the task id (400); a declared
//!    length within the limit (413).
//! 2. The task's tenant (one indexed read), whose secrets must match. An
//!    unknown task has none: its body is still read (not kept) and hashed
//!    with a decoy key, and the answer is the 401 of a wrong signature, so
//!    neither the answer nor its timing tells whether the task exists.
//! 3. The body, within `--callback-body-timeout-ms` (408 past it), hashed
//!    as it arrives.
//! 4. The signature (401); the body's `taskId` against the path (401: a
//!    body signed for another task); the event (400).
//! 5. The store: the transition (200), or 422 for a callback id the
//!    tenant already used on another task. The signed request (its
//!    timestamp and the body's digest) goes with it: it is used once
//!    (`store/callback_replays.rs`).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use taskwire_core::json::{Fields, FromJson, Path as JsonPath, Value};
use taskwire_core::{check_callback_id, check_report_clock};
use taskwire_core::{Event, EventKind, Millis};
use taskwire_wire::from_json_bytes;
use tokio::time::Instant;

use super::{check_id, now_secs, task_id, BODY_LIMIT};
use crate::error::{quoted, ApiError};
use crate::serve::{body_timed_out, BodyTimedOut};
use crate::signature::{SignedHeaders, Verifier};
use crate::store::{Callback, CallbackAnswer, SignedRequest};
use crate::wire_json::WireJson;
use crate::AppState;

/// Judges one callback; the answer goes out after its commit.
pub async fn callback(
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<WireJson<EpochCallbackAnswer>, ApiError> {
    let refuse = |message: String| {
        state.stats.rejected_signature();
        ApiError::unauthorized(message)
    };
    let signed = SignedHeaders::parse(&headers, now_secs()).map_err(|r| refuse(r.0))?;
    check_id("webhook-id", &signed.id)?;
    check_callback_id(Some(&signed.id))?;
    let task_id = task_id(path)?;
    if declared_length(&headers)? > BODY_LIMIT as u64 {
        return Err(ApiError::too_large(BODY_LIMIT));
    }

    let (tenant, mut verifier, keep) = verifier_for(&state, &signed, &task_id).await?;
    let timeout = Duration::from_millis(state.config.callback_body_timeout_ms);
    let pieces = read_body(body, &mut verifier, keep, (timeout, BODY_LIMIT)).await?;
    let valid = verifier.finish(&signed);
    let Some(tenant) = tenant.filter(|_| valid) else {
        return Err(refuse(format!(
            "webhook-signature: no valid signature for task {} (check the secret of the \
             task's tenant, and the task id)",
            quoted(&task_id)
        )));
    };

    let raw = joined(pieces);
    let named = from_json_bytes::<NamedTask>(&raw, "event")?.0;
    if named != task_id {
        return Err(refuse(format!(
            "event.taskId: the body is signed for task {}, not for this one",
            quoted(&named)
        )));
    }
    // Parsed again, by the same parser from the same bytes, so the event
    // and the task it names cannot disagree; a body for another task was
    // refused above, before its event was looked at.
    let event: Event = from_json_bytes(&raw, "event")?;
    refuse_if_not_an_executors(&event)?;
    let event = with_default_lease(event, state.config.lease_ms);
    let received = Millis::new(super::now_ms(), "nowMs")?;
    check_report_clock(&event, received)?;
    let signed_request = SignedRequest {
        at: signed.timestamp_secs(),
        body_sha256: Sha256::digest(&raw).into(),
    };
    let answer = state
        .store
        .callback(Callback {
            tenant,
            task_id,
            callback_id: signed.id,
            event,
            received,
            signed: signed_request,
        })
        .await?;
    state.stats.callback(answer.reason);
    Ok(WireJson(EpochCallbackAnswer {
        answer,
        epoch: state.store.epoch().to_string(),
    }))
}

/// A callback's answer with the store's epoch (PROTOCOL.md §Epoch): its
/// `version` counts in that history.
#[derive(Debug, serde::Serialize)]
pub struct EpochCallbackAnswer {
    #[serde(flatten)]
    answer: CallbackAnswer,
    epoch: String,
}

/// An executor reports what its attempt did. A person's request (`cancel`,
/// `decide`) has its own route, which takes the actor from the caller's
/// credential; the sweeper's own events (`lapse`, `abandon`, `timeout`)
/// are the server's to record, at the time they fell due. Either one in a
/// signed callback would let an executor forge them, so they are refused
/// (422 `not-an-executor-event`) before the store sees them. `expire`
/// stays accepted, as in the seed: it ends a live task as expired, and is
/// recorded at the task's `expiresAtMs` whatever its own time.
fn refuse_if_not_an_executors(event: &Event) -> Result<(), ApiError> {
    let kind = event.kind();
    let instead = match kind {
        EventKind::Cancel => "POST /v1/tasks/{id}/cancel",
        EventKind::Decide => "POST /v1/tasks/{id}/decisions",
        EventKind::Lapse | EventKind::Abandon | EventKind::Timeout => {
            "the server's sweeper, when a lease, grace period or deadline runs out"
        }
        _ => return Ok(()),
    };
    Err(ApiError::unprocessable(
        "not-an-executor-event",
        format!(
            "event.type: {} is not an executor's event (it comes from {instead})",
            quoted(kind.as_str())
        ),
    ))
}

/// A `start` that opts into attempts (it carries `attempt`) but names no
/// `leaseMs` gets the server's (`--lease-ms`): such an executor is
/// expected to report or heartbeat, and a silent one lapses to
/// `unknown`. Without `attempt` (a seed-000 executor) nothing changes: no
/// lease, as in the seed. The same bytes always become the same event, so
/// a redelivery is still the same callback.
fn with_default_lease(event: Event, lease_ms: u64) -> Event {
    match event {
        Event::Start {
            at_ms,
            worker,
            attempt: Some(attempt),
            lease_ms: None,
            plan,
        } => Event::Start {
            at_ms,
            worker,
            attempt: Some(attempt),
            lease_ms: Millis::new(lease_ms as f64, "leaseMs").ok(),
            plan,
        },
        other => other,
    }
}

/// The body's `taskId`: the task its signature is for.
struct NamedTask(String);

impl FromJson for NamedTask {
    fn from_json(value: &Value<'_>, at: JsonPath<'_>) -> Result<Self, taskwire_core::json::Error> {
        let fields = Fields::of(value, at)?;
        fields
            .get("taskId")?
            .map(NamedTask)
            .ok_or_else(|| fields.missing("taskId", "required: the task this callback is for"))
    }
}

/// `Content-Length`, when sent (hyper has already refused a malformed
/// one); a chunked body counts as it arrives.
pub(super) fn declared_length(headers: &HeaderMap) -> Result<u64, ApiError> {
    match headers.get(header::CONTENT_LENGTH) {
        None => Ok(0),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| ApiError::invalid("Content-Length: must be an integer")),
    }
}

/// Pieces of a body at least this long are kept as they came; shorter
/// ones are copied together (see [`read_body`]).
const SMALL_PIECE: usize = 4096;

/// The signature check of a signed request about `task_id` (a callback,
/// an output append): the task's tenant, a verifier over that tenant's
/// secrets, and whether the body is worth keeping. An unknown task, or a
/// tenant without secrets, gets a decoy verifier that refuses whatever
/// the body is, after reading it as a real one would: the answer takes
/// the same time, so it tells nobody which task ids exist.
pub(super) async fn verifier_for(
    state: &AppState,
    signed: &SignedHeaders,
    task_id: &str,
) -> Result<(Option<String>, Verifier, bool), ApiError> {
    let tenant = state.store.task_tenant(task_id.to_owned()).await?;
    let secrets = tenant
        .as_deref()
        .map(|t| state.keyring.secrets_of(t))
        .filter(|s| !s.is_empty());
    let verifier = match secrets {
        Some(secrets) => signed.verifier(secrets),
        None => signed.decoy(state.keyring.decoy()),
    };
    let keep = secrets.is_some();
    Ok((tenant, verifier, keep))
}

/// Reads the body within `timeout` and `limit` bytes, feeding `verifier`; keeps the bytes
/// only when `keep` (a body that cannot verify is hashed and dropped).
///
/// Until the signature is checked a body should cost no more than its
/// bytes: large pieces are kept as hyper hands them over (slices of its
/// read buffer, not copies), and small ones (a chunked body may come a
/// byte at a time, each piece a handle) are copied into one. At most
/// ~2 × 64 KiB / 4 KiB handles; joined once, by [`joined`], once verified.
pub(super) async fn read_body(
    body: Body,
    verifier: &mut Verifier,
    keep: bool,
    (timeout, limit): (Duration, usize),
) -> Result<Vec<Bytes>, ApiError> {
    let deadline = Instant::now() + timeout;
    let mut stream = body.into_data_stream();
    let mut kept = Vec::new();
    let mut small: Vec<u8> = Vec::new();
    let mut total = 0usize;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next())
            .await
            .map_err(|_| ApiError::request_timeout(timeout.as_millis()))?;
        let Some(chunk) = next else {
            if !small.is_empty() {
                kept.push(Bytes::from(small));
            }
            return Ok(kept);
        };
        // The serving layer's own body timeout (`--body-timeout-ms`) may
        // end the stream first: that is a 408 too, not a bad body.
        let chunk = chunk.map_err(|e| match body_timed_out(&e) {
            Some(BodyTimedOut(limit)) => ApiError::request_timeout(limit.as_millis()),
            None => ApiError::invalid(format!("body: {e}")),
        })?;
        total += chunk.len();
        if total > limit {
            return Err(ApiError::too_large(limit));
        }
        verifier.update(&chunk);
        if !keep {
            continue;
        }
        if chunk.len() >= SMALL_PIECE {
            if !small.is_empty() {
                kept.push(Bytes::from(std::mem::take(&mut small)));
            }
            kept.push(chunk);
        } else {
            small.extend_from_slice(&chunk);
        }
    }
}

/// The body in one piece (a copy only when it came in several).
pub(super) fn joined(mut pieces: Vec<Bytes>) -> Bytes {
    match pieces.len() {
        0 => Bytes::new(),
        1 => pieces.pop().unwrap_or_default(),
        _ => Bytes::from(pieces.concat()),
    }
}

//! `GET /v1/tasks/{id}/events`: the resume answers as Server-Sent Events.
//!
//! First message: the answer for the starting cursor (`Last-Event-ID`,
//! else `?cursor`, else 0). Then one message per wake, answering the
//! previous message's `id`. The stream ends after a terminal message,
//! and a request whose cursor is already the terminal version is answered
//! 204 No Content, which stops a standard `EventSource` for good.

use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use taskwire_core::{ResumeAnswer, ResumeMode, MAX_SAFE_INTEGER};

use super::{parse_int, task_id, Query};
use crate::auth::{Right, WatchCredential};
use crate::error::ApiError;
use crate::hub::{answer_from, Subscription, Wake};
use crate::limits::WatchPermit;
use crate::metrics::Held;
use crate::AppState;

struct Stream {
    /// The stream's slot among the held watches, for as long as it is open.
    _held: WatchPermit,
    /// The stream in `/metrics`' held-stream gauge, likewise.
    _counted: Held,
    state: AppState,
    tenant: String,
    id: String,
    sub: Subscription,
    cursor: u64,
    pending: Option<ResumeAnswer>,
    done: bool,
}

/// Opens the stream (errors before the first byte are normal HTTP errors).
pub async fn events(
    State(state): State<AppState>,
    WatchCredential(credential): WatchCredential,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = task_id(path)?;
    // `?cursor=` is judged even when `Last-Event-ID` wins over it: a bad
    // parameter is a 400 whatever else the request carries.
    let query_cursor = Query::parse(raw.as_deref()).int("cursor", MAX_SAFE_INTEGER)?;
    credential.require(Right::Watch, &id)?;
    // A browser token's stream ends when the token stops being accepted:
    // the client reconnects, with a fresh token.
    let expires_at = credential
        .expires_at()
        .map(|exp| exp.saturating_add(state.browser_keys.leeway_secs()));
    let tenant = credential.into_tenant();
    let cursor = start_cursor(&headers, query_cursor)?;
    super::check_watch_quota(&state, &tenant).await?;
    // Subscribed before the read, so a commit in between still wakes it.
    let sub = state.hub.subscribe(&id, &tenant);
    let first = state
        .store
        .resume(tenant.clone(), id.clone(), cursor, false)
        .await?;
    if is_the_end(&first) {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    // Counted for as long as the stream is open; refused (503
    // `watch-limit`) past the cap. A 204 is not a held stream.
    let held = state
        .watchers
        .admit(&tenant)
        .inspect_err(|e| state.hub.metrics.refused(&tenant, e))?;
    let counted = state.hub.metrics.hold_stream();
    let heartbeat = Duration::from_millis(state.heartbeat_ms.max(1));
    let stream = futures_util::stream::unfold(
        Stream {
            _held: held,
            _counted: counted,
            state,
            tenant,
            id,
            sub,
            cursor,
            pending: Some(first),
            done: false,
        },
        next,
    );
    Ok(sse_response(stream, expires_at, heartbeat))
}

/// A stream's starting cursor: `Last-Event-ID` when sent, else `?cursor`,
/// else 0 (the task and batch streams alike).
pub(super) fn start_cursor(
    headers: &HeaderMap,
    query_cursor: Option<u64>,
) -> Result<u64, ApiError> {
    match headers.get("last-event-id") {
        Some(v) => {
            let text = v
                .to_str()
                .map_err(|_| ApiError::invalid("Last-Event-ID: must be an integer"))?;
            parse_int("Last-Event-ID", text.trim(), MAX_SAFE_INTEGER)
        }
        None => Ok(query_cursor.unwrap_or(0)),
    }
}

/// The SSE response of a task or batch stream: ended at the browser
/// token's expiry, heartbeats, and never cached or buffered by a proxy.
pub(super) fn sse_response<S>(stream: S, expires_at: Option<u64>, heartbeat: Duration) -> Response
where
    S: futures_util::Stream<Item = Result<SseEvent, std::io::Error>> + Send + 'static,
{
    let stream = crate::auth::until_expiry(stream, expires_at);
    let mut res = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(heartbeat).text("hb"))
        .into_response();
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

/// The cursor is already the task's terminal version: nothing will ever
/// follow. The answer is 204, the HTML standard's way to tell an
/// `EventSource` to stop reconnecting (PROTOCOL.md §Events stream); a
/// message would only make it reconnect with the same `Last-Event-ID`.
fn is_the_end(first: &ResumeAnswer) -> bool {
    first.mode() == ResumeMode::CaughtUp && first.task().is_some_and(|t| t.state.is_terminal())
}

type Item = Result<SseEvent, std::io::Error>;

async fn next(mut st: Stream) -> Option<(Item, Stream)> {
    if st.done {
        return None;
    }
    let answer = match st.pending.take() {
        Some(a) => a,
        None => match st.sub.wait_past(st.cursor).await {
            Wake::Changed(latest) => match answer_from(&latest, st.cursor, st.state.retention) {
                Some(a) => a,
                None => {
                    let read = st
                        .state
                        .store
                        .resume(st.tenant.clone(), st.id.clone(), st.cursor, false)
                        .await;
                    match read {
                        Ok(a) => a,
                        Err(e) => {
                            return Some((Err(std::io::Error::other(format!("{e:?}"))), ended(st)))
                        }
                    }
                }
            },
            Wake::Dropped => {
                let err = std::io::Error::other("connection dropped by the server");
                return Some((Err(err), ended(st)));
            }
        },
    };
    let (version, terminal) = answer
        .task()
        .map_or((st.cursor, false), |t| (t.version, t.state.is_terminal()));
    st.cursor = version;
    st.done = terminal;
    let event = SseEvent::default()
        .event("resume")
        .id(version.to_string())
        .data(super::resume::with_epoch(&st.state, answer));
    Some((Ok(event), st))
}

fn ended(mut st: Stream) -> Stream {
    st.done = true;
    st
}

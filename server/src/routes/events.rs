//! `GET /v1/tasks/{id}/events`: the resume answers as Server-Sent Events.
//!
//! First message: the answer for the starting cursor (`Last-Event-ID`,
//! else `?cursor`, else 0). Then one message per wake, answering the
//! previous message's `id`. The stream ends after a terminal message,
//! and a request whose cursor is already the terminal version is answered
//! 204 No Content, which stops a standard `EventSource` for good.

use std::future::Future;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use taskwire_core::{ResumeAnswer, ResumeMode, MAX_SAFE_INTEGER};

use super::{output_watch, parse_int, task_id, Query};
use crate::auth::{Credential, Right, WatchCredential};
use crate::error::ApiError;
use crate::hub::{answer_from, Subscription, Wake};
use crate::limits::{WatchPermit, Watcher};
use crate::metrics::Held;
use crate::AppState;

struct Stream {
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
    let wanted = output_watch::wanted(&Query::parse(raw.as_deref()))?;
    let StreamStart {
        tenant,
        subject,
        cursor,
        expires_at,
    } = StreamStart::read(&state, credential, &headers, raw, |c| {
        c.require(Right::Watch, &id)
    })
    .await?;
    // Subscribed before the read, so a commit in between still wakes it.
    let sub = state.hub.subscribe(&id, &tenant);
    let out = wanted.as_ref().map(|_| state.hub.output.watch(&id));
    let first = state
        .store
        .resume(tenant.clone(), id.clone(), cursor, false)
        .await?;
    if let (Some(wanted), Some(out)) = (wanted, out) {
        let who = Watcher {
            tenant: &tenant,
            subject: subject.as_deref(),
        };
        if is_the_end(&first) {
            let lacks = state
                .store
                .read_output(tenant.clone(), id.clone(), wanted.clone())
                .await?;
            if lacks.text.is_empty() && lacks.attempt <= wanted.attempt {
                return Ok(StatusCode::NO_CONTENT.into_response());
            }
        }
        let stream = output_watch::OutputStream {
            state: state.clone(),
            who: output_watch::Follower {
                tenant: tenant.clone(),
                subject: subject.as_deref().map(Into::into),
                id,
            },
            sub,
            out,
            cursor,
            wanted,
            first: Some(first),
            task_done: false,
            output_done: false,
            queued: Vec::new(),
        };
        return open_stream(&state, who, expires_at, stream, output_watch::next).await;
    }
    if is_the_end(&first) {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let stream = Stream {
        state: state.clone(),
        tenant: tenant.clone(),
        id,
        sub,
        cursor,
        pending: Some(first),
        done: false,
    };
    let who = Watcher {
        tenant: &tenant,
        subject: subject.as_deref(),
    };
    open_stream(&state, who, expires_at, stream, next).await
}

/// What a task or batch stream starts from, read from the request in one
/// order for both: `?cursor` (judged even when `Last-Event-ID` wins over
/// it: a bad parameter is a 400 whatever else the request carries), the
/// credential's right (`require`), the starting cursor, the tenant's
/// watch quota.
pub(super) struct StreamStart {
    pub tenant: String,
    /// A browser token's user: its streams count against
    /// `--subject-max-watches`.
    pub subject: Option<String>,
    pub cursor: u64,
    /// When a browser token stops being accepted: the stream ends then,
    /// and the client reconnects with a fresh token.
    pub expires_at: Option<u64>,
}

impl StreamStart {
    pub(super) async fn read(
        state: &AppState,
        credential: Credential,
        headers: &HeaderMap,
        raw_query: Option<String>,
        require: impl FnOnce(&Credential) -> Result<(), ApiError>,
    ) -> Result<StreamStart, ApiError> {
        let query_cursor = Query::parse(raw_query.as_deref()).int("cursor", MAX_SAFE_INTEGER)?;
        require(&credential)?;
        let expires_at = credential
            .expires_at()
            .map(|exp| exp.saturating_add(state.browser_keys.leeway_secs()));
        let subject = credential.subject().map(str::to_owned);
        let tenant = credential.into_tenant();
        let cursor = start_cursor(headers, query_cursor)?;
        let who = Watcher {
            tenant: &tenant,
            subject: subject.as_deref(),
        };
        super::check_watch_quota(state, who).await?;
        Ok(StreamStart {
            tenant,
            subject,
            cursor,
            expires_at,
        })
    }
}

/// The SSE response of a task or batch stream whose first answer is read:
/// `next` unfolds it from `first`. Counted among the tenant's held
/// watches for as long as it is open, refused (429, 503, answered late)
/// past a cap (a 204 is not a held stream, so this comes after the first
/// read), and in `/metrics`' held-stream gauge.
pub(super) async fn open_stream<S, F, Fut>(
    state: &AppState,
    who: Watcher<'_>,
    expires_at: Option<u64>,
    first: S,
    mut next: F,
) -> Result<Response, ApiError>
where
    S: Send + 'static,
    F: FnMut(S) -> Fut + Send + 'static,
    Fut: Future<Output = Option<(Item, S)>> + Send + 'static,
{
    let held = match super::admit_watch(state, who) {
        Ok(permit) => permit,
        Err(refused) => return Err(refused.await),
    };
    let counted = state.hub.metrics.hold_stream();
    let heartbeat = Duration::from_millis(state.heartbeat_ms.max(1));
    let stream = futures_util::stream::unfold(
        (
            Holding {
                _held: held,
                _counted: counted,
            },
            first,
        ),
        move |(holding, s)| {
            let step = next(s);
            async move { step.await.map(|(item, s)| (item, (holding, s))) }
        },
    );
    Ok(sse_response(stream, expires_at, heartbeat))
}

/// A stream's slot among the held watches and its place in the gauge,
/// released when the stream ends.
struct Holding {
    _held: WatchPermit,
    _counted: Held,
}

/// An SSE message, or the error that ends the stream.
pub(super) type Item = Result<SseEvent, std::io::Error>;

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

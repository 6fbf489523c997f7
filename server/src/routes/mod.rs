//! The HTTP API of PROTOCOL.md: routing, and the small parsers every
//! handler shares (ids, bodies, query parameters). Handlers only talk to
//! the [`crate::store::Store`] interface and the hub.

mod actions;
mod batch_watch;
mod batches;
mod callbacks;
pub(crate) mod cors;
mod create_body;
mod events;
mod legacy_request;
mod notifications;
mod output;
mod output_watch;
mod resume;
pub(crate) mod tasks;
mod timeline;
pub mod work;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use futures_util::future::{BoxFuture, FutureExt};
use hyper::body::Body as HttpBody;

pub use crate::clock::{now_ms, now_secs};
use crate::error::ApiError;
pub use crate::ids::{check_id, MAX_ID_BYTES};
use crate::limits::{WatchPermit, Watcher};
pub use crate::query::{parse_int, Query};
use crate::serve::{body_timed_out, BodyTimedOut};
use crate::AppState;

/// Bodies above this are refused with 413.
pub const BODY_LIMIT: usize = 64 * 1024;
/// The whole application router (CORS is applied around it by
/// [`crate::serve`]).
pub fn router(state: AppState) -> Router {
    let mut app = Router::new()
        // The routes below that take a body read it themselves, once the
        // caller's rights were judged from the headers (`read_body`).
        .route("/v1/tasks", post(tasks::create))
        .route("/v1/tasks/{id}", get(tasks::get))
        .route("/v1/tasks/{id}/resume", get(resume::resume))
        .route("/v1/tasks/{id}/events", get(events::events))
        .route("/v1/tasks/{id}/timeline", get(timeline::timeline))
        .route("/v1/tasks/{id}/callbacks", post(callbacks::callback))
        .route("/v1/tasks/{id}/output/{stream}", post(output::append))
        .route("/v1/work/claim", post(work::claim))
        .route("/v1/tasks/{id}/deliveries", post(tasks::deliver))
        .route("/v1/tasks/{id}/cancel", post(actions::cancel))
        .route("/v1/tasks/{id}/decisions", post(actions::decide))
        .route("/v1/notifications", get(notifications::list))
        .route("/v1/batches", post(batches::create))
        .route("/v1/batches/{id}/cancel", post(actions::cancel_batch))
        .route("/v1/batches/{id}/resume", get(batch_watch::resume))
        .route("/v1/batches/{id}/events", get(batch_watch::events));
    app = if state.config.demo {
        crate::demo::routes(app)
    } else {
        app.fallback(not_found)
    };
    app.method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// The body limit, on the routes that read a body. Not a router-wide
/// layer: that would box one more future for every request, held
/// long-polls included (~320 bytes each, measured).
pub fn limited(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.layer(DefaultBodyLimit::max(BODY_LIMIT))
}

/// Unknown route: 404 with the JSON error body.
pub async fn not_found() -> ApiError {
    ApiError::not_found("path: no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed("method: not allowed on this path")
}

/// The task id from the path: non-blank, at most 255 bytes.
pub fn task_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(id) = path.map_err(|e| ApiError::invalid(format!("taskId: {}", e.body_text())))?;
    check_id("taskId", &id)?;
    Ok(id)
}

/// The task id from the path, checked as [`task_id`] while extracting (a
/// handler that holds a request keeps just the `String`).
#[derive(Debug, Clone)]
pub struct TaskId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for TaskId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        task_id(Path::<String>::from_request_parts(parts, state).await).map(TaskId)
    }
}

/// Refuses a user or tenant at its watch quota before anything is read (a
/// long-poll or a stream): counted in the metrics, and answered late
/// (`quotas::REFUSAL_DELAY`).
pub async fn check_watch_quota(state: &AppState, who: Watcher<'_>) -> Result<(), ApiError> {
    if let Err(refusal) = state.watchers.check_quota(who) {
        state.hub.metrics.refused(who.tenant, &refusal);
        return Err(crate::quotas::answered_late(refusal).await);
    }
    Ok(())
}

/// Takes a held watch's slots, or refuses (429 `watch-quota`, 503
/// `watch-limit`): counted in the metrics and answered late, the 503 as
/// the 429s, so that a flood of refused watches costs timers, not the
/// cores every tenant shares (it once ran at 8,900 answers a second).
///
/// Not an `async fn`: it is called inside every held long-poll's future,
/// where an `async fn`'s state would sit beside the answer being held
/// (~100 bytes for each of 10,000 polls). Admitting is synchronous; only a
/// refusal waits, in a box.
pub fn admit_watch(
    state: &AppState,
    who: Watcher<'_>,
) -> Result<WatchPermit, BoxFuture<'static, ApiError>> {
    state.watchers.admit(who).map_err(|refusal| {
        state.hub.metrics.refused(who.tenant, &refusal);
        crate::quotas::answered_late(refusal).boxed()
    })
}

/// The request body, or 413 past the limit, or 408 when it did not arrive
/// within `--body-timeout-ms` (the serving layer times every body).
pub fn body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(BODY_LIMIT)
        } else if let Some(BodyTimedOut(limit)) = body_timed_out(&e) {
            ApiError::request_timeout(limit.as_millis())
        } else {
            ApiError::invalid(format!("body: {}", e.body_text()))
        }
    })
}

/// Reads a request body only now, within `limit` bytes (413 past it, at
/// once when `Content-Length` already says so) and the body timeout (408).
///
/// The routes that judge who may send a body take it unread (`Body`) and
/// call this after the credential's rights were checked from the headers:
/// a caller who may not send it (a watch-only browser token posting a
/// batch) is refused before any of it is buffered, so a thousand stalled
/// 1 MiB bodies cost a thousand small answers, not a gigabyte
/// (PROTOCOL.md §Error precedence, step 2).
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let announced = HttpBody::size_hint(&body).lower();
    if usize::try_from(announced).map_or(true, |n| n > limit) {
        if announced <= (limit + DRAIN_PAST_LIMIT) as u64 {
            drain(body).await;
        }
        return Err(ApiError::too_large(limit));
    }
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        if let Some(BodyTimedOut(timeout)) = body_timed_out(&e) {
            ApiError::request_timeout(timeout.as_millis())
        } else if past_limit(&e) {
            ApiError::too_large(limit)
        } else {
            ApiError::invalid(format!("body: {e}"))
        }
    })
}

/// How far past its limit a body announced by `Content-Length` is still
/// read (and thrown away) before the 413 is sent.
///
/// A client writes its whole body before it reads the answer. Answered and
/// closed early, one a little over the limit (a 1 MiB batch plus a byte)
/// meets a reset in mid-write and reports `EPIPE` instead of the 413 that
/// names the limit. Read to its end, it gets the 413, and the connection
/// stays open. Far larger bodies are refused at once: reading them would
/// cost the server their size for an answer known from the headers.
const DRAIN_PAST_LIMIT: usize = 1024 * 1024;

/// Reads `body` to its end, keeping nothing; the serving layer's body
/// timeout bounds how long a slow sender holds it.
async fn drain(body: Body) {
    let mut stream = body.into_data_stream();
    while let Some(Ok(_)) = futures_util::StreamExt::next(&mut stream).await {}
}

/// Whether a body error is `to_bytes`' limit (somewhere in its chain).
fn past_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// The `Idempotency-Key` header, checked, if present.
pub fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .map_err(|_| ApiError::invalid("Idempotency-Key: must be visible ASCII"))?;
    check_id("Idempotency-Key", key)?;
    Ok(Some(key.to_string()))
}

/// A JSON response with `Cache-Control: no-store` (resume answers must
/// never be replayed from a cache).
pub fn no_store_json(body: String) -> Response {
    let mut res = crate::wire_json::json_text(StatusCode::OK, body);
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

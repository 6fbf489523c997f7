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
mod resume;
pub(crate) mod tasks;
pub mod work;

use std::time::{SystemTime, UNIX_EPOCH};

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
use taskwire_core::value::is_blank;
use taskwire_core::MAX_SAFE_INTEGER;

use crate::error::{quoted, ApiError};
use crate::limits::{WatchPermit, Watcher};
use crate::serve::{body_timed_out, BodyTimedOut};
use crate::AppState;

/// Bodies above this are refused with 413.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Ids, callback ids and keys are at most this many bytes.
pub const MAX_ID_BYTES: usize = 255;

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
        .route("/v1/tasks/{id}/callbacks", post(callbacks::callback))
        .route("/v1/work/claim", post(work::claim))
        .route("/v1/tasks/{id}/deliveries", post(tasks::deliver))
        .route("/v1/tasks/{id}/cancel", post(actions::cancel))
        .route("/v1/tasks/{id}/decisions", post(actions::decide))
        .route("/v1/notifications", get(notifications::list))
        .route("/v1/batches", post(batches::create))
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

/// Checks an id or key: non-blank, at most 255 bytes.
pub fn check_id(field: &str, id: &str) -> Result<(), ApiError> {
    if id.len() > MAX_ID_BYTES {
        return Err(ApiError::invalid(format!(
            "{field}: must be at most {MAX_ID_BYTES} bytes, got {}",
            id.len()
        )));
    }
    if is_blank(id) {
        return Err(ApiError::invalid(format!("{field}: must not be blank")));
    }
    Ok(())
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

/// The server's clock in whole milliseconds since the epoch (whole, so
/// `expiresAtMs` reads cleanly; f64 holds them exactly).
pub fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

/// The server's clock in whole seconds (for webhook timestamps).
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Query parameters, parsed by hand so every error names its parameter.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Splits a raw query string and percent-decodes names and values
    /// (`cursor=%31` is `cursor=1`, as URL rules say).
    pub fn parse(raw: Option<&str>) -> Self {
        Query(
            raw.unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    /// A parameter's (first) value, decoded.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// An optional integer parameter in `0..=max`.
    pub fn int(&self, name: &str, max: u64) -> Result<Option<u64>, ApiError> {
        self.get(name).map(|v| parse_int(name, v, max)).transpose()
    }

    /// A required integer parameter in `0..=max`.
    pub fn required_int(&self, name: &str, max: u64) -> Result<u64, ApiError> {
        self.int(name, max)?
            .ok_or_else(|| ApiError::invalid(format!("{name}: query parameter is required")))
    }

    /// A flag: absent, `0`/`false`, or `1`/`true`.
    pub fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.get(name) {
            None | Some("0") | Some("false") => Ok(false),
            Some("1") | Some("true") | Some("") => Ok(true),
            Some(other) => Err(ApiError::invalid(format!(
                "{name}: must be 1 or 0, got {}",
                quoted(other)
            ))),
        }
    }
}

/// Percent-decodes a query component (`+` is a space, as in forms); a
/// malformed escape is kept as it is, and invalid UTF-8 becomes U+FFFD.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |j: usize| bytes.get(j).and_then(|c| (*c as char).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a decimal integer in `0..=max` (at most 2^53 − 1).
pub fn parse_int(name: &str, text: &str, max: u64) -> Result<u64, ApiError> {
    let max = max.min(MAX_SAFE_INTEGER);
    let bad = || {
        ApiError::invalid(format!(
            "{name}: must be an integer from 0 to {max}, got {}",
            quoted(text)
        ))
    };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    text.parse::<u64>()
        .ok()
        .filter(|n| *n <= max)
        .ok_or_else(bad)
}

/// A JSON response with `Cache-Control: no-store` (resume answers must
/// never be replayed from a cache).
pub fn no_store_json(body: String) -> Response {
    let mut res = crate::wire_json::json_text(StatusCode::OK, body);
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_name_their_parameter() {
        assert_eq!(parse_int("cursor", "12", MAX_SAFE_INTEGER).unwrap(), 12);
        for bad in [
            "",
            "-1",
            "1.5",
            "1e3",
            "x",
            "9007199254740992",
            "99999999999999999999999",
        ] {
            let err = parse_int("cursor", bad, MAX_SAFE_INTEGER).unwrap_err();
            assert!(err.message.starts_with("cursor: "), "{}", err.message);
        }
        assert!(parse_int("waitMs", "30001", 30_000).is_err());
    }

    #[test]
    fn queries_split_and_flag() {
        let q = Query::parse(Some("cursor=3&snapshot=1&x"));
        assert_eq!(q.required_int("cursor", 10).unwrap(), 3);
        let q = Query::parse(Some("cursor=%31%32&snapshot=%31&bad=%zz+x"));
        assert_eq!(q.required_int("cursor", 100).unwrap(), 12);
        assert!(q.flag("snapshot").unwrap());
        assert_eq!(q.get("bad"), Some("%zz x"));
        assert!(q.flag("snapshot").unwrap());
        assert!(q.required_int("waitMs", 10).is_err());
        assert!(Query::parse(Some("snapshot=yes")).flag("snapshot").is_err());
    }

    #[test]
    fn ids_are_limited() {
        assert!(check_id("taskId", &"x".repeat(255)).is_ok());
        assert!(check_id("taskId", &"x".repeat(256)).is_err());
        assert!(check_id("taskId", " ").is_err());
    }
}

//! The one error shape of the HTTP API:
//! `{"error":{"code":"invalid-request","message":"cursor: …"}}`.
//!
//! Every handler returns `Result<_, ApiError>`, so a client error can only
//! become one of the statuses PROTOCOL.md lists; `internal` (500) is kept
//! for bugs and corrupt data, never for bad input, and a storage outage
//! (disk full, read-only, connection lost) is 503 `storage-unavailable`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use taskwire_core::{Error as CoreError, ErrorCode};
use taskwire_wire::to_json;

use crate::store::StoreError;
use crate::wire_json::json_text;

/// `Retry-After` of a `storage-unavailable` answer. Longer than
/// `overloaded`'s 1 s: a full or read-only disk rarely clears within a
/// second, and a fleet of clients retrying every second would only add load
/// to a sick store.
pub const STORAGE_RETRY_AFTER_SECS: u32 = 5;

/// An HTTP error with a stable code and a message naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code (`invalid-request`, `not-found`, …).
    pub code: &'static str,
    /// For humans; names the field or id involved.
    pub message: String,
    /// Seconds for `Retry-After` (overload, limits, storage unavailable).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 `invalid-request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid-request", message)
    }

    /// 401 `unauthorized`.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 404 `not-found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    /// 404 for a task id (unknown or another tenant's: same answer).
    pub fn no_task(id: &str) -> Self {
        Self::not_found(format!("taskId: no task with id {}", quoted(id)))
    }

    /// 405 `method-not-allowed`.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method-not-allowed",
            message,
        )
    }

    /// 409 with its own code: the request is understood but the resource
    /// is not in a state that allows it.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 409 `not-succeeded`.
    pub fn not_succeeded(id: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "not-succeeded",
            format!("taskId: task {} has no result", quoted(id)),
        )
    }

    /// 408 `request-timeout`: a body that did not arrive in time (the
    /// connection is closed after the answer).
    pub fn request_timeout(timeout_ms: u128) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "request-timeout",
            format!("body: not received within {timeout_ms} ms"),
        )
    }

    /// 413 `payload-too-large`.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            format!("body: must be at most {limit} bytes"),
        )
    }

    /// 422 with a code of its own.
    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// 429 with a code of its own and `Retry-After` (a per-caller limit).
    pub fn too_many(code: &'static str, message: impl Into<String>, retry_after: u32) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, code, message);
        e.retry_after = Some(retry_after);
        e
    }

    /// 503 `overloaded` with `Retry-After: 1`.
    pub fn overloaded(message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", message);
        e.retry_after = Some(1);
        e
    }

    /// 503 `storage-unavailable` with `Retry-After`: the storage cannot
    /// serve now (disk full, read-only, failing, locked; the database
    /// connection lost or shutting down). Not a bug, not the request's
    /// fault: the same request can succeed later.
    pub fn storage_unavailable(detail: impl std::fmt::Display) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage-unavailable",
            format!("store: storage unavailable, retry later ({detail})"),
        );
        e.retry_after = Some(STORAGE_RETRY_AFTER_SECS);
        e
    }

    /// 503 `watch-limit`: every slot for held long-polls and SSE streams
    /// is taken.
    pub fn watch_limit(max: usize, retry_after_secs: u32) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "watch-limit",
            format!("waitMs: the server already holds {max} long-polls and streams, its limit"),
        );
        e.retry_after = Some(retry_after_secs);
        e
    }

    /// 503 `connection-limit`: the server has as many connections open as
    /// it allows (written straight to the socket, see [`ApiError::to_http`]).
    pub fn connection_limit(max: usize, retry_after_secs: u32) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "connection-limit",
            format!("connection: the server already has {max} connections open, its limit"),
        );
        e.retry_after = Some(retry_after_secs);
        e
    }

    /// 500 `internal`: a server bug or corrupt stored data, never bad
    /// input.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

/// Quotes a client-supplied string for a message, cut so that a long id
/// cannot make a long error.
pub fn quoted(s: &str) -> String {
    const MAX_CHARS: usize = 64;
    match s.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("\"{}…\"", s.get(..cut).unwrap_or("")),
        None => format!("\"{s}\""),
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        match e.code {
            ErrorCode::InvalidRequest => ApiError::invalid(e.message),
            ErrorCode::NotFound => ApiError::not_found(e.message),
            // Ids are server-assigned, so a clash is a server bug.
            ErrorCode::TaskExists => ApiError::internal(e.message),
            ErrorCode::ClockSkew => ApiError::new(StatusCode::BAD_REQUEST, "clock-skew", e.message),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(id) => ApiError::no_task(&id),
            StoreError::BatchNotFound(id) => {
                ApiError::not_found(format!("batchId: no batch with id {}", quoted(&id)))
            }
            StoreError::Invalid(e) => e.into(),
            StoreError::IdempotencyKeyReused(key) => ApiError::unprocessable(
                "idempotency-key-reused",
                format!(
                    "Idempotency-Key: {} was used with a different body",
                    quoted(&key)
                ),
            ),
            StoreError::CallbackIdReused(id) => ApiError::unprocessable(
                "callback-id-reused-for-other-task",
                format!(
                    "webhook-id: {} was already used for another task",
                    quoted(&id)
                ),
            ),
            StoreError::ClaimReplayed(id) => ApiError::conflict(
                "claim-replayed",
                format!(
                    "webhook-id: the claim {} was sent before, signed the same: it claims \
                     nothing again (sign each claim with a new webhook-id)",
                    quoted(&id)
                ),
            ),
            StoreError::OpenTaskQuota {
                tenant,
                max,
                wanted,
            } => crate::quotas::open_task_quota(&tenant, max, wanted),
            StoreError::Overloaded => ApiError::overloaded("store: too many writes queued"),
            StoreError::Unavailable(message) => ApiError::storage_unavailable(message),
            StoreError::Corrupt(message) | StoreError::Internal(message) => {
                ApiError::internal(format!("store: {message}"))
            }
        }
    }
}

/// The error body: `{"error":{"code":…,"message":…}}`.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorFields<'a>,
}

#[derive(Serialize)]
struct ErrorFields<'a> {
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    /// The JSON body (two strings: the codec cannot fail on them).
    fn body(&self) -> String {
        to_json(&ErrorBody {
            error: ErrorFields {
                code: self.code,
                message: &self.message,
            },
        })
    }

    /// The whole HTTP/1.1 response, `Connection: close`, for a socket the
    /// server answers without reading a request (past the connection cap).
    pub fn to_http(&self) -> Vec<u8> {
        let body = self.body();
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncache-control: no-store\r\n",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or("")
        );
        if let Some(secs) = self.retry_after {
            head.push_str(&format!("retry-after: {secs}\r\n"));
        }
        head.push_str(&format!(
            "connection: close\r\ncontent-length: {}\r\n\r\n",
            body.len()
        ));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = json_text(self.status, self.body());
        // An error must not be replayed from a cache either (a 404 before a
        // create, a 503 during a burst).
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status == StatusCode::REQUEST_TIMEOUT {
            // The rest of the body is still unread: the connection cannot
            // carry another request.
            res.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        res
    }
}

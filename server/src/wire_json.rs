//! JSON answers written by taskwire's own codec ([`WireJson`]), so that
//! every body the server writes has one number and string format: the
//! one `taskwire_wire::to_json` gives the stored views, the SSE
//! events and the webhooks (integers without a fraction, as
//! `JSON.stringify` writes them: `25000`, never `25000.0`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::error::ApiError;

/// A `200 application/json` answer with `T` as its body (wrap it in a
/// `(StatusCode, WireJson(..))` pair for another status).
#[derive(Debug, Clone)]
pub struct WireJson<T>(pub T);

impl<T: Serialize> IntoResponse for WireJson<T> {
    fn into_response(self) -> Response {
        match taskwire_wire::to_string(&self.0) {
            Ok(body) => json_text(StatusCode::OK, body),
            // Only a type the codec cannot write (bytes, a non-string map
            // key) fails: a server bug, answered as one rather than with a
            // body that is not the type's.
            Err(e) => ApiError::internal(format!("answer: {e}")).into_response(),
        }
    }
}

/// A JSON answer from text already written by the codec (a stored view
/// with its epoch, a resume answer).
pub fn json_text(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

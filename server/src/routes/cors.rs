//! CORS for the configured origins only (hand-rolled: ~60 lines instead of
//! a tower-http dependency). Preflights allow the four request headers
//! the protocol uses.
//!
//! Applied around the router by [`crate::serve`] (not as an axum
//! middleware, whose boxed future would cost every held request ~1 KB).

use axum::http::{header, HeaderValue, Method, Request};
use axum::response::Response;

use crate::Inner;

const ALLOW_HEADERS: &str = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID";

/// What CORS needs from a request, taken before the router consumes it.
#[derive(Debug)]
pub struct Cors {
    /// The request's `Origin` when it is allowed (a copy: a header value
    /// would keep hyper's whole read buffer alive while a request is held).
    allowed: Option<HeaderValue>,
    preflight: bool,
}

impl Cors {
    /// Looks at a request.
    pub fn of<B>(state: &Inner, req: &Request<B>) -> Cors {
        let allowed = if state.cors_origins.is_empty() {
            None
        } else {
            req.headers()
                .get(header::ORIGIN)
                .and_then(|o| o.to_str().ok())
                .filter(|o| state.cors_origins.iter().any(|a| a == o || a == "*"))
                .and_then(|o| HeaderValue::from_str(o).ok())
        };
        let preflight = req.method() == Method::OPTIONS
            && req
                .headers()
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
        Cors { allowed, preflight }
    }

    /// No CORS: a port no browser is meant to call (metrics). A preflight
    /// there is routed like any request (and not found).
    pub fn none() -> Cors {
        Cors {
            allowed: None,
            preflight: false,
        }
    }

    /// A preflight is answered 204 without routing.
    pub fn preflight(&self) -> bool {
        self.preflight
    }

    /// Tags the response for an allowed origin.
    pub fn apply(self, res: &mut Response) {
        let Some(origin) = self.allowed else {
            return;
        };
        let h = res.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.append(header::VARY, HeaderValue::from_static("Origin"));
        if self.preflight {
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, OPTIONS"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(ALLOW_HEADERS),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
        } else {
            h.insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static("Retry-After"),
            );
        }
    }
}

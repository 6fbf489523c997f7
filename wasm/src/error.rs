//! Errors as JS `TaskwireError` objects, and the one list of their codes.
//!
//! Rust constructs the error itself, through the JS class imported from
//! `wasm/js/runtime.js` (the package's `TaskwireError`: `instanceof` holds
//! across the boundary), so nothing crosses as a `"code\tmessage"` string.
//! [`Code`] lists every code the package can throw; the TypeScript union
//! in `js/index.d.ts` is generated from it ([`TYPESCRIPT`]) and a test
//! fails when the two differ.

use taskwire_core as tw;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;

#[wasm_bindgen(module = "/js/runtime.js")]
extern "C" {
    /// The package's error class.
    #[wasm_bindgen(js_name = TaskwireError)]
    pub type JsError;

    #[wasm_bindgen(constructor, js_class = TaskwireError)]
    fn new(code: &str, message: &str, status: u16) -> JsError;
}

macro_rules! codes {
    ($($(#[doc = $doc:literal])+ $name:ident => $spelling:literal,)+) => {
        /// Every error code the package throws (HTTP errors without a
        /// code of their own are `http-<status>`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Code {
            $($(#[doc = $doc])+ $name,)+
        }

        impl Code {
            /// Every code, in the order of the TypeScript union.
            pub const ALL: &'static [Code] = &[$(Code::$name,)+];

            /// The spelling JS sees in `err.code`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$name => $spelling,)+
                }
            }
        }

        /// The `ErrorCode` union of `js/index.d.ts`, generated from [`Code`].
        pub const TYPESCRIPT: &str = concat!(
            "export type ErrorCode =",
            $("\n  | \"", $spelling, "\"",)+
            "\n  | `http-${number}`;"
        );
    };
}

codes! {
    /// A value is missing, of the wrong type or outside its domain.
    InvalidRequest => "invalid-request",
    /// The task is unknown (locally, or the server's 404).
    NotFound => "not-found",
    /// A task with that id already exists.
    TaskExists => "task-exists",
    /// An API call before `await init()`.
    NotInitialized => "not-initialized",
    /// A bug in taskwire (never the answer to bad input).
    Internal => "internal",
    /// The server could not be reached (after the retries a key allows).
    Network => "network",
    /// 401: the credentials were refused.
    Unauthorized => "unauthorized",
    /// 401: the browser token is past its expiry (a token function is
    /// asked once for a fresh one first).
    TokenExpired => "token-expired",
    /// 401: a tenant token where only a browser token may go (`access_token`).
    BrowserTokenRequired => "browser-token-required",
    /// 403.
    Forbidden => "forbidden",
    /// 403: the browser token lacks the route's right on this task.
    RightNotGranted => "right-not-granted",
    /// 403: a browser token on a route for the tenant's backend.
    TenantTokenRequired => "tenant-token-required",
    /// `stop()` ended a watch first.
    Stopped => "stopped",
    /// 405 from the server.
    MethodNotAllowed => "method-not-allowed",
    /// 409: a delivery for a task without a result.
    NotSucceeded => "not-succeeded",
    /// 408: the body did not arrive in time.
    RequestTimeout => "request-timeout",
    /// 413: a body over the server's limit.
    PayloadTooLarge => "payload-too-large",
    /// 422: the same `Idempotency-Key` with a different create body.
    IdempotencyKeyReused => "idempotency-key-reused",
    /// 422: a delivery key already used for another task.
    KeyReusedForOtherTask => "key-reused-for-other-task",
    /// 429 / 503 from the reference server.
    Overloaded => "overloaded",
    /// 429: the tenant is at its task creation rate.
    CreateRateLimited => "create-rate-limited",
    /// 429: the tenant holds as many watches as it may.
    WatchQuota => "watch-quota",
    /// 429: the tenant has as many open tasks as it may.
    OpenTaskQuota => "open-task-quota",
    /// 503: the server holds as many watches as it may.
    WatchLimit => "watch-limit",
    /// 503: the server holds as many connections as it may.
    ConnectionLimit => "connection-limit",
    /// 503: the server's storage cannot serve now.
    StorageUnavailable => "storage-unavailable",
}

impl Code {
    /// The code a server sent, if it is one of ours.
    pub fn parse(code: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == code)
    }
}

impl From<tw::ErrorCode> for Code {
    fn from(code: tw::ErrorCode) -> Code {
        match code {
            tw::ErrorCode::InvalidRequest => Code::InvalidRequest,
            tw::ErrorCode::NotFound => Code::NotFound,
            tw::ErrorCode::TaskExists => Code::TaskExists,
            // Only a server's book meets it (`TaskBook.applyAt`, which throws
            // it under its own code): kept out of [`Code`], whose every
            // spelling a page carries.
            tw::ErrorCode::ClockSkew => Code::InvalidRequest,
        }
    }
}

impl From<tw::follow::FailCode> for Code {
    fn from(code: tw::follow::FailCode) -> Code {
        match code {
            tw::follow::FailCode::Unauthorized => Code::Unauthorized,
            tw::follow::FailCode::Forbidden => Code::Forbidden,
            tw::follow::FailCode::NotFound => Code::NotFound,
            tw::follow::FailCode::Stopped => Code::Stopped,
        }
    }
}

/// A `TaskwireError` with `code` and `message` (and `status` unless 0).
pub fn error(code: &str, message: &str, status: u16) -> JsValue {
    JsError::new(code, message, status).into()
}

/// A core error as a `TaskwireError`.
pub fn throw(e: tw::Error) -> JsValue {
    error(Code::from(e.code).as_str(), &e.message, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_d_ts_spells_every_code() {
        let types = include_str!("../../js/index.d.ts");
        assert!(
            types.contains(TYPESCRIPT),
            "js/index.d.ts must contain, exactly (generated from wasm/src/error.rs):\n{TYPESCRIPT}"
        );
        let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        for (i, code) in codes.iter().enumerate() {
            assert_eq!(Code::parse(code), Some(Code::ALL[i]));
            assert!(!codes[..i].contains(code), "{code} twice");
        }
        assert_eq!(Code::parse("http-500"), None);
    }
}

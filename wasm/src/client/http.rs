//! One HTTP exchange through `fetch` (the global one, or one the caller
//! injected), with an `AbortController` per request, in callbacks: each
//! wait is one promise and one Rust callback run once when it settles
//! (gloo's callback style; an async runtime would cost the page ~2 KB).
//!
//! Nothing here assumes a window: `fetch` is looked up on `globalThis`,
//! which exists in windows, workers and Node ≥ 20.

use alloc::{string::String, vec::Vec};
use js_sys::{Array, Function, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{AbortController, AbortSignal, Response};

#[wasm_bindgen(module = "/js/runtime.js")]
extern "C" {
    #[wasm_bindgen(js_name = settle)]
    fn settle_js(promise: &JsValue, callback: &JsValue);

    #[wasm_bindgen(catch)]
    #[allow(clippy::too_many_arguments)]
    fn send(
        fetch: Option<&Function>,
        method: &str,
        url: &str,
        headers: &Array,
        signal: &AbortSignal,
        body: Option<&str>,
        name1: Option<&str>,
        value1: Option<&str>,
        name2: Option<&str>,
        value2: Option<&str>,
    ) -> Result<JsValue, JsValue>;

    #[wasm_bindgen(js_name = responseHeader)]
    fn response_header(response: &Response, name: &str) -> Option<String>;

    #[wasm_bindgen(js_name = bodyReader)]
    fn body_reader(response: &Response) -> Option<Function>;

    /// `Reflect.get(target, key)`, `undefined` where that throws (one
    /// import instead of a key string made and dropped per read).
    pub fn property(target: &JsValue, key: &str) -> JsValue;
}

/// Runs `then(true, value)` or `then(false, error)` once, when `promise`
/// settles. The callback is freed once it has run.
pub fn settle(promise: &JsValue, then: impl FnOnce(bool, JsValue) + 'static) {
    settle_js(promise, &Closure::once_into_js(then));
}

/// Where requests go and what they carry.
pub struct Http {
    /// The base URL, e.g. `http://127.0.0.1:8080`.
    pub base: String,
    /// Sent on every request (e.g. `Authorization`), a flat `[name,
    /// value, …]` array of strings; never put in a URL.
    pub headers: Array,
    /// An injected `fetch`, or `None` for `globalThis.fetch`.
    pub fetch: Option<Function>,
}

/// A JS value as a message.
pub fn describe(value: &JsValue) -> String {
    if let Some(s) = value.as_string() {
        return s;
    }
    property(value, "message")
        .as_string()
        .unwrap_or_else(|| String::from("unknown error"))
}

impl Http {
    /// Starts a request with the client's headers and up to two `extra`
    /// ones (`send` in `wasm/js/runtime.js` builds the init: a few lines of
    /// JS instead of a property set per field from Rust): the promise of
    /// its response head.
    pub fn fetch(
        &self,
        method: &str,
        url: &str,
        extra: &[(&str, String)],
        body: Option<&str>,
        controller: &AbortController,
    ) -> Result<JsValue, String> {
        let name = |i: usize| extra.get(i).map(|(name, _)| *name);
        let value = |i: usize| extra.get(i).map(|(_, value)| value.as_str());
        send(
            self.fetch.as_ref(),
            method,
            url,
            &self.headers,
            &controller.signal(),
            body,
            name(0),
            value(0),
            name(1),
            value(1),
        )
        .map_err(|e| describe(&e))
    }
}

/// What a settled `fetch` gave: the response, or why not.
pub fn response(value: JsValue) -> Result<Response, String> {
    value
        .dyn_into::<Response>()
        .map_err(|_| String::from("fetch did not resolve to a Response"))
}

/// A header of the response, if present.
pub fn header(response: &Response, name: &str) -> Option<String> {
    response_header(response, name)
}

/// Reads a streamed body chunk by chunk (for SSE).
pub struct BodyReader {
    /// `() => reader.read()`.
    read: Function,
}

impl BodyReader {
    /// A reader on the response body, if it has one.
    pub fn new(response: &Response) -> Option<BodyReader> {
        body_reader(response).map(|read| BodyReader { read })
    }

    /// Starts reading the next chunk: the promise of `{done, value}`.
    pub fn read(&self) -> Result<JsValue, String> {
        self.read.call0(&JsValue::NULL).map_err(|e| describe(&e))
    }
}

/// A settled `read()`: the chunk, or `None` at the end of the stream.
pub fn chunk(result: &JsValue) -> Result<Option<Vec<u8>>, String> {
    // Not an object: `Reflect.get` throws, and that ends the stream.
    let object = result.is_object() || result.is_function();
    let done = !object || property(result, "done").is_truthy();
    if done {
        return Ok(None);
    }
    let value = property(result, "value");
    match value.dyn_into::<Uint8Array>() {
        Ok(bytes) => Ok(Some(bytes.to_vec())),
        Err(_) => Err(String::from("stream chunk is not bytes")),
    }
}

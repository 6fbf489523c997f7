//! One HTTP exchange through `fetch` (the global one, or one the caller
//! injected), with an `AbortController` per request, in callbacks: each
//! wait is one promise and one Rust callback run once when it settles
//! (gloo's callback style; an async runtime would cost the page ~2 KB).
//!
//! Nothing here assumes a window: `fetch` is looked up on `globalThis`,
//! which exists in windows, workers and Node ≥ 20.

use alloc::{string::String, vec::Vec};
use js_sys::{Function, Object, Reflect, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{AbortController, Response};

#[wasm_bindgen(module = "/js/runtime.js")]
extern "C" {
    #[wasm_bindgen(js_name = settle)]
    fn settle_js(promise: &JsValue, callback: &JsValue);
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
    /// Sent on every request (e.g. `Authorization`); never put in a URL.
    pub headers: Vec<(String, String)>,
    /// An injected `fetch`, or `None` for `globalThis.fetch`.
    pub fetch: Option<Function>,
}

/// A JS value as a message.
pub fn describe(value: &JsValue) -> String {
    if let Some(s) = value.as_string() {
        return s;
    }
    match Reflect::get(value, &JsValue::from_str("message")) {
        Ok(m) if m.is_string() => m.as_string().unwrap_or_default(),
        _ => String::from("unknown error"),
    }
}

fn set(target: &Object, key: &str, value: &JsValue) {
    // Setting a property on a plain object we created cannot fail.
    let _ = Reflect::set(target, &JsValue::from_str(key), value);
}

impl Http {
    /// Starts a request: the promise of its response head.
    pub fn fetch(
        &self,
        method: &str,
        url: &str,
        extra: &[(&str, String)],
        body: Option<&str>,
        controller: &AbortController,
    ) -> Result<JsValue, String> {
        let global = js_sys::global();
        let fetch = match &self.fetch {
            Some(f) => f.clone(),
            None => Reflect::get(&global, &JsValue::from_str("fetch"))
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
                .ok_or_else(|| String::from("no fetch in this runtime"))?,
        };
        let headers = Object::new();
        for (name, value) in &self.headers {
            set(&headers, name, &JsValue::from_str(value));
        }
        for (name, value) in extra {
            set(&headers, name, &JsValue::from_str(value));
        }
        let init = Object::new();
        set(&init, "method", &JsValue::from_str(method));
        set(&init, "headers", &headers);
        set(&init, "signal", &controller.signal());
        // Never let an intermediary cache a resume answer (PROTOCOL.md).
        set(&init, "cache", &JsValue::from_str("no-store"));
        if let Some(body) = body {
            set(&init, "body", &JsValue::from_str(body));
        }
        fetch
            .call2(&global, &JsValue::from_str(url), &init)
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
    response.headers().get(name).ok().flatten()
}

/// Reads a streamed body chunk by chunk (for SSE).
pub struct BodyReader {
    reader: JsValue,
    read: Function,
}

impl BodyReader {
    /// A reader on the response body, if it has one.
    pub fn new(response: &Response) -> Option<BodyReader> {
        let body = response.body()?;
        let get_reader: Function = Reflect::get(&body, &JsValue::from_str("getReader"))
            .ok()?
            .dyn_into()
            .ok()?;
        let reader = get_reader.call0(&body).ok()?;
        let read: Function = Reflect::get(&reader, &JsValue::from_str("read"))
            .ok()?
            .dyn_into()
            .ok()?;
        Some(BodyReader { reader, read })
    }

    /// Starts reading the next chunk: the promise of `{done, value}`.
    pub fn read(&self) -> Result<JsValue, String> {
        self.read.call0(&self.reader).map_err(|e| describe(&e))
    }
}

/// A settled `read()`: the chunk, or `None` at the end of the stream.
pub fn chunk(result: &JsValue) -> Result<Option<Vec<u8>>, String> {
    let done = Reflect::get(result, &JsValue::from_str("done"))
        .map(|d| d.is_truthy())
        .unwrap_or(true);
    if done {
        return Ok(None);
    }
    let value = Reflect::get(result, &JsValue::from_str("value")).unwrap_or(JsValue::NULL);
    match value.dyn_into::<Uint8Array>() {
        Ok(bytes) => Ok(Some(bytes.to_vec())),
        Err(_) => Err(String::from("stream chunk is not bytes")),
    }
}

//! One HTTP exchange through `fetch` (the global one, or one the caller
//! injected), with an `AbortController` per request.
//!
//! Nothing here assumes a window: `fetch` and `setTimeout` are looked up on
//! `globalThis`, which exists in windows, workers and Node ≥ 20.

use js_sys::{Function, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Response};

/// Why an exchange produced no usable response.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The request was aborted (by `stop()`, or a timeout).
    Aborted,
    /// No response: the network failed, or `fetch` misbehaved.
    Network(String),
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
    /// Sends a request and waits for the response head.
    pub async fn send(
        &self,
        method: &str,
        url: &str,
        extra: &[(&str, String)],
        body: Option<&str>,
        controller: &AbortController,
    ) -> Result<Response, Failure> {
        let global = js_sys::global();
        let fetch = match &self.fetch {
            Some(f) => f.clone(),
            None => Reflect::get(&global, &JsValue::from_str("fetch"))
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
                .ok_or_else(|| Failure::Network("no fetch in this runtime".into()))?,
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
        let promise = fetch
            .call2(&global, &JsValue::from_str(url), &init)
            .map_err(|e| Failure::Network(describe(&e)))?;
        let promise: Promise = promise
            .dyn_into()
            .map_err(|_| Failure::Network("fetch did not return a promise".into()))?;
        match JsFuture::from(promise).await {
            Ok(value) => value
                .dyn_into::<Response>()
                .map_err(|_| Failure::Network("fetch did not resolve to a Response".into())),
            Err(_) if controller.signal().aborted() => Err(Failure::Aborted),
            Err(e) => Err(Failure::Network(describe(&e))),
        }
    }
}

/// The body as text.
pub async fn text(response: &Response, controller: &AbortController) -> Result<String, Failure> {
    let promise = response
        .text()
        .map_err(|e| Failure::Network(describe(&e)))?;
    match JsFuture::from(promise).await {
        Ok(v) => v
            .as_string()
            .ok_or_else(|| Failure::Network("body is not text".into())),
        Err(_) if controller.signal().aborted() => Err(Failure::Aborted),
        Err(e) => Err(Failure::Network(describe(&e))),
    }
}

/// A header of the response, if present.
pub fn header(response: &Response, name: &str) -> Option<String> {
    response.headers().get(name).ok().flatten()
}

/// The response's `Retry-After`, in milliseconds from now.
pub fn retry_after(response: &Response) -> Option<f64> {
    header(response, "retry-after")
        .and_then(|v| super::backoff::retry_after_ms(&v, js_sys::Date::now(), js_sys::Date::parse))
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

    /// The next chunk, or `None` at the end of the stream.
    pub async fn next(&self, controller: &AbortController) -> Result<Option<Vec<u8>>, Failure> {
        let promise: Promise = self
            .read
            .call0(&self.reader)
            .map_err(|e| Failure::Network(describe(&e)))?
            .dyn_into()
            .map_err(|_| Failure::Network("read() did not return a promise".into()))?;
        let result = match JsFuture::from(promise).await {
            Ok(r) => r,
            Err(_) if controller.signal().aborted() => return Err(Failure::Aborted),
            Err(e) => return Err(Failure::Network(describe(&e))),
        };
        let done = Reflect::get(&result, &JsValue::from_str("done"))
            .map(|d| d.is_truthy())
            .unwrap_or(true);
        if done {
            return Ok(None);
        }
        let value = Reflect::get(&result, &JsValue::from_str("value")).unwrap_or(JsValue::NULL);
        match value.dyn_into::<Uint8Array>() {
            Ok(bytes) => Ok(Some(bytes.to_vec())),
            Err(_) => Err(Failure::Network("stream chunk is not bytes".into())),
        }
    }
}

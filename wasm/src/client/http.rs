//! One HTTP exchange through `fetch` (the global one, or one the caller
//! injected), with an `AbortController` per request.
//!
//! Nothing here assumes a window: `fetch` is looked up on `globalThis`,
//! which exists in windows, workers and Node ≥ 20.

use js_sys::{Function, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Response};

/// How a step of an exchange ended.
pub enum Outcome<T> {
    Ok(T),
    /// Aborted through its controller (the follow asked, or `stop()`).
    Aborted,
    /// The network failed, or `fetch` misbehaved: the runtime's message.
    Failed(String),
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

/// Awaits `promise`, telling an abort from a failure.
async fn settle(promise: Promise, controller: &AbortController) -> Outcome<JsValue> {
    match JsFuture::from(promise).await {
        Ok(value) => Outcome::Ok(value),
        Err(_) if controller.signal().aborted() => Outcome::Aborted,
        Err(e) => Outcome::Failed(describe(&e)),
    }
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
    ) -> Outcome<Response> {
        let global = js_sys::global();
        let fetch = match &self.fetch {
            Some(f) => f.clone(),
            None => match Reflect::get(&global, &JsValue::from_str("fetch"))
                .ok()
                .and_then(|f| f.dyn_into::<Function>().ok())
            {
                Some(f) => f,
                None => return Outcome::Failed("no fetch in this runtime".into()),
            },
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
        let promise = match fetch.call2(&global, &JsValue::from_str(url), &init) {
            Ok(p) => p,
            Err(e) => return Outcome::Failed(describe(&e)),
        };
        let Ok(promise) = promise.dyn_into::<Promise>() else {
            return Outcome::Failed("fetch did not return a promise".into());
        };
        match settle(promise, controller).await {
            Outcome::Ok(value) => match value.dyn_into::<Response>() {
                Ok(response) => Outcome::Ok(response),
                Err(_) => Outcome::Failed("fetch did not resolve to a Response".into()),
            },
            Outcome::Aborted => Outcome::Aborted,
            Outcome::Failed(e) => Outcome::Failed(e),
        }
    }
}

/// The body as text.
pub async fn text(response: &Response, controller: &AbortController) -> Outcome<String> {
    let promise = match response.text() {
        Ok(p) => p,
        Err(e) => return Outcome::Failed(describe(&e)),
    };
    match settle(promise, controller).await {
        Outcome::Ok(v) => match v.as_string() {
            Some(s) => Outcome::Ok(s),
            None => Outcome::Failed("body is not text".into()),
        },
        Outcome::Aborted => Outcome::Aborted,
        Outcome::Failed(e) => Outcome::Failed(e),
    }
}

/// The body as bytes.
pub async fn bytes(response: &Response, controller: &AbortController) -> Outcome<Vec<u8>> {
    let promise = match response.array_buffer() {
        Ok(p) => p,
        Err(e) => return Outcome::Failed(describe(&e)),
    };
    match settle(promise, controller).await {
        Outcome::Ok(buffer) => Outcome::Ok(Uint8Array::new(&buffer).to_vec()),
        Outcome::Aborted => Outcome::Aborted,
        Outcome::Failed(e) => Outcome::Failed(e),
    }
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

    /// The next chunk, or `None` at the end of the stream.
    pub async fn next(&self, controller: &AbortController) -> Outcome<Option<Vec<u8>>> {
        let promise = match self
            .read
            .call0(&self.reader)
            .map(JsCast::dyn_into::<Promise>)
        {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Outcome::Failed("read() did not return a promise".into()),
            Err(e) => return Outcome::Failed(describe(&e)),
        };
        let result = match settle(promise, controller).await {
            Outcome::Ok(r) => r,
            Outcome::Aborted => return Outcome::Aborted,
            Outcome::Failed(e) => return Outcome::Failed(e),
        };
        let done = Reflect::get(&result, &JsValue::from_str("done"))
            .map(|d| d.is_truthy())
            .unwrap_or(true);
        if done {
            return Outcome::Ok(None);
        }
        let value = Reflect::get(&result, &JsValue::from_str("value")).unwrap_or(JsValue::NULL);
        match value.dyn_into::<Uint8Array>() {
            Ok(bytes) => Outcome::Ok(Some(bytes.to_vec())),
            Err(_) => Outcome::Failed("stream chunk is not bytes".into()),
        }
    }
}

//! `createTask`, `createBatch`, `deliver`, `cancel` and `decide`: one POST each, retried
//! with backoff on network failures, 429 and 5xx only when a retry is
//! safe: an idempotency key makes it so for a create and a delivery; a
//! cancel or a decision repeated is judged a duplicate by the server
//! (`duplicate-cancel`, `duplicate-decision`), so those are always safe. A 2xx resolves to its body (JSON text); anything else
//! rejects with a `TaskwireError` carrying the server's code (when it is
//! one of PROTOCOL.md's, else `http-<status>`) and `status`.

use alloc::rc::Rc;
use alloc::{string::String, vec, vec::Vec};

use core::cell::RefCell;

use super::timer::Timeout;
use js_sys::{Function, Promise, Reflect};
use taskwire_core as tw;
use tw::follow::{decimal, encode_segment, retry_after_ms, Backoff};
use wasm_bindgen::JsValue;
use web_sys::AbortController;

use super::http::{self, settle, Http};
use crate::error::{error, Code};

/// Attempts after the first, with a key.
const RETRIES: u32 = 4;

/// The answer as the page gets it: the 2xx body, or the server's error.
/// The body is read with `JSON.parse` (the page carries no JSON parser of
/// its own).
fn judge(status: u16, body: String) -> Result<JsValue, JsValue> {
    let parsed = js_sys::JSON::parse(&body).ok();
    if (200..300).contains(&status) && parsed.is_some() {
        return Ok(JsValue::from_str(&body));
    }
    let field = |key: &str| {
        let outer = parsed.as_ref().filter(|v| v.is_object())?;
        let inner = Reflect::get(outer, &JsValue::from_str("error")).ok()?;
        if !inner.is_object() {
            return None;
        }
        Reflect::get(&inner, &JsValue::from_str(key))
            .ok()?
            .as_string()
    };
    let http = String::from("http-") + &decimal(u64::from(status));
    let code = field("code")
        .as_deref()
        .and_then(Code::parse)
        .map_or(http, |c| String::from(c.as_str()));
    let message =
        field("message").unwrap_or_else(|| String::from("HTTP ") + &decimal(u64::from(status)));
    Err(error(&code, &message, status))
}

/// `POST {route}` (`/v1/tasks`, `/v1/batches`): a create.
pub fn create(
    http: Rc<Http>,
    backoff: Backoff,
    route: &str,
    body: String,
    key: Option<String>,
) -> Promise {
    let mut url = String::from(http.base.trim_end_matches('/'));
    url.push_str(route);
    let retries = if key.is_some() { RETRIES } else { 0 };
    let mut headers = vec![("content-type", String::from("application/json"))];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    post(http, backoff, url, headers, Some(body), retries)
}

pub fn deliver(http: Rc<Http>, backoff: Backoff, task_id: &str, key: String) -> Promise {
    let mut url = String::from(http.base.trim_end_matches('/'));
    url.push_str("/v1/tasks/");
    encode_segment(task_id, &mut url);
    url.push_str("/deliveries");
    post(
        http,
        backoff,
        url,
        vec![("idempotency-key", key)],
        None,
        RETRIES,
    )
}

/// `POST /v1/tasks/{id}/{action}` (`cancel`, `decisions`) with a JSON body.
pub fn act(http: Rc<Http>, backoff: Backoff, task_id: &str, action: &str, body: String) -> Promise {
    let mut url = String::from(http.base.trim_end_matches('/'));
    url.push_str("/v1/tasks/");
    encode_segment(task_id, &mut url);
    url.push('/');
    url.push_str(action);
    let headers = vec![("content-type", String::from("application/json"))];
    post(http, backoff, url, headers, Some(body), RETRIES)
}

fn post(
    http: Rc<Http>,
    backoff: Backoff,
    url: String,
    headers: Vec<(&'static str, String)>,
    body: Option<String>,
    retries: u32,
) -> Promise {
    let mut start = |resolve: Function, reject: Function| {
        let post = Rc::new(Post {
            http: Rc::clone(&http),
            backoff,
            url: url.clone(),
            headers: headers.clone(),
            body: body.clone(),
            retries,
            resolve,
            reject,
            sleep: RefCell::new(None),
        });
        post.attempt(0);
    };
    Promise::new(&mut start)
}

/// One POST and its retries, in callbacks.
struct Post {
    http: Rc<Http>,
    backoff: Backoff,
    url: String,
    headers: Vec<(&'static str, String)>,
    body: Option<String>,
    retries: u32,
    resolve: Function,
    reject: Function,
    /// The backoff wait before the next attempt.
    sleep: RefCell<Option<Timeout>>,
}

impl Post {
    fn attempt(self: &Rc<Self>, n: u32) {
        let Ok(controller) = AbortController::new() else {
            return self.end(Err(error(
                Code::Network.as_str(),
                "AbortController is unavailable",
                0,
            )));
        };
        let sent = self.http.fetch(
            "POST",
            &self.url,
            &self.headers,
            self.body.as_deref(),
            &controller,
        );
        match sent {
            Ok(promise) => {
                let post = Rc::clone(self);
                settle(&promise, move |ok, value| post.on_response(n, ok, value));
            }
            Err(e) => self.retry(n, None, e),
        }
    }

    fn on_response(self: &Rc<Self>, n: u32, ok: bool, value: JsValue) {
        let answer = if ok {
            http::response(value)
        } else {
            Err(http::describe(&value))
        };
        let response = match answer {
            Ok(response) => response,
            Err(e) => return self.retry(n, None, e),
        };
        let status = response.status();
        if (status == 429 || status >= 500) && n < self.retries {
            let floor = http::header(&response, "retry-after")
                .and_then(|v| retry_after_ms(&v, js_sys::Date::now(), super::js_date));
            return self.retry(
                n,
                floor,
                String::from("HTTP ") + &decimal(u64::from(status)),
            );
        }
        match response.text() {
            Ok(promise) => {
                let post = Rc::clone(self);
                settle(&promise, move |ok, text| {
                    let text = if ok { text.as_string() } else { None };
                    post.end(judge(status, text.unwrap_or_default()));
                });
            }
            Err(_) => self.end(judge(status, String::new())),
        }
    }

    /// After attempt `n` failed: the next one after a backoff delay, or
    /// the `network` error when no retry is left.
    fn retry(self: &Rc<Self>, n: u32, floor: Option<f64>, failure: String) {
        if n >= self.retries {
            let message = String::from("network error: ") + &failure;
            return self.end(Err(error(Code::Network.as_str(), &message, 0)));
        }
        let delay = self.backoff.delay(n + 1, js_sys::Math::random(), floor);
        let post = Rc::clone(self);
        // setTimeout takes whole milliseconds up to 2^31 - 1.
        let ms = delay.clamp(0.0, 2_147_483_647.0) as u32;
        *self.sleep.borrow_mut() = Some(Timeout::new(ms, move || post.attempt(n + 1)));
    }

    fn end(&self, result: Result<JsValue, JsValue>) {
        let _ = match result {
            Ok(value) => self.resolve.call1(&JsValue::NULL, &value),
            Err(e) => self.reject.call1(&JsValue::NULL, &e),
        };
    }
}

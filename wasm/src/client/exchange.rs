//! `createTask` and `deliver`: one POST each, retried with backoff on
//! network failures, 429 and 5xx only when an idempotency key makes a
//! retry safe. A 2xx resolves to its body (JSON text); anything else
//! rejects with a `TaskwireError` carrying the server's code (when it is
//! one of PROTOCOL.md's, else `http-<status>`) and `status`.

use std::rc::Rc;

use js_sys::{Promise, Reflect};
use taskwire_core as tw;
use tw::follow::{decimal, encode_segment, retry_after_ms, Backoff};
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::future_to_promise;
use web_sys::AbortController;

use super::http::{self, Http, Outcome};
use super::wait::Wakeup;
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

pub fn create_task(http: Rc<Http>, backoff: Backoff, body: String, key: Option<String>) -> Promise {
    let mut url = String::from(http.base.trim_end_matches('/'));
    url.push_str("/v1/tasks");
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

fn post(
    http: Rc<Http>,
    backoff: Backoff,
    url: String,
    headers: Vec<(&'static str, String)>,
    body: Option<String>,
    retries: u32,
) -> Promise {
    future_to_promise(async move {
        let wakeup = Rc::new(Wakeup::default());
        let mut attempt = 0;
        loop {
            let controller = AbortController::new()
                .map_err(|_| error(Code::Network.as_str(), "AbortController is unavailable", 0))?;
            let result = http
                .send("POST", &url, &headers, body.as_deref(), &controller)
                .await;
            let (floor, failure) = match result {
                Outcome::Ok(response) => {
                    let status = response.status();
                    let text = match http::text(&response, &controller).await {
                        Outcome::Ok(text) => text,
                        _ => String::new(),
                    };
                    let busy = status == 429 || status >= 500;
                    if !busy || attempt >= retries {
                        return judge(status, text);
                    }
                    let floor = http::header(&response, "retry-after")
                        .and_then(|v| retry_after_ms(&v, js_sys::Date::now(), super::js_date));
                    (floor, String::from("HTTP ") + &decimal(u64::from(status)))
                }
                Outcome::Failed(e) => (None, e),
                // Nothing aborts these requests; if something did, retrying
                // would fight it.
                Outcome::Aborted => (None, String::from("aborted")),
            };
            if attempt >= retries || failure == "aborted" {
                let message = String::from("network error: ") + &failure;
                return Err(error(Code::Network.as_str(), &message, 0));
            }
            attempt += 1;
            let delay = backoff.delay(attempt, js_sys::Math::random(), floor);
            wakeup.sleep(Some(delay)).await;
        }
    })
}

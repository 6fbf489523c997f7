//! The browser client: `TaskClient` and its watches, in Rust.
//!
//! It speaks PROTOCOL.md to any backend: creates tasks, delivers results,
//! and follows a task by resuming with the mirror's version, merging every
//! answer through `taskwire_core::Mirror` (the same reducer the server
//! ran), so stale, duplicated or divergent answers never reach the page.
//! The JS layer (`js/api.js`) owns the runtime glue: listeners for
//! `online`/`visibilitychange` (which `nudge()` a waiting watch),
//! `localStorage` persistence, and turning sink events into callbacks and
//! promises.

mod backoff;
mod http;
mod url;
mod wait;
mod watch;

use std::rc::Rc;

use js_sys::Array;
use js_sys::{Function, Promise};
use serde::Serialize;
use taskwire_core as tw;
use tw::wire::{from_json, to_json};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::future_to_promise;
use web_sys::AbortController;

use crate::{safe_int, throw};
use backoff::Backoff;
use http::{Failure, Http};
use url::task_url;
use wait::Wakeup;
use watch::{Settings, Transport, Watch};

fn invalid(message: String) -> JsValue {
    throw(tw::Error::invalid(message))
}

/// The wasm side of `TaskClient`.
#[wasm_bindgen]
pub struct ClientCore {
    http: Rc<Http>,
    backoff: Backoff,
    transport: Transport,
    wait_ms: u32,
}

/// What `createTask` and `deliver` resolve to: the raw HTTP answer, judged
/// by the JS layer.
#[derive(Serialize)]
struct Answer {
    status: u16,
    body: String,
}

#[wasm_bindgen]
impl ClientCore {
    /// The JS layer has checked the types; this checks the values, so
    /// that every rule (and message) lives in one place. `headers` is a
    /// flat `[name, value, name, value, …]` array of strings, `fetch` an
    /// optional injected fetch function, `transport` `"long-poll"` or
    /// `"sse"`, numbers `NaN` when not given.
    #[wasm_bindgen(constructor)]
    pub fn new(
        base_url: &str,
        headers: Array,
        fetch: JsValue,
        initial_ms: f64,
        max_ms: f64,
        transport: &str,
        wait_ms: f64,
    ) -> Result<ClientCore, JsValue> {
        let base = base_url.trim().to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(invalid(format!(
                "options.baseUrl: must start with http:// or https://, got {}",
                tw::error::quoted(&base)
            )));
        }
        let fetch = if fetch.is_undefined() || fetch.is_null() {
            None
        } else {
            Some(
                fetch
                    .dyn_into::<Function>()
                    .map_err(|_| invalid("options.fetch: must be a function".into()))?,
            )
        };
        let mut pairs = Vec::new();
        let mut items = headers.iter();
        while let (Some(name), Some(value)) = (items.next(), items.next()) {
            match (name.as_string(), value.as_string()) {
                (Some(name), Some(value)) => pairs.push((name, value)),
                _ => {
                    return Err(invalid(
                        "options.headers: names and values must be strings".into(),
                    ))
                }
            }
        }
        let mut backoff = Backoff::default();
        for (value, field, slot) in [
            (initial_ms, "initialMs", &mut backoff.initial_ms),
            (max_ms, "maxMs", &mut backoff.max_ms),
        ] {
            if value.is_nan() {
                continue;
            }
            if !(value.is_finite() && value >= 0.0) {
                return Err(invalid(format!(
                    "options.backoff.{field}: must be a finite number >= 0"
                )));
            }
            *slot = value;
        }
        backoff.max_ms = backoff.max_ms.max(backoff.initial_ms);
        let transport = match transport {
            "long-poll" | "" => Transport::LongPoll,
            "sse" => Transport::Sse,
            _ => {
                return Err(invalid(
                    "options.transport: must be \"long-poll\" or \"sse\"".into(),
                ))
            }
        };
        let wait_ms = if wait_ms.is_nan() {
            25_000
        } else {
            safe_int(wait_ms, "options.waitMs")?.min(30_000) as u32
        };
        Ok(ClientCore {
            http: Rc::new(Http {
                base,
                headers: pairs,
                fetch,
            }),
            backoff,
            transport,
            wait_ms,
        })
    }

    /// `POST /v1/tasks`; resolves to `{status, body}` JSON text. With an
    /// idempotency key, network failures, 429 and 5xx are retried (the key
    /// makes that safe); without one, they are not.
    pub fn create_task(&self, body: String, idempotency_key: Option<String>) -> Promise {
        let url = format!("{}/v1/tasks", self.http.base.trim_end_matches('/'));
        let retries = if idempotency_key.is_some() { 4 } else { 0 };
        let mut headers = vec![("content-type", String::from("application/json"))];
        if let Some(key) = idempotency_key {
            headers.push(("idempotency-key", key));
        }
        self.exchange("POST", url, headers, Some(body), retries)
    }

    /// `POST /v1/tasks/{id}/deliveries` under an idempotency key, retried
    /// like `create_task` with a key.
    pub fn deliver(&self, task_id: &str, key: String) -> Promise {
        let url = task_url(&self.http.base, task_id, "/deliveries");
        let headers = vec![("idempotency-key", key)];
        self.exchange("POST", url, headers, None, 4)
    }

    fn exchange(
        &self,
        method: &'static str,
        url: String,
        headers: Vec<(&'static str, String)>,
        body: Option<String>,
        retries: u32,
    ) -> Promise {
        let http = Rc::clone(&self.http);
        let backoff = self.backoff;
        future_to_promise(async move {
            let wakeup = Rc::new(Wakeup::default());
            let mut attempt = 0;
            loop {
                let controller = AbortController::new()
                    .map_err(|_| JsValue::from_str("network\tAbortController is unavailable"))?;
                let result = http
                    .send(method, &url, &headers, body.as_deref(), &controller)
                    .await;
                let (retryable, floor, failure) = match result {
                    Ok(response) => {
                        let status = response.status();
                        let text = http::text(&response, &controller).await.unwrap_or_default();
                        let busy = status == 429 || status >= 500;
                        if !busy || attempt >= retries {
                            return Ok(JsValue::from_str(&to_json(&Answer { status, body: text })));
                        }
                        let floor = http::retry_after(&response);
                        (true, floor, format!("HTTP {status}"))
                    }
                    Err(Failure::Network(e)) => (true, None, e),
                    Err(Failure::Aborted) => (false, None, String::from("aborted")),
                };
                if !retryable || attempt >= retries {
                    return Err(JsValue::from_str(&format!(
                        "network\tnetwork error: {failure}"
                    )));
                }
                attempt += 1;
                let delay = backoff.delay(attempt, js_sys::Math::random(), floor);
                wakeup.sleep(Some(delay)).await;
            }
        })
    }

    /// Starts following a task. `persisted` is a mirror saved by an
    /// earlier page (JSON text) or empty; a corrupt or foreign one is
    /// ignored. `sink(kind, json)` receives every event (see `watch.rs`);
    /// `online()` tells whether the runtime is online.
    pub fn watch(
        &self,
        task_id: &str,
        cursor: Option<f64>,
        persisted: Option<String>,
        sink: Function,
        online: Function,
    ) -> Result<WatchHandle, JsValue> {
        let fresh = tw::Mirror::new(task_id).map_err(throw)?;
        let restored = persisted
            .and_then(|text| from_json::<tw::Mirror>(&text, "persisted").ok())
            .filter(|m| m.task_id() == task_id);
        let mirror = restored.unwrap_or(fresh);
        let hint = match cursor {
            Some(c) => safe_int(c, "cursor")?,
            None => 0,
        };
        let watch = Watch::new(
            Settings {
                http: Rc::clone(&self.http),
                backoff: self.backoff,
                transport: self.transport,
                wait_ms: self.wait_ms,
            },
            mirror,
            hint,
            sink,
            online,
        );
        let task = watch.initial_task_json();
        wasm_bindgen_futures::spawn_local(Rc::clone(&watch).run());
        Ok(WatchHandle { watch, task })
    }
}

/// The wasm side of a watch.
#[wasm_bindgen]
pub struct WatchHandle {
    watch: Rc<Watch>,
    task: String,
}

#[wasm_bindgen]
impl WatchHandle {
    /// Aborts the request in flight and cancels timers.
    pub fn stop(&self) {
        self.watch.stop();
    }

    /// Cuts a backoff wait short (called when the page becomes visible).
    pub fn nudge(&self) {
        self.watch.nudge();
    }

    /// Aborts the request in flight and reconnects at once (called on
    /// `online` and `offline`: a request may be stranded on a dead
    /// connection).
    pub fn interrupt(&self) {
        self.watch.interrupt();
    }

    /// The task known when the watch started (restored), or `null`.
    pub fn initial_task(&self) -> String {
        self.task.clone()
    }
}

//! The browser client: `TaskClient` and its watches, in Rust.
//!
//! It speaks PROTOCOL.md to any backend: creates tasks, delivers results,
//! and follows a task with `taskwire_core::Follow`, the watch loop as a
//! sans-IO state machine, of which `watch.rs` is the executor (fetch,
//! `AbortController`, one timer (`timer.rs`), the SSE byte reader, persistence).
//! The JS layer (`js/client.js`) owns the runtime glue: listeners for
//! `online`/`offline`/`visibilitychange`, and turning sink events into
//! callbacks and promises.

mod exchange;
mod http;
mod store;
mod timer;
mod watch;

use alloc::rc::Rc;
use alloc::{string::String, string::ToString};

use js_sys::{Array, Function, Promise};
use taskwire_core as tw;
use tw::follow::{Backoff, Follow, FollowConfig, Transport, MAX_WAIT_MS};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};

use crate::{safe_int, throw};
use http::Http;
use store::Store;
use watch::Runner;

fn invalid(message: String) -> JsValue {
    throw(tw::Error::invalid(message))
}

/// `options[key]`; `undefined` when absent. The options objects are made
/// by the JS layer (plain data), so reading them cannot run user code.
fn field(options: &JsValue, key: &str) -> JsValue {
    http::property(options, key)
}

fn absent(value: &JsValue) -> bool {
    value.is_undefined() || value.is_null()
}

/// A number option ≥ 0, or `default` when absent.
fn millis(options: &JsValue, key: &str, default: f64) -> Result<f64, JsValue> {
    let value = field(options, key);
    if absent(&value) {
        return Ok(default);
    }
    match value.as_f64() {
        Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(invalid(
            String::from("options.backoff.") + key + ": must be a finite number >= 0",
        )),
    }
}

/// An HTTP date through the runtime's `Date.parse` (which the page has
/// anyway; core's own reader would cost it ~0.7 KB).
pub(crate) fn js_date(value: &str) -> Option<f64> {
    Some(js_sys::Date::parse(value)).filter(|ms| ms.is_finite())
}

/// The wasm side of `TaskClient`.
#[wasm_bindgen]
pub struct ClientCore {
    http: Rc<Http>,
    backoff: Backoff,
    transport: Transport,
    wait_ms: u32,
}

#[wasm_bindgen]
impl ClientCore {
    /// `options`: `{baseUrl, headers, fetch?, initialMs?, maxMs?,
    /// transport?, waitMs?}`, where `headers` is a flat `[name, value, …]`
    /// array of strings. The JS layer has checked the types; this checks
    /// the values, so that every rule (and message) lives in one place.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<ClientCore, JsValue> {
        let base = field(&options, "baseUrl").as_string().unwrap_or_default();
        let base = base.trim().to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(invalid(
                String::from("options.baseUrl: must start with http:// or https://, got ")
                    + &tw::error::quoted(&base),
            ));
        }
        let fetch = field(&options, "fetch");
        let fetch = if absent(&fetch) {
            None
        } else {
            Some(
                fetch
                    .dyn_into::<Function>()
                    .map_err(|_| invalid("options.fetch: must be a function".into()))?,
            )
        };
        let headers = field(&options, "headers")
            .dyn_into::<Array>()
            .unwrap_or_default();
        let mut items = headers.iter();
        while let (Some(name), Some(value)) = (items.next(), items.next()) {
            if !(name.is_string() && value.is_string()) {
                return Err(invalid(
                    "options.headers: names and values must be strings".into(),
                ));
            }
        }
        let defaults = Backoff::default();
        let mut backoff = Backoff {
            initial_ms: millis(&options, "initialMs", defaults.initial_ms)?,
            max_ms: millis(&options, "maxMs", defaults.max_ms)?,
        };
        backoff.max_ms = backoff.max_ms.max(backoff.initial_ms);
        let transport = match field(&options, "transport").as_string().as_deref() {
            None | Some("long-poll") => Transport::LongPoll,
            Some("sse") => Transport::Sse,
            Some(_) => {
                return Err(invalid(
                    "options.transport: must be \"long-poll\" or \"sse\"".into(),
                ))
            }
        };
        let wait_ms = field(&options, "waitMs");
        let wait_ms = if absent(&wait_ms) {
            25_000
        } else {
            safe_int(wait_ms.as_f64().unwrap_or(f64::NAN), "options.waitMs")?
                .min(u64::from(MAX_WAIT_MS)) as u32
        };
        Ok(ClientCore {
            http: Rc::new(Http {
                base,
                headers,
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
        exchange::create_task(Rc::clone(&self.http), self.backoff, body, idempotency_key)
    }

    /// `POST /v1/tasks/{id}/deliveries` under an idempotency key, retried
    /// like `create_task` with a key.
    pub fn deliver(&self, task_id: &str, key: String) -> Promise {
        exchange::deliver(Rc::clone(&self.http), self.backoff, task_id, key)
    }

    /// `POST /v1/tasks/{id}/cancel` with `body` (`{"reason"?}`, JSON
    /// text); resolves to the answer (`{changed, duplicate, reason,
    /// task}`). Retried like `deliver`: a repeated cancel is
    /// `duplicate-cancel`, so a retry after a lost answer changes nothing.
    pub fn cancel(&self, task_id: &str, body: String) -> Promise {
        exchange::act(Rc::clone(&self.http), self.backoff, task_id, "cancel", body)
    }

    /// `POST /v1/tasks/{id}/decisions` with `body` (`{"decision",
    /// "artifactHash", "version", "reason"?}`, JSON text); resolves like
    /// `cancel`. A repeat is `duplicate-decision`, so retries are safe.
    pub fn decide(&self, task_id: &str, body: String) -> Promise {
        exchange::act(
            Rc::clone(&self.http),
            self.backoff,
            task_id,
            "decisions",
            body,
        )
    }

    /// Starts following a task. `options`: `{taskId, cursor?, storage?,
    /// storageKey?, sink, online?}`: `storage` a `localStorage`-like object
    /// the mirror is restored from (unless `cursor` is given; a corrupt or
    /// foreign value is ignored) and saved to under `storageKey`;
    /// `sink(kind, json)` receives every event (see `watch.rs`); `online()`
    /// tells whether the runtime is online.
    pub fn watch(&self, options: JsValue) -> Result<WatchHandle, JsValue> {
        let task_id = field(&options, "taskId").as_string().unwrap_or_default();
        let fresh = tw::Mirror::new(&task_id).map_err(throw)?;
        let cursor = field(&options, "cursor");
        let hint = if absent(&cursor) {
            0
        } else {
            safe_int(cursor.as_f64().unwrap_or(f64::NAN), "cursor")?
        };
        let sink: Function = field(&options, "sink")
            .dyn_into()
            .map_err(|_| invalid("sink: must be a function".into()))?;
        let online = field(&options, "online").dyn_into::<Function>().ok();
        let storage = field(&options, "storage");
        let store = match field(&options, "storageKey").as_string() {
            Some(key) if !absent(&storage) => Some(Store { storage, key }),
            _ => None,
        };
        let restored = match &store {
            Some(store) if absent(&cursor) => store.load(&task_id),
            _ => None,
        };
        let config = FollowConfig {
            backoff: self.backoff,
            transport: self.transport,
            wait_ms: self.wait_ms,
            // The jitter's seed: the only randomness, drawn here, once.
            seed: (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64,
            read_date: js_date,
            read_answer: |text| crate::read::read(text, "answer"),
        };
        let now = js_sys::Date::now();
        let follow = Follow::new(
            config,
            restored.unwrap_or(fresh),
            hint,
            now,
            Runner::read_online(online.as_ref()),
        );
        let runner = Runner::start(follow, Rc::clone(&self.http), sink, online, store);
        Ok(WatchHandle { runner })
    }
}

/// The wasm side of a watch. Dropping it (`free()`, `[Symbol.dispose]`)
/// stops the watch.
#[wasm_bindgen]
pub struct WatchHandle {
    runner: Rc<Runner>,
}

#[wasm_bindgen]
impl WatchHandle {
    /// Aborts the request in flight and cancels the timer.
    pub fn stop(&self) {
        self.runner.stop();
    }

    /// The page became visible: cuts a backoff wait short.
    pub fn visible(&self) {
        self.runner.feed(|f, now| f.handle_visibility(now, true));
    }

    /// `online` or `offline` fired: the request in flight may be stranded
    /// on a dead connection, so it is cut and the watch starts over.
    pub fn network(&self) {
        let online = Runner::read_online(self.runner.online());
        self.runner.feed(|f, now| f.handle_network(now, online));
    }

    /// The task known when the watch started (restored), or `null`.
    pub fn initial_task(&self) -> String {
        self.runner.initial_task()
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.runner.stop();
    }
}

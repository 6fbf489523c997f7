//! The browser client: `TaskClient` and its watches, in Rust.
//!
//! It speaks PROTOCOL.md to any backend: creates tasks and batches,
//! delivers results, and follows a task or a batch with
//! `taskwire_core::Follow`, the watch loop as a
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

    /// `POST {route}` (`/v1/tasks`, `/v1/batches`: one export for both
    /// creates); resolves to the 2xx body, JSON text. With an idempotency
    /// key, network failures, 429 and 5xx are retried (the key makes that
    /// safe); without one, they are not.
    pub fn create(&self, route: &str, body: String, idempotency_key: Option<String>) -> Promise {
        exchange::create(
            Rc::clone(&self.http),
            self.backoff,
            route,
            body,
            idempotency_key,
        )
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
        let (hint, parts) = Parts::read(&options)?;
        let restored = match &parts.store {
            Some(store) if hint.is_none() => store
                .load::<tw::Mirror>()
                .filter(|m| m.task_id() == task_id),
            _ => None,
        };
        let online = Runner::read_online(parts.online.as_ref());
        let mirror = restored.unwrap_or(fresh);
        let follow = Follow::new(
            self.config(),
            mirror,
            hint.unwrap_or(0),
            js_sys::Date::now(),
            online,
        );
        Ok(parts.start(follow, &self.http))
    }

    /// Starts following a batch. `options`: `{batchId, start?, storage?,
    /// storageKey?, sink, online?}`, as `watch`'s, where `start` is what
    /// is known already (a create's answer), as the JSON text of a
    /// snapshot `BatchAnswer`: the form the batch is stored in, restored
    /// through the same reader and merge as the server's answers.
    pub fn watch_batch(&self, options: JsValue) -> Result<WatchHandle, JsValue> {
        let batch_id = field(&options, "batchId").as_string().unwrap_or_default();
        let mut mirror = tw::BatchMirror::new(&batch_id).map_err(throw)?;
        let (_, parts) = Parts::read(&options)?;
        match field(&options, "start").as_string() {
            Some(text) => start_from(&mut mirror, &text).map_err(throw)?,
            None => {
                // A corrupt stored value is ignored, as a task's is.
                if let Some(text) = parts.store.as_ref().and_then(Store::text) {
                    let _ = start_from(&mut mirror, &text);
                }
            }
        }
        let online = Runner::read_online(parts.online.as_ref());
        let follow = Follow::batch(self.config(), mirror, js_sys::Date::now(), online);
        Ok(parts.start(follow, &self.http))
    }
}

/// One reader of batch answers for the follow, the start and the store
/// (each generic copy costs the page ~2 KB of wasm).
#[inline(never)]
fn read_batch(text: &str, what: &str) -> Result<tw::BatchAnswer, tw::Error> {
    crate::read::read(text, what)
}

/// Merges what is known (a create's answer, or the stored batch: a
/// snapshot answer) into a fresh mirror. Another batch's answer leaves
/// it knowing nothing.
#[inline(never)]
fn start_from(mirror: &mut tw::BatchMirror, text: &str) -> Result<(), tw::Error> {
    mirror.merge(&read_batch(text, "options")?);
    Ok(())
}

impl ClientCore {
    fn config(&self) -> FollowConfig {
        FollowConfig {
            backoff: self.backoff,
            transport: self.transport,
            wait_ms: self.wait_ms,
            // The jitter's seed: the only randomness, drawn here, once.
            seed: (js_sys::Math::random() * 9_007_199_254_740_992.0) as u64,
            read_date: js_date,
            read_answer: |text| crate::read::read(text, "answer"),
            read_batch: |text| read_batch(text, "answer"),
        }
    }
}

/// What every watch's options give: the cursor, the sink, the network
/// reading and the storage.
struct Parts {
    sink: Function,
    online: Option<Function>,
    store: Option<Store>,
}

impl Parts {
    fn read(options: &JsValue) -> Result<(Option<u64>, Parts), JsValue> {
        let cursor = field(options, "cursor");
        let cursor = if absent(&cursor) {
            None
        } else {
            Some(safe_int(cursor.as_f64().unwrap_or(f64::NAN), "cursor")?)
        };
        let sink: Function = field(options, "sink")
            .dyn_into()
            .map_err(|_| invalid("sink: must be a function".into()))?;
        let online = field(options, "online").dyn_into::<Function>().ok();
        let storage = field(options, "storage");
        let store = match field(options, "storageKey").as_string() {
            Some(key) if !absent(&storage) => Some(Store { storage, key }),
            _ => None,
        };
        Ok((
            cursor,
            Parts {
                sink,
                online,
                store,
            },
        ))
    }

    fn start(self, follow: Follow, http: &Rc<Http>) -> WatchHandle {
        let runner = Runner::start(follow, Rc::clone(http), self.sink, self.online, self.store);
        WatchHandle { runner }
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

    /// The cursor of the next request (a task's version, a batch's
    /// cursor).
    pub fn cursor(&self) -> f64 {
        self.runner.cursor() as f64
    }

    /// What was known when the watch started (restored or given): the
    /// task or `null`; a batch's views, `[]` when none.
    pub fn initial(&self) -> String {
        self.runner.initial()
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.runner.stop();
    }
}

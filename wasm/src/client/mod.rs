//! The browser client's Rust side: `ClientCore` (the client's checked
//! options, its URLs and retry delays) and its watches (`watch.rs`: a
//! `taskwire_core::Follow` of a task or a batch).
//!
//! The executor is JavaScript (`js/follow.js`): it sends the requests the
//! follow asks for (fetch, `AbortController`), waits (promises, one
//! timer), reads and writes the storage, feeds back what happens, and
//! hands the follow's events to the page; it also sends the POSTs
//! (`createTask`, `createBatch`, `deliver`, `cancel`, `decide`) and waits
//! out their retries. Every decision stays here: what to request and
//! when, how each answer and status is judged, the backoff, the messages.
//! An executor in Rust cost the page ~5 KB gzip more than these few
//! lines of JavaScript (its closures, promise callbacks, the web-sys
//! imports and their glue; docs/package.md).

mod watch;

use alloc::{string::String, string::ToString};

use taskwire_core as tw;
use tw::follow::{
    encode_segment, retry_after_ms, trim_slashes, Backoff, Follow, FollowConfig, Transport,
    MAX_WAIT_MS,
};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;

use crate::error::Code;
use crate::{safe_int, text, throw};
pub use watch::WatchHandle;

fn invalid(message: String) -> JsValue {
    throw(tw::Error::invalid(message))
}

/// A number option ≥ 0, or `default` when absent.
fn millis(value: Option<f64>, key: &str, default: f64) -> Result<f64, JsValue> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Some(_) => Err(invalid(
            String::from("options.backoff.") + key + ": must be a finite number >= 0",
        )),
    }
}

#[wasm_bindgen]
extern "C" {
    /// `Date.parse`, imported here rather than through js-sys: the page
    /// then links no js-sys (whose JSPI waker and closure shims stayed in
    /// the module's function table, with their panic messages).
    #[wasm_bindgen(js_namespace = Date, js_name = parse)]
    fn date_parse(value: &str) -> f64;
}

/// An HTTP date through the runtime's `Date.parse` (which the page has
/// anyway; core's own reader would cost it ~0.7 KB).
fn js_date(value: &str) -> Option<f64> {
    Some(date_parse(value)).filter(|ms| ms.is_finite())
}

/// The wasm side of `TaskClient`.
#[wasm_bindgen]
pub struct ClientCore {
    base: String,
    backoff: Backoff,
    transport: Transport,
    wait_ms: u32,
}

#[wasm_bindgen]
impl ClientCore {
    /// The client's options (`js/client.js` has checked their types; this
    /// checks the values, so that every rule and message lives in one
    /// place): the base URL, the backoff's `initialMs` and `maxMs`,
    /// `transport` (`long-poll` when not given) and `waitMs` (`undefined`
    /// when not given). Text crosses as `&str` throughout, never as an
    /// owned `String`: taking one in costs its boxed-slice conversion.
    #[wasm_bindgen(constructor)]
    pub fn new(
        base_url: &str,
        initial_ms: Option<f64>,
        max_ms: Option<f64>,
        transport: &str,
        wait_ms: Option<f64>,
    ) -> Result<ClientCore, JsValue> {
        let base = base_url.trim().to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(invalid(
                String::from("options.baseUrl: must start with http:// or https://, got ")
                    + &tw::error::quoted(&base),
            ));
        }
        let defaults = Backoff::default();
        let mut backoff = Backoff {
            initial_ms: millis(initial_ms, "initialMs", defaults.initial_ms)?,
            max_ms: millis(max_ms, "maxMs", defaults.max_ms)?,
        };
        backoff.max_ms = backoff.max_ms.max(backoff.initial_ms);
        let transport = match transport {
            "long-poll" => Transport::LongPoll,
            "sse" => Transport::Sse,
            _ => {
                return Err(invalid(
                    "options.transport: must be \"long-poll\" or \"sse\"".into(),
                ))
            }
        };
        let wait_ms = match wait_ms {
            None => 25_000,
            Some(ms) => safe_int(ms, "options.waitMs")?.min(u64::from(MAX_WAIT_MS)) as u32,
        };
        Ok(ClientCore {
            base,
            backoff,
            transport,
            wait_ms,
        })
    }

    /// The URL of a POST: `{base}{tail}` for a route (`/v1/tasks`,
    /// `/v1/batches`), else `{base}/v1/tasks/{id}/{tail}` (`deliveries`,
    /// `cancel`, `decisions`), the id percent-encoded.
    pub fn url(&self, task_id: &str, tail: &str) -> JsValue {
        let mut url = String::from(trim_slashes(&self.base));
        if !tail.starts_with("/") {
            url.push_str("/v1/tasks/");
            encode_segment(task_id, &mut url);
            url.push_str("/");
        }
        url.push_str(tail);
        text(url)
    }

    /// The wait in whole ms (as `setTimeout` takes it) before attempt
    /// `failures + 1` of a POST, given a uniform `random` in [0, 1): the
    /// backoff, raised to a `Retry-After` (read at `now`; empty when
    /// there is none, which reads as none).
    pub fn delay(&self, failures: u32, random: f64, retry_after: &str, now: f64) -> u32 {
        let floor = retry_after_ms(retry_after, now, js_date);
        // setTimeout takes whole milliseconds up to 2^31 - 1.
        self.backoff
            .delay(failures, random, floor)
            .clamp(0.0, 2_147_483_647.0) as u32
    }

    /// Whether a server's error code is one of PROTOCOL.md's (else the
    /// page sees `http-<status>`).
    pub fn known(code: &str) -> bool {
        Code::parse(code).is_some()
    }

    /// Starts following a task (`batch` false) or a batch at `now`
    /// (`Date.now()`). A task starts from `cursor` if given, else from
    /// `stored` (the persisted mirror's JSON text, if any; a corrupt or
    /// foreign value is ignored). A batch starts from `start`, what is
    /// known already (a create's answer), as the JSON text of a snapshot
    /// `BatchAnswer`: the form the batch is stored in, restored through
    /// the same reader and merge as the server's answers (else from
    /// `stored`, if sound); empty `start` and `stored` are none. `online`
    /// is the runtime's network reading,
    /// `random` a uniform draw in [0, 1) that seeds the backoff's jitter.
    /// One export for both (a second cost the page 0.2 KB gzip).
    #[allow(clippy::too_many_arguments)]
    pub fn watch(
        &self,
        batch: bool,
        id: &str,
        cursor: Option<f64>,
        start: &str,
        stored: &str,
        online: bool,
        now: f64,
        random: f64,
    ) -> Result<WatchHandle, JsValue> {
        let config = self.config(random);
        let follow = if batch {
            let mut mirror = tw::BatchMirror::new(id).map_err(throw)?;
            if !start.is_empty() {
                start_from(&mut mirror, start).map_err(throw)?;
            } else {
                // A corrupt (or empty) stored value is ignored, as a
                // task's is.
                let _ = start_from(&mut mirror, stored);
            }
            Follow::batch(config, mirror, now, online)
        } else {
            let fresh = tw::Mirror::new(id).map_err(throw)?;
            let hint = match cursor {
                None => None,
                Some(c) => Some(safe_int(c, "cursor")?),
            };
            let restored = Some(stored)
                .filter(|_| hint.is_none())
                .and_then(|text| crate::read::read::<tw::Mirror>(text, "persisted").ok())
                .filter(|m| m.task_id() == id);
            let mirror = restored.unwrap_or(fresh);
            Follow::new(config, mirror, hint.unwrap_or(0), now, online)
        };
        Ok(WatchHandle::new(follow, &self.base))
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
    fn config(&self, random: f64) -> FollowConfig {
        FollowConfig {
            backoff: self.backoff,
            transport: self.transport,
            wait_ms: self.wait_ms,
            // The jitter's seed: the only randomness, drawn once.
            seed: (random * 9_007_199_254_740_992.0) as u64,
            read_date: js_date,
            read_answer: |text| crate::read::read(text, "answer"),
            read_batch: |text| read_batch(text, "answer"),
        }
    }
}

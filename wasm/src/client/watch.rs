//! The wasm side of a watch: a `taskwire_core::Follow` that the JavaScript
//! executor (`js/follow.js`) drives. It decides everything and does no
//! I/O: the executor feeds it what happened (`feed`) and carries out what
//! it asks (`poll`, `timeout`).
//!
//! `poll` gives the outputs in the order the follow wants them handled,
//! each as the JSON text `[kind, payload]`: first the page's events,
//! `update` `{task, mode, applied, events, rejected, reason?}`, `reject`
//! `{taskId?, mode, rejected, version}`, `progress` (a batch's `{size,
//! terminal, counts, progress}`), `status` `{state, attempt?, retryInMs?,
//! error?}`, `done` `{task}` (`task` is null for a batch) and `fail`
//! `{code, message, status}` (the executor throws it as a
//! `TaskwireError`); then `abort` (a request id), then `request` `{id,
//! url, accept, lastEventId}` (`lastEventId` null unless it is a stream);
//! last, always, `timeout`: when the executor's one timer should fire
//! (null: no timer). One export for all of them, one (`feed`) for every
//! input and one (`read`) for what the executor reads of the state: each
//! export costs the page its glue on both sides (~0.15 KB gzip).

use alloc::string::String;

use taskwire_core as tw;
use tw::follow::{Failure, Follow, FollowEvent, RequestId};
use tw::json::{object, write};
use tw::text::decimal;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;

use crate::text;

/// The wasm side of a watch (`js/follow.js` wraps it).
#[wasm_bindgen]
pub struct WatchHandle {
    follow: Follow,
    /// The client's base URL, for the requests' URLs.
    base: String,
}

impl WatchHandle {
    pub(super) fn new(follow: Follow, base: &str) -> WatchHandle {
        WatchHandle {
            follow,
            base: String::from(base),
        }
    }
}

#[wasm_bindgen]
impl WatchHandle {
    /// One input at `now` (`Date.now()`), with the runtime's network
    /// reading (`online`). `kind`: 0 `stop()`; 1 the timer fired; 2
    /// `online`/`offline` fired; 3 the page became visible; 4 the head of
    /// request `id` (`status`, `text`: its `Retry-After`); 5 its whole
    /// body (`bytes`); 6 a chunk of its stream (`bytes`); 7 the stream's
    /// end; 8 its failure (`text`: the runtime's message); 9 a stream
    /// without a body. `text` and `bytes` are empty when not given (an
    /// empty `Retry-After` reads as none).
    #[allow(clippy::too_many_arguments)]
    pub fn feed(
        &mut self,
        kind: u8,
        now: f64,
        online: bool,
        id: f64,
        status: u16,
        text: &str,
        bytes: &[u8],
    ) {
        let f = &mut self.follow;
        f.set_online(online);
        let id = RequestId(id as u64);
        match kind {
            0 => f.stop(),
            1 => f.handle_timeout(now),
            2 => f.handle_network(now, online),
            3 => f.handle_visibility(now, true),
            4 => f.handle_head(now, id, status, Some(text)),
            5 => f.handle_body(now, id, bytes),
            6 => f.handle_chunk(now, id, bytes),
            7 => f.handle_end(now, id),
            8 => f.handle_failure(now, id, Failure::Network(text)),
            _ => f.handle_failure(now, id, Failure::NoBody),
        }
    }

    /// The next output, `[kind, payload]` (see the module docs): the
    /// last is always `timeout`.
    pub fn poll(&mut self) -> JsValue {
        let f = &mut self.follow;
        let (kind, json) = if let Some(event) = f.poll_event() {
            match &event {
                FollowEvent::Status(s) => ("status", write(s)),
                FollowEvent::Update(u) => ("update", write(u)),
                FollowEvent::Reject(r) => ("reject", write(r)),
                FollowEvent::Progress(p) => ("progress", write(p)),
                FollowEvent::Done(task) => ("done", object(&[("task", &task.as_ref())])),
                FollowEvent::Fail(fail) => (
                    "fail",
                    object(&[
                        ("code", &fail.code.as_str()),
                        ("message", &fail.message),
                        ("status", &u32::from(fail.status)),
                    ]),
                ),
            }
        } else if let Some(id) = f.poll_abort() {
            ("abort", write(&id.0))
        } else if let Some(request) = f.poll_request() {
            let last = request.last_event_id.map(decimal);
            let json = object(&[
                ("id", &request.id.0),
                ("url", &request.url(&self.base)),
                ("accept", &request.accept()),
                ("lastEventId", &last),
            ]);
            ("request", json)
        } else {
            // On the caller's clock; the JSON number reads back exactly.
            ("timeout", write(&f.poll_timeout()))
        };
        let mut out = String::from("[\"");
        out.push_str(kind);
        out.push_str("\",");
        out.push_str(&json);
        out.push_str("]");
        text(out)
    }

    /// What the executor reads of the state, by `what`: 0, what was known
    /// when the watch started (restored or given): the task or `null`,
    /// for a batch its snapshot answer (the stored form); 1, what to
    /// persist (saved before the first update or `done` of an input is
    /// delivered: the events of one input all follow its merge): the
    /// mirror (`{taskId, task, epoch?}`), a batch as its snapshot answer,
    /// `undefined` while nothing is known; 2, the cursor of the next
    /// request (a task's version, a batch's cursor), in decimal.
    pub fn read(&self, what: u8) -> JsValue {
        let follow = &self.follow;
        text(match (what, follow.mirror(), follow.batch_mirror()) {
            (0, _, Some(b)) => write(b),
            (0, m, _) => match m.and_then(|m| m.task()) {
                Some(task) => write(task),
                None => String::from("null"),
            },
            (1, Some(m), _) if m.task().is_some() => write(m),
            (1, _, Some(b)) if b.cursor() > 0 => write(b),
            (1, _, _) => return JsValue::UNDEFINED,
            _ => decimal(follow.cursor()),
        })
    }
}

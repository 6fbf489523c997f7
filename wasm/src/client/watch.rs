//! The watch executor: runs a `taskwire_core::Follow` with the browser's
//! I/O. It decides nothing: it sends the requests the follow asks for
//! (fetch + `AbortController`), feeds back what happens (heads, bodies,
//! stream chunks, failures, one timer, the runtime's network and
//! visibility), and hands the follow's events to the page.
//!
//! Events reach JS through one function, the sink (`sink(kind, json)`),
//! always called with no Rust borrow held, so a listener may call
//! `stop()` from inside it. Kinds: `update` `{task, mode, applied, events,
//! rejected, reason?}`, `reject` `{taskId?, mode, rejected, version}`,
//! `progress` (a batch's `{size, terminal, counts, progress}`), `status`
//! `{state, attempt?, retryInMs?, error?}`, `done` `{task}` (JSON text;
//! `task` is null for a batch), and `fail` with a `TaskwireError` (`code`,
//! `message`, `status` for HTTP).
//!
//! Persistence (`store.rs`) is written once per input that brought an
//! update, before its listeners run, and at the end: a batch of 500 is
//! written once per answer, not once per task.

use alloc::rc::{Rc, Weak};
use alloc::{string::String, vec};
use core::cell::RefCell;

use super::timer::Timeout;
use js_sys::Function;
use taskwire_core as tw;
use tw::follow::{Failure, Follow, FollowEvent, Request, RequestId, RequestKind};
use tw::json::{object, write};
use wasm_bindgen::JsValue;
use web_sys::AbortController;

use super::http::{self, settle, BodyReader, Http};
use super::store::Store;
use crate::error::{error, Code};

/// One running watch.
pub struct Runner {
    follow: RefCell<Follow>,
    http: Rc<Http>,
    sink: Function,
    /// `() => boolean`: the runtime's network reading, if it has one.
    online: Option<Function>,
    store: Option<Store>,
    in_flight: RefCell<Option<(RequestId, AbortController)>>,
    timer: RefCell<Option<(f64, Timeout)>>,
}

impl Runner {
    /// Starts `follow` (already created at `Date.now()`).
    pub fn start(
        follow: Follow,
        http: Rc<Http>,
        sink: Function,
        online: Option<Function>,
        store: Option<Store>,
    ) -> Rc<Runner> {
        let runner = Rc::new(Runner {
            follow: RefCell::new(follow),
            http,
            sink,
            online,
            store,
            in_flight: RefCell::new(None),
            timer: RefCell::new(None),
        });
        runner.pump();
        runner
    }

    /// The runtime's network reading (true when it cannot tell).
    pub fn read_online(online: Option<&Function>) -> bool {
        match online.map(|f| f.call0(&JsValue::NULL)) {
            Some(Ok(v)) => v.as_bool() != Some(false),
            _ => true,
        }
    }

    /// The runtime's network reading function.
    pub fn online(&self) -> Option<&Function> {
        self.online.as_ref()
    }

    /// The cursor of the next request.
    pub fn cursor(&self) -> u64 {
        self.follow.borrow().cursor()
    }

    /// What is known at the start (restored, or given), as JSON: the
    /// task or `null`; for a batch, its snapshot answer (the stored form).
    pub fn initial(&self) -> String {
        let follow = self.follow.borrow();
        if let Some(batch) = follow.batch_mirror() {
            return write(batch);
        }
        match follow.mirror().and_then(|m| m.task()) {
            Some(task) => write(task),
            None => String::from("null"),
        }
    }

    /// Feeds one input (with the current time and network reading), then
    /// carries out what the follow asks.
    pub fn feed(self: &Rc<Self>, input: impl FnOnce(&mut Follow, f64)) {
        let online = Runner::read_online(self.online.as_ref());
        {
            let mut follow = self.follow.borrow_mut();
            follow.set_online(online);
            input(&mut follow, js_sys::Date::now());
        }
        self.pump();
    }

    fn pump(self: &Rc<Self>) {
        let mut saved = false;
        loop {
            let event = self.follow.borrow_mut().poll_event();
            let Some(event) = event else { break };
            if !saved && matches!(event, FollowEvent::Update(_) | FollowEvent::Done(_)) {
                // The events of one input all follow its merge: the
                // mirror is already what they lead to.
                saved = true;
                self.save();
            }
            self.deliver(event);
        }
        loop {
            let abort = self.follow.borrow_mut().poll_abort();
            let Some(id) = abort else { break };
            let matching = self
                .in_flight
                .borrow()
                .as_ref()
                .is_some_and(|(current, _)| *current == id);
            if matching {
                if let Some((_, controller)) = self.in_flight.borrow_mut().take() {
                    controller.abort();
                }
            }
        }
        let request = self.follow.borrow_mut().poll_request();
        if let Some(request) = request {
            self.send(request);
        }
        self.arm();
    }

    fn deliver(&self, event: FollowEvent) {
        let (kind, json) = match &event {
            FollowEvent::Status(s) => ("status", write(s)),
            FollowEvent::Update(u) => ("update", write(u)),
            FollowEvent::Reject(r) => ("reject", write(r)),
            FollowEvent::Progress(p) => ("progress", write(p)),
            FollowEvent::Done(task) => ("done", object(&[("task", &task.as_ref())])),
            FollowEvent::Fail(f) => {
                let code = Code::from(f.code).as_str();
                let _ = self.sink.call2(
                    &JsValue::NULL,
                    &JsValue::from_str("fail"),
                    &error(code, &f.message, f.status),
                );
                return;
            }
        };
        // The JS side catches listener errors; a throw here would unwind
        // through wasm, so the result is ignored either way.
        let _ = self.sink.call2(
            &JsValue::NULL,
            &JsValue::from_str(kind),
            &JsValue::from_str(&json),
        );
    }

    /// Persists the mirror (task and epoch; a batch's cursor and views),
    /// when it knows something. Called between events, when no borrow of
    /// the follow is held.
    fn save(&self) {
        let Some(store) = &self.store else { return };
        let follow = self.follow.borrow();
        let text = match (follow.mirror(), follow.batch_mirror()) {
            (Some(m), _) if m.task().is_some() => write(m),
            (_, Some(b)) if b.cursor() > 0 => write(b),
            _ => return,
        };
        store.save(&text);
    }

    /// One timer for the follow's next deadline; replaced when it moves.
    fn arm(self: &Rc<Self>) {
        let deadline = self.follow.borrow().poll_timeout();
        let unchanged = match (&*self.timer.borrow(), deadline) {
            (Some((armed, _)), Some(at)) => *armed == at,
            (None, None) => true,
            _ => false,
        };
        if unchanged {
            return;
        }
        let timer = deadline.map(|at| {
            let weak: Weak<Runner> = Rc::downgrade(self);
            // setTimeout takes whole milliseconds up to 2^31 - 1.
            let ms = (at - js_sys::Date::now()).clamp(0.0, 2_147_483_647.0) as u32;
            let timeout = Timeout::new(ms, move || {
                if let Some(runner) = weak.upgrade() {
                    let fired = runner.timer.borrow_mut().take();
                    runner.feed(|f, now| f.handle_timeout(now));
                    drop(fired);
                }
            });
            (at, timeout)
        });
        let old = core::mem::replace(&mut *self.timer.borrow_mut(), timer);
        drop(old);
    }

    /// Sends `request` and feeds back, in callbacks, everything that
    /// happens to it; nothing once the follow has aborted it.
    fn send(self: &Rc<Self>, request: Request) {
        let id = request.id;
        let Ok(controller) = AbortController::new() else {
            let failure = Failure::Network("AbortController is unavailable");
            return self.feed(|f, now| f.handle_failure(now, id, failure));
        };
        *self.in_flight.borrow_mut() = Some((id, controller.clone()));
        let url = request.url(&self.http.base);
        let mut headers = vec![("accept", String::from(request.accept()))];
        if let Some(last) = request.last_event_id {
            headers.push(("last-event-id", tw::follow::decimal(last)));
        }
        match self.http.fetch("GET", &url, &headers, None, &controller) {
            Ok(promise) => {
                let runner = Rc::clone(self);
                let stream = request.kind == RequestKind::Stream;
                settle(&promise, move |ok, value| {
                    runner.on_head(id, stream, &controller, ok, value)
                });
            }
            Err(e) => self.feed(|f, now| f.handle_failure(now, id, Failure::Network(&e))),
        }
    }

    /// A failed wait: the follow's own abort, or a failure to report.
    fn failed(self: &Rc<Self>, id: RequestId, controller: &AbortController, error: &str) {
        if !controller.signal().aborted() {
            self.feed(|f, now| f.handle_failure(now, id, Failure::Network(error)));
        }
    }

    fn on_head(
        self: &Rc<Self>,
        id: RequestId,
        stream: bool,
        controller: &AbortController,
        ok: bool,
        value: JsValue,
    ) {
        let head = if ok {
            http::response(value)
        } else {
            Err(http::describe(&value))
        };
        let response = match head {
            Ok(response) => response,
            Err(e) => return self.failed(id, controller, &e),
        };
        let retry_after = http::header(&response, "retry-after");
        let status = response.status();
        self.feed(|f, now| f.handle_head(now, id, status, retry_after.as_deref()));
        if !self.wants(id) {
            return;
        }
        let controller = controller.clone();
        if !stream {
            return match response.array_buffer() {
                Ok(promise) => {
                    let runner = Rc::clone(self);
                    settle(&promise, move |ok, value| {
                        if !ok {
                            return runner.failed(id, &controller, &http::describe(&value));
                        }
                        let body = js_sys::Uint8Array::new(&value).to_vec();
                        runner.feed(|f, now| f.handle_body(now, id, &body));
                    });
                }
                Err(e) => self.failed(id, &controller, &http::describe(&e)),
            };
        }
        match BodyReader::new(&response) {
            Some(reader) => self.read(id, controller, Rc::new(reader)),
            None => self.feed(|f, now| f.handle_failure(now, id, Failure::NoBody)),
        }
    }

    /// Reads stream `id` chunk by chunk until it ends or is no longer wanted.
    fn read(self: &Rc<Self>, id: RequestId, controller: AbortController, reader: Rc<BodyReader>) {
        let promise = match reader.read() {
            Ok(promise) => promise,
            Err(e) => return self.failed(id, &controller, &e),
        };
        let runner = Rc::clone(self);
        settle(&promise, move |ok, value| {
            let chunk = if ok {
                http::chunk(&value)
            } else {
                Err(http::describe(&value))
            };
            match chunk {
                Ok(Some(bytes)) => {
                    runner.feed(|f, now| f.handle_chunk(now, id, &bytes));
                    if runner.wants(id) {
                        runner.read(id, controller, reader);
                    }
                }
                Ok(None) => runner.feed(|f, now| f.handle_end(now, id)),
                Err(e) => runner.failed(id, &controller, &e),
            }
        });
    }

    fn wants(&self, id: RequestId) -> bool {
        self.in_flight
            .borrow()
            .as_ref()
            .is_some_and(|(current, _)| *current == id)
    }

    /// Stops now (`stop()`, or the handle was dropped).
    pub fn stop(self: &Rc<Self>) {
        self.feed(|f, _| f.stop());
        self.timer.borrow_mut().take();
    }
}

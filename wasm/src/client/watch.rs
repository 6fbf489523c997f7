//! The watch loop: resume with the mirror's version, merge each answer,
//! back off on failure, stop at a terminal state.
//!
//! Everything that happens is reported through one JS function, the sink
//! (`sink(kind, json)`), always called with no Rust borrow held, so a
//! listener may call `stop()` from inside it. Kinds:
//! - `update` `{task, mode, applied, rejected}`: the version rose;
//! - `reject` `{mode, rejected, version}`: an answer was (partly) refused
//!   and the version did not rise;
//! - `status` `{state, attempt?, retryInMs?, error?}`;
//! - `done` `{task}`: terminal state reached;
//! - `fail` `{code, message, status?}`: a fatal error (401/403/404).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use gloo_timers::callback::Timeout;
use js_sys::Function;
use serde::Serialize;
use taskwire_core as tw;
use tw::wire::{from_json, to_json};
use wasm_bindgen::JsValue;
use web_sys::AbortController;

use super::backoff::Backoff;
use super::http::{self, BodyReader, Failure, Http};
use super::url::task_url;
use super::wait::Wakeup;
use taskwire_core::follow::sse;

/// Long-poll or Server-Sent Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `GET …/resume?cursor=N&waitMs=M`, again and again.
    LongPoll,
    /// `GET …/events` with `Last-Event-ID`, read as a stream.
    Sse,
}

/// What the loop needs from its client.
pub struct Settings {
    pub http: Rc<Http>,
    pub backoff: Backoff,
    pub transport: Transport,
    /// How long the server may hold a long-poll.
    pub wait_ms: u32,
}

/// After this many SSE connections in a row that delivered nothing (or
/// died within a second), the path is assumed to buffer (a proxy holding
/// the stream back) and the watch falls back to long-poll.
const SHORT_SSE_LIMIT: u32 = 3;
/// An SSE connection whose first message (the server sends one at once)
/// has not arrived by then is assumed to be buffered.
const SSE_FIRST_MESSAGE_MS: u32 = 10_000;
/// Extra time a long-poll may take beyond `waitMs` before it is presumed
/// dead (a silently dropped connection never errors by itself).
const POLL_GRACE_MS: u32 = 15_000;

/// The state shared by the loop and the JS handle.
pub struct Watch {
    settings: Settings,
    task_id: String,
    mirror: RefCell<tw::Mirror>,
    /// The cursor to send while the mirror knows nothing (`watch(…, {cursor})`).
    cursor_hint: Cell<u64>,
    sink: Function,
    /// `() => boolean`: is the runtime online (navigator.onLine)?
    online: Function,
    stopped: Cell<bool>,
    /// The request in flight was cut on purpose (the network went away or
    /// came back): reconnect at once instead of backing off.
    interrupted: Cell<bool>,
    finished: Cell<bool>,
    need_snapshot: Cell<bool>,
    transport: Cell<Transport>,
    in_flight: RefCell<Option<AbortController>>,
    wakeup: Rc<Wakeup>,
    /// Rejections not yet reported in an `update`.
    unreported: RefCell<Vec<tw::Rejection>>,
    last_state: RefCell<&'static str>,
}

/// What one exchange came to.
enum Step {
    /// A usable answer (which may or may not have changed anything).
    Answered,
    /// Ask again at once (e.g. for a snapshot).
    Again,
    /// The task is terminal.
    Done,
    /// Give up: 401, 403, 404.
    Fatal {
        code: &'static str,
        status: u16,
        message: String,
    },
    /// Retry after a backoff delay, at least `floor_ms`.
    Retry {
        error: String,
        floor_ms: Option<f64>,
    },
    /// `stop()` was called.
    Stopped,
}

#[derive(Serialize)]
struct Update<'a> {
    task: Option<&'a tw::TaskView>,
    mode: tw::ResumeMode,
    applied: &'a [u64],
    /// The history entries applied (a delta's; empty for a snapshot).
    events: Vec<&'a tw::HistoryEntry>,
    rejected: &'a [tw::Rejection],
}

/// `{task}` for the `done` event.
#[derive(Serialize)]
struct Done<'a> {
    task: Option<&'a tw::TaskView>,
}

#[derive(Serialize)]
struct Reject<'a> {
    mode: tw::ResumeMode,
    rejected: &'a [tw::Rejection],
    version: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    state: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_in_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

#[derive(Serialize)]
struct Fail<'a> {
    code: &'a str,
    message: &'a str,
    status: u16,
}

impl Watch {
    pub fn new(
        settings: Settings,
        mirror: tw::Mirror,
        cursor_hint: u64,
        sink: Function,
        online: Function,
    ) -> Rc<Watch> {
        let transport = settings.transport;
        Rc::new(Watch {
            task_id: mirror.task_id().to_string(),
            settings,
            mirror: RefCell::new(mirror),
            cursor_hint: Cell::new(cursor_hint),
            sink,
            online,
            stopped: Cell::new(false),
            interrupted: Cell::new(false),
            finished: Cell::new(false),
            need_snapshot: Cell::new(false),
            transport: Cell::new(transport),
            in_flight: RefCell::new(None),
            wakeup: Rc::new(Wakeup::default()),
            unreported: RefCell::new(Vec::new()),
            last_state: RefCell::new(""),
        })
    }

    /// The restored task as JSON (`null` when nothing was restored).
    pub fn initial_task_json(&self) -> String {
        match self.mirror.borrow().task() {
            Some(task) => to_json(task),
            None => String::from("null"),
        }
    }

    /// Stops the watch now: aborts the request in flight, cancels the
    /// timer (by waking the sleeper), and reports `closed`.
    pub fn stop(&self) {
        if self.stopped.replace(true) {
            return;
        }
        let in_flight = self.in_flight.borrow_mut().take();
        if let Some(controller) = in_flight {
            controller.abort();
        }
        self.wakeup.fire();
        if !self.finished.get() {
            self.emit(
                "fail",
                &Fail {
                    code: "stopped",
                    message: "the watch was stopped before the task ended",
                    status: 0,
                },
            );
            self.status("closed", None, None, None);
        }
    }

    /// Cuts a backoff wait short (the page became visible).
    pub fn nudge(&self) {
        self.wakeup.fire();
    }

    /// The network went away or came back: a request in flight may be
    /// stranded on a dead connection (a held long-poll never errors by
    /// itself), so abort it and start over at once.
    pub fn interrupt(&self) {
        let in_flight = self.in_flight.borrow_mut().take();
        if let Some(controller) = in_flight {
            self.interrupted.set(true);
            controller.abort();
        }
        self.wakeup.fire();
    }

    fn emit<T: Serialize>(&self, kind: &str, payload: &T) {
        let json = to_json(payload);
        // The JS side catches listener errors; a throw here would unwind
        // through wasm, so the result is ignored either way.
        let _ = self.sink.call2(
            &JsValue::NULL,
            &JsValue::from_str(kind),
            &JsValue::from_str(&json),
        );
    }

    fn status(
        &self,
        state: &'static str,
        attempt: Option<u32>,
        retry_in_ms: Option<f64>,
        error: Option<&str>,
    ) {
        let repeat = *self.last_state.borrow() == state && attempt.is_none() && error.is_none();
        if repeat {
            return;
        }
        *self.last_state.borrow_mut() = state;
        self.emit(
            "status",
            &Status {
                state,
                attempt,
                retry_in_ms,
                error,
            },
        );
    }

    fn is_online(&self) -> bool {
        match self.online.call0(&JsValue::NULL) {
            Ok(v) => v.as_bool() != Some(false),
            Err(_) => true,
        }
    }

    fn cursor(&self) -> u64 {
        let version = self.mirror.borrow().version();
        if version == 0 && self.mirror.borrow().task().is_none() {
            self.cursor_hint.get()
        } else {
            version
        }
    }

    /// Runs until the task is terminal, a fatal error, or `stop()`.
    pub async fn run(self: Rc<Self>) {
        self.status("connecting", None, None, None);
        let mut failures: u32 = 0;
        let mut short_streams: u32 = 0;
        loop {
            if self.stopped.get() {
                return;
            }
            if !self.is_online() {
                self.status("offline", None, None, None);
                // Woken by the `online` event (nudge) or stop(); the timer
                // re-checks in case an event is missed.
                self.wakeup.sleep(Some(5_000.0)).await;
                continue;
            }
            let step = if self.need_snapshot.get() || self.transport.get() == Transport::LongPoll {
                self.poll_once().await
            } else {
                self.stream_once(&mut short_streams).await
            };
            match step {
                Step::Answered => failures = 0,
                Step::Again => {}
                Step::Stopped => return,
                Step::Done => {
                    self.finished.set(true);
                    let task = self.mirror.borrow().task().cloned();
                    self.emit(
                        "done",
                        &Done {
                            task: task.as_ref(),
                        },
                    );
                    self.status("closed", None, None, None);
                    return;
                }
                Step::Fatal {
                    code,
                    status,
                    message,
                } => {
                    self.finished.set(true);
                    self.emit(
                        "fail",
                        &Fail {
                            code,
                            message: &message,
                            status,
                        },
                    );
                    self.status("closed", None, None, Some(&message));
                    return;
                }
                Step::Retry { error, floor_ms } => {
                    if self.stopped.get() {
                        return;
                    }
                    failures = failures.saturating_add(1);
                    let delay =
                        self.settings
                            .backoff
                            .delay(failures, js_sys::Math::random(), floor_ms);
                    self.status(
                        "reconnecting",
                        Some(failures),
                        Some(delay.round()),
                        Some(&error),
                    );
                    self.wakeup.sleep(Some(delay)).await;
                }
            }
        }
    }

    /// A fresh controller for the next request, registered so that
    /// `stop()` can abort it.
    fn begin(&self) -> Option<AbortController> {
        let controller = AbortController::new().ok()?;
        *self.in_flight.borrow_mut() = Some(controller.clone());
        Some(controller)
    }

    fn end(&self) {
        self.in_flight.borrow_mut().take();
    }

    /// One long-poll (or snapshot) request.
    async fn poll_once(&self) -> Step {
        let snapshot = self.need_snapshot.get();
        let cursor = self.cursor();
        let url = if snapshot {
            task_url(
                &self.settings.http.base,
                &self.task_id,
                &format!("/resume?cursor={cursor}&snapshot=1"),
            )
        } else {
            task_url(
                &self.settings.http.base,
                &self.task_id,
                &format!("/resume?cursor={cursor}&waitMs={}", self.settings.wait_ms),
            )
        };
        let Some(controller) = self.begin() else {
            return Step::Retry {
                error: "AbortController is unavailable".into(),
                floor_ms: None,
            };
        };
        let guard = {
            let c = controller.clone();
            Timeout::new(
                self.settings.wait_ms.saturating_add(POLL_GRACE_MS),
                move || c.abort(),
            )
        };
        let accept = [("accept", String::from("application/json"))];
        let result = self
            .settings
            .http
            .send("GET", &url, &accept, None, &controller)
            .await;
        let step = match result {
            Ok(response) => match self.classify(&response) {
                Some(step) => step,
                None => match http::text(&response, &controller).await {
                    Ok(body) => self.merge_text(&body, snapshot),
                    Err(failure) => self.failed(failure),
                },
            },
            Err(failure) => self.failed(failure),
        };
        drop(guard);
        self.end();
        step
    }

    /// One SSE connection, read until it ends.
    async fn stream_once(&self, short_streams: &mut u32) -> Step {
        let url = task_url(&self.settings.http.base, &self.task_id, "/events");
        let Some(controller) = self.begin() else {
            return Step::Retry {
                error: "AbortController is unavailable".into(),
                floor_ms: None,
            };
        };
        let started = js_sys::Date::now();
        let headers = [
            ("accept", String::from("text/event-stream")),
            ("last-event-id", self.cursor().to_string()),
        ];
        let result = self
            .settings
            .http
            .send("GET", &url, &headers, None, &controller)
            .await;
        let response = match result {
            Ok(r) => r,
            Err(failure) => {
                self.end();
                return self.failed(failure);
            }
        };
        if let Some(step) = self.classify(&response) {
            self.end();
            return step;
        }
        let Some(reader) = BodyReader::new(&response) else {
            self.end();
            return Step::Retry {
                error: "the event stream has no body".into(),
                floor_ms: None,
            };
        };
        // A buffering proxy holds the first message back: give up on the
        // connection if it does not arrive in time.
        let mut first_message_guard = {
            let c = controller.clone();
            Some(Timeout::new(SSE_FIRST_MESSAGE_MS, move || c.abort()))
        };
        let mut parser = sse::Parser::default();
        let mut messages = 0u32;
        let outcome = 'read: loop {
            match reader.next(&controller).await {
                Ok(Some(chunk)) => {
                    for message in parser.push(&chunk) {
                        if message.event != "resume" && message.event != "message" {
                            continue;
                        }
                        messages += 1;
                        first_message_guard.take();
                        match self.merge_text(&message.data, false) {
                            Step::Answered | Step::Again if self.need_snapshot.get() => {
                                // A gap in the stream: fetch a snapshot, then reconnect.
                                controller.abort();
                                break 'read Step::Again;
                            }
                            Step::Answered | Step::Again => {}
                            other => {
                                controller.abort();
                                break 'read other;
                            }
                        }
                    }
                }
                Ok(None) => break Step::Answered,
                Err(Failure::Aborted) if self.stopped.get() => break Step::Stopped,
                Err(Failure::Aborted) if self.interrupted.replace(false) => break Step::Again,
                Err(Failure::Aborted) => {
                    break Step::Retry {
                        error: "no event arrived: the stream looks buffered".into(),
                        floor_ms: None,
                    }
                }
                Err(Failure::Network(e)) => {
                    break Step::Retry {
                        error: e,
                        floor_ms: None,
                    }
                }
            }
        };
        drop(first_message_guard);
        self.end();
        if matches!(outcome, Step::Stopped | Step::Done | Step::Fatal { .. }) {
            return outcome;
        }
        let lived_ms = js_sys::Date::now() - started;
        if messages == 0 || lived_ms < 1_000.0 {
            *short_streams += 1;
        } else {
            *short_streams = 0;
        }
        if *short_streams >= SHORT_SSE_LIMIT {
            self.transport.set(Transport::LongPoll);
            self.status(
                "reconnecting",
                None,
                None,
                Some("the event stream keeps ending early (a buffering proxy?): falling back to long-poll"),
            );
            return Step::Again;
        }
        match outcome {
            // A stream that ended normally after real messages: reconnect at once.
            Step::Answered if messages > 0 && lived_ms >= 1_000.0 => Step::Answered,
            Step::Answered => Step::Retry {
                error: "the event stream ended early".into(),
                floor_ms: None,
            },
            other => other,
        }
    }

    /// Maps a non-200 response to its step; `None` for 200.
    fn classify(&self, response: &web_sys::Response) -> Option<Step> {
        let status = response.status();
        match status {
            200 => None,
            401 => Some(Step::Fatal {
                code: "unauthorized",
                status,
                message: "the server refused the credentials (401)".into(),
            }),
            403 => Some(Step::Fatal {
                code: "forbidden",
                status,
                message: "the server forbids this task (403)".into(),
            }),
            404 => Some(Step::Fatal {
                code: "not-found",
                status,
                message: String::from("the server has no such task (404)"),
            }),
            429 | 503 => {
                let floor = http::retry_after(response);
                Some(Step::Retry {
                    error: format!("the server is busy ({status})"),
                    floor_ms: floor,
                })
            }
            _ => Some(Step::Retry {
                error: format!("unexpected HTTP status {status}"),
                floor_ms: None,
            }),
        }
    }

    fn failed(&self, failure: Failure) -> Step {
        match failure {
            Failure::Aborted if self.stopped.get() => Step::Stopped,
            Failure::Aborted if self.interrupted.replace(false) => Step::Again,
            Failure::Aborted => Step::Retry {
                error: "the request timed out".into(),
                floor_ms: None,
            },
            Failure::Network(e) => Step::Retry {
                error: format!("network error: {e}"),
                floor_ms: None,
            },
        }
    }

    /// Parses and merges one resume answer.
    fn merge_text(&self, body: &str, was_snapshot_request: bool) -> Step {
        if self.stopped.get() {
            return Step::Stopped;
        }
        let answer: tw::ResumeAnswer = match from_json(body, "answer") {
            Ok(a) => a,
            Err(e) => {
                return Step::Retry {
                    error: format!("bad answer from the server: {}", e.message),
                    floor_ms: None,
                };
            }
        };
        let outcome = self.mirror.borrow_mut().merge(&answer);
        self.cursor_hint.set(0);
        if outcome.next == tw::Next::Snapshot {
            self.need_snapshot.set(true);
        } else if was_snapshot_request {
            self.need_snapshot.set(false);
        }
        let rejected = {
            let mut unreported = self.unreported.borrow_mut();
            unreported.extend(outcome.rejected.iter().copied());
            if outcome.changed {
                std::mem::take(&mut *unreported)
            } else {
                Vec::new()
            }
        };
        self.status("live", None, None, None);
        let (terminal, version) = {
            let mirror = self.mirror.borrow();
            (
                mirror.state().is_some_and(|s| s.is_terminal()),
                mirror.version(),
            )
        };
        if outcome.changed {
            let mirror = self.mirror.borrow().clone();
            let events = answer
                .events()
                .iter()
                .filter(|e| outcome.applied.contains(&e.version))
                .collect();
            self.emit(
                "update",
                &Update {
                    task: mirror.task(),
                    mode: outcome.mode,
                    applied: &outcome.applied,
                    events,
                    rejected: &rejected,
                },
            );
        } else if !outcome.rejected.is_empty() {
            self.emit(
                "reject",
                &Reject {
                    mode: outcome.mode,
                    rejected: &outcome.rejected,
                    version,
                },
            );
        }
        if self.stopped.get() {
            return Step::Stopped;
        }
        if terminal && outcome.next == tw::Next::None {
            return Step::Done;
        }
        if outcome.next == tw::Next::Snapshot {
            // A snapshot that is itself refused (a wrong or regressing
            // server) must not turn into a tight loop: back off.
            if was_snapshot_request && !outcome.changed {
                return Step::Retry {
                    error: "the server's snapshot was refused".into(),
                    floor_ms: None,
                };
            }
            return Step::Again;
        }
        if !outcome.changed && !outcome.rejected.is_empty() {
            // Nothing new and something refused: a stale replay (a cache, a
            // lagging replica). A server that keeps answering like that
            // must not be asked again at once, in a tight loop.
            return Step::Retry {
                error: "the server's answer was stale".into(),
                floor_ms: None,
            };
        }
        Step::Answered
    }
}

//! The inputs of a [`Follow`]: what the executor saw happen.

use super::step::{self, Step};
use super::{
    retry_after_ms, Failure, Follow, Phase, RequestId, RequestKind, SSE_FIRST_MESSAGE_MS,
    SSE_IDLE_MS,
};
use super::{ConnState, Fail, FailCode, FollowEvent};
use alloc::string::String;

impl Follow {
    // ---- inputs -----------------------------------------------------------

    /// The runtime's network reading (`navigator.onLine`); read when the
    /// next request is decided. Changes nothing by itself.
    pub fn set_online(&mut self, online: bool) {
        self.online = online;
    }

    /// The runtime fired `online` or `offline`. A request in flight may be
    /// stranded on a connection that died with the old network (a held
    /// long-poll never errors by itself), so it is cut, and the follow
    /// starts over at once: no backoff, it is not a failure.
    pub fn handle_network(&mut self, now: f64, online: bool) {
        let t = self.clock.tick(now);
        self.online = online;
        match core::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::Flight(flight) => {
                self.abort(flight.id);
                if flight.kind == RequestKind::Stream && flight.head {
                    self.end_stream(flight, Step::Again, t);
                } else {
                    self.finish(Step::Again, t);
                }
            }
            Phase::Offline { .. } | Phase::Waiting { .. } => self.advance(t),
            Phase::Closed => {}
        }
    }

    /// The page became visible (`visible`) or hidden. Becoming visible
    /// cuts a backoff wait short.
    pub fn handle_visibility(&mut self, now: f64, visible: bool) {
        let t = self.clock.tick(now);
        if visible && matches!(self.phase, Phase::Offline { .. } | Phase::Waiting { .. }) {
            self.advance(t);
        }
    }

    /// The timer armed for [`poll_timeout`](Follow::poll_timeout) fired.
    ///
    /// A long-poll or snapshot not answered by its deadline is cut and sent
    /// again at once, and is no failure: the follow cut it on its own
    /// timer, and the likeliest cause is not an outage but a request the
    /// runtime had not sent yet (a browser holds at most 6 connections per
    /// origin over HTTP/1.1 and queues the rest), so counting it made a
    /// page with more watches than connections say `reconnecting` on a
    /// healthy network (issue 29). A dead server still shows: its refusals
    /// and errors are failures. At most one request per `waitMs` + 15 s.
    pub fn handle_timeout(&mut self, now: f64) {
        let mut t = self.clock.tick(now);
        let due = match &self.phase {
            Phase::Offline { recheck_at } => Some(*recheck_at),
            Phase::Waiting { until } => Some(*until),
            Phase::Flight(flight) => flight.deadline,
            Phase::Closed => None,
        };
        let Some(due) = due else { return };
        if due > t {
            // The timer is trusted over a clock that went back.
            self.clock.elapsed = due;
            t = due;
        }
        match core::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::Offline { .. } | Phase::Waiting { .. } => self.advance(t),
            Phase::Flight(flight) => {
                self.abort(flight.id);
                if flight.kind == RequestKind::Stream {
                    let error = if flight.messages == 0 {
                        "no event arrived: the stream looks buffered"
                    } else {
                        "the event stream went silent (no heartbeat for 45 s)"
                    };
                    self.end_stream(flight, Step::retry(error, None), t);
                } else {
                    self.finish(Step::Again, t);
                }
            }
            Phase::Closed => {}
        }
    }

    /// The response head of request `id`: its status and `Retry-After`
    /// header. `now` is the wall clock, also used to read an HTTP-date
    /// `Retry-After`.
    pub fn handle_head(&mut self, now: f64, id: RequestId, status: u16, retry_after: Option<&str>) {
        let t = self.clock.tick(now);
        let Some(flight) = self.flight(id).filter(|f| !f.head) else {
            return;
        };
        if status == 200 {
            flight.head = true;
            if flight.kind == RequestKind::Stream {
                // A buffering proxy holds the first message back.
                flight.deadline = Some(t + SSE_FIRST_MESSAGE_MS);
            }
            return;
        }
        // The body of any other status is not needed.
        let kind = flight.kind;
        self.abort(id);
        self.phase = Phase::Closed;
        if status == 204 && kind == RequestKind::Stream {
            // PROTOCOL.md §Events stream: 204 is the server's "the task is
            // terminal at your cursor, there is nothing more to stream"
            // (what tells a standard EventSource to stop; a batch whose
            // tasks are all terminal likewise). A mirror that is terminal
            // is done; one that is not (the cursor was the terminal
            // version, but the mirror lost its copy) asks for a snapshot
            // rather than a stream that would answer 204 again.
            if self.target.is_done() {
                return self.finish(Step::Done, t);
            }
            self.need_snapshot = true;
            return self.finish(Step::Again, t);
        }
        let floor = retry_after.and_then(|v| retry_after_ms(v, now, self.config.read_date));
        let step = step::classify(status, floor, self.target.noun());
        self.finish(step, t);
    }

    /// The whole body of long-poll or snapshot request `id` (after a 200
    /// head).
    pub fn handle_body(&mut self, now: f64, id: RequestId, body: &[u8]) {
        let t = self.clock.tick(now);
        let Some(flight) = self
            .flight(id)
            .filter(|f| f.head && f.kind != RequestKind::Stream)
        else {
            return;
        };
        let snapshot = flight.kind == RequestKind::Snapshot;
        // A long-poll answered in under half its wait was not held.
        let unheld = flight.kind == RequestKind::Poll
            && t - flight.started < f64::from(self.config.wait_ms) / 2.0;
        self.phase = Phase::Closed;
        let step = match core::str::from_utf8(body) {
            Ok(text) => self.merge(text, snapshot, unheld),
            Err(_) => Step::retry(
                "bad answer from the server: answer: body is not valid UTF-8",
                None,
            ),
        };
        self.finish(step, t);
    }

    /// A chunk of stream `id`'s body, cut anywhere.
    pub fn handle_chunk(&mut self, now: f64, id: RequestId, chunk: &[u8]) {
        let t = self.clock.tick(now);
        let Some(flight) = self
            .flight(id)
            .filter(|f| f.head && f.kind == RequestKind::Stream)
        else {
            return;
        };
        if flight.messages > 0 {
            flight.deadline = Some(t + SSE_IDLE_MS);
        }
        let messages = flight.parser.push(chunk);
        for message in messages {
            if !self.target.answers_in(&message.event) {
                continue;
            }
            if let Some(flight) = self.flight(id) {
                flight.messages += 1;
                flight.deadline = Some(t + SSE_IDLE_MS);
            }
            let step = self.merge(&message.data, false, false);
            let outcome = match step {
                // A gap in the stream: fetch a snapshot, then reconnect.
                Step::Answered | Step::Again if self.need_snapshot => Step::Again,
                Step::Answered | Step::Again => continue,
                other => other,
            };
            if let Phase::Flight(flight) = core::mem::replace(&mut self.phase, Phase::Closed) {
                self.abort(flight.id);
                self.end_stream(flight, outcome, t);
            }
            return;
        }
    }

    /// Stream `id` ended normally.
    pub fn handle_end(&mut self, now: f64, id: RequestId) {
        let t = self.clock.tick(now);
        if self
            .flight(id)
            .is_some_and(|f| f.head && f.kind == RequestKind::Stream)
        {
            if let Phase::Flight(flight) = core::mem::replace(&mut self.phase, Phase::Closed) {
                self.end_stream(flight, Step::Answered, t);
            }
        }
    }

    /// Request `id` failed (no response, or its body could not be read).
    pub fn handle_failure(&mut self, now: f64, id: RequestId, failure: Failure<'_>) {
        let t = self.clock.tick(now);
        if self.flight(id).is_none() {
            return;
        }
        let Phase::Flight(flight) = core::mem::replace(&mut self.phase, Phase::Closed) else {
            return;
        };
        match failure {
            Failure::NoBody => {
                self.abort(flight.id);
                self.finish(Step::retry("the event stream has no body", None), t);
            }
            // A stream that broke while being read ends like any stream.
            Failure::Network(e) if flight.kind == RequestKind::Stream && flight.head => {
                self.end_stream(flight, Step::retry(e, None), t);
            }
            Failure::Network(e) => {
                let mut error = String::from("network error: ");
                error.push_str(e);
                self.finish(
                    Step::Retry {
                        error,
                        floor_ms: None,
                    },
                    t,
                );
            }
        }
    }

    /// Stops now: the request in flight is aborted, nothing more is asked,
    /// and, unless the page already heard how the follow ended, it hears
    /// `fail` with code `stopped`, then `closed`. Events queued but not yet
    /// polled are dropped: nothing reaches the page after a stop.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        // A slice and `clear`, not `drain(..)`: its range checks cost the
        // page 0.5 KB of wasm.
        let ending_undelivered = self
            .events
            .get(self.delivered..)
            .unwrap_or_default()
            .iter()
            .any(|e| matches!(e, FollowEvent::Done(_) | FollowEvent::Fail(_)));
        self.events.clear();
        self.delivered = 0;
        if let Phase::Flight(flight) = core::mem::replace(&mut self.phase, Phase::Closed) {
            self.abort(flight.id);
        }
        self.request = None;
        if !self.finished || ending_undelivered {
            self.finished = true;
            self.events.push(FollowEvent::Fail(Fail {
                code: FailCode::Stopped,
                message: step::words([
                    "the watch was stopped before the ",
                    self.target.noun(),
                    " ended",
                ]),
                status: 0,
            }));
            self.last_state = None;
            self.status(ConnState::Closed, None, None, None);
        }
    }
}

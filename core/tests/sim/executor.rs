//! The executor's half of the world: it drives the follow exactly as the
//! browser executor does (events, then aborts, then the request, then
//! the timer).

use taskwire_core::follow::{FollowEvent, Request, RequestKind};
use taskwire_core::json::write;
use taskwire_wire::to_json;

use super::{Ev, Served, World};

impl<S: Served> World<S> {
    /// The page's hand-written writers must agree with serde's, byte for
    /// byte, on everything the follow emits.
    fn check_writers(&mut self, event: &FollowEvent) {
        let (hand, serde) = match event {
            FollowEvent::Status(s) => (write(s), to_json(s)),
            FollowEvent::Update(u) => (write(u), to_json(u)),
            FollowEvent::Reject(r) => (write(r), to_json(r)),
            FollowEvent::Progress(p) => (write(p), to_json(p)),
            FollowEvent::Done(task) => (write(task), to_json(task)),
            FollowEvent::Fail(_) => return,
        };
        self.agree(hand, serde);
    }

    /// … and on the mirror the page persists (once per drain: the events
    /// of one input all come after the mirror took that input).
    fn check_mirror_writer(&mut self) {
        let (hand, serde) = match (self.follow.mirror(), self.follow.batch_mirror()) {
            (Some(m), _) => (write(m), to_json(m)),
            (None, Some(b)) => (write(b), to_json(b)),
            (None, None) => return,
        };
        self.agree(hand, serde);
    }

    fn agree(&mut self, hand: String, serde: String) {
        if hand != serde && self.seen.writer_mismatch.is_none() {
            self.seen.writer_mismatch = Some(format!("hand-written {hand} vs serde {serde}"));
        }
    }

    /// The executor's half: events to the page, aborts, the next request,
    /// the timer; exactly the order the browser executor uses.
    pub fn drain(&mut self) {
        let mut heard = false;
        while let Some(event) = self.follow.poll_event() {
            heard = true;
            self.check_writers(&event);
            let ended = self.seen.done.is_some() || self.seen.fail.is_some();
            if ended && !matches!(event, FollowEvent::Status(_)) {
                self.seen.after_end += 1;
            }
            match event {
                FollowEvent::Status(s) => {
                    if self.seen.statuses.last().is_some_and(|l| l == "closed") {
                        self.seen.after_end += 1;
                    }
                    self.seen
                        .statuses
                        .push(format!("{:?}", s.state).to_lowercase());
                }
                FollowEvent::Update(u) => {
                    if let Some(task) = u.task {
                        self.seen.updates.push(task);
                    }
                    // A listener that stops the watch from inside.
                    if self.faults.stop_in_listener && self.rng.chance(0.05) {
                        self.seen.stopped_at.get_or_insert(self.t);
                        self.follow.stop();
                    }
                }
                FollowEvent::Reject(_) => {}
                FollowEvent::Progress(p) => self.seen.progress.push(p),
                FollowEvent::Done(task) => self.seen.done = Some(task),
                FollowEvent::Fail(fail) => self.seen.fail = Some(fail),
            }
        }
        if heard {
            self.check_mirror_writer();
        }
        if let Some(cursor) = self.follow.batch_mirror().map(|b| b.cursor()) {
            if cursor < self.seen.cursor {
                self.seen.cursor_back += 1;
            }
            self.seen.cursor = cursor;
        }
        while let Some(id) = self.follow.poll_abort() {
            self.abort(id);
        }
        if let Some(request) = self.follow.poll_request() {
            self.seen.requests.push(self.t);
            self.check_request(&request);
            if request.kind == RequestKind::Snapshot {
                self.seen.snapshots += 1;
            }
            self.send(request);
        }
        self.arm();
    }

    /// One request at a time, however many tasks; a batch resumes from
    /// the cursor it holds, and only holding at least what the server had
    /// at that cursor (a task whose answer did not apply never lets the
    /// cursor pass it).
    fn check_request(&mut self, request: &Request) {
        if !self.flights.is_empty() {
            self.seen.overlapping += 1;
        }
        let Some(batch) = self.follow.batch_mirror().filter(|b| b.cursor() > 0) else {
            return;
        };
        let sent = match request.kind {
            RequestKind::Stream => request.last_event_id,
            RequestKind::Poll | RequestKind::Snapshot => request
                .query
                .strip_prefix("cursor=")
                .and_then(|q| q.split('&').next()?.parse().ok()),
        };
        if sent != Some(batch.cursor()) {
            self.seen.wrong_cursor += 1;
        }
        if request.kind != RequestKind::Snapshot
            && batch.is_complete()
            && !self.server.agrees(batch)
        {
            self.seen.inconsistent += 1;
        }
    }

    fn arm(&mut self) {
        self.generation += 1;
        self.timer = None;
        if let Some(deadline) = self.follow.poll_timeout() {
            let generation = self.generation;
            self.timer = Some(generation);
            let fire = self.t + (deadline - self.now()).max(0.0);
            self.at(fire, Ev::Timer { generation });
        }
    }
}

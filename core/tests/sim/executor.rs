//! The executor's half of the world: it drives the follow exactly as the
//! browser executor does (events, then aborts, then the request, then
//! the timer).

use taskwire_core::follow::FollowEvent;
use taskwire_core::json::write;
use taskwire_core::wire::to_json;

use super::{Ev, World};

impl World {
    /// The page's hand-written writers must agree with serde's, byte for
    /// byte, on everything the follow emits.
    fn check_writers(&mut self, event: &FollowEvent) {
        let (hand, serde) = match event {
            FollowEvent::Status(s) => (write(s), to_json(s)),
            FollowEvent::Update(u) => (write(u), to_json(u)),
            FollowEvent::Reject(r) => (write(r), to_json(r)),
            FollowEvent::Done(task) => (write(task), to_json(task)),
            FollowEvent::Fail(_) => return,
        };
        let mirror = self.follow.mirror();
        let (hand_mirror, serde_mirror) = (write(mirror), to_json(mirror));
        for (a, b) in [(hand, serde), (hand_mirror, serde_mirror)] {
            if a != b && self.seen.writer_mismatch.is_none() {
                self.seen.writer_mismatch = Some(format!("hand-written {a} vs serde {b}"));
            }
        }
    }

    /// The executor's half: events to the page, aborts, the next request,
    /// the timer; exactly the order the browser executor uses.
    pub fn drain(&mut self) {
        while let Some(event) = self.follow.poll_event() {
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
                FollowEvent::Done(task) => self.seen.done = Some(task),
                FollowEvent::Fail(fail) => self.seen.fail = Some(fail),
            }
        }
        while let Some(id) = self.follow.poll_abort() {
            self.abort(id);
        }
        if let Some(request) = self.follow.poll_request() {
            self.seen.requests.push(self.t);
            if request.kind == taskwire_core::follow::RequestKind::Snapshot {
                self.seen.snapshots += 1;
            }
            self.send(request);
        }
        self.arm();
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

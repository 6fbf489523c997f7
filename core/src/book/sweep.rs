//! The lifecycle sweeper: lapsed leases, grace periods that ran out, and
//! execution deadlines, for tasks nobody calls back for.
//!
//! Every task with something due sits in `Book::due` at the time of its
//! [`crate::TaskView::next_due`]. Renewing a lease only moves that time
//! later, so it queues nothing: the old time comes up early, the sweep
//! finds nothing due, and queues the real time then. A time is queued
//! again only when it moves earlier, so the queue holds O(1) times per
//! task however many heartbeats arrive.

use std::cmp::Reverse;

use serde::Serialize;

use super::{Book, Deadline, DueQueue, Entry, Notification};
use crate::transition::Reason;
use crate::value::Millis;
use crate::{Error, State};

/// One change the sweeper made.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Swept {
    /// The task.
    pub task_id: String,
    /// Its state after the change.
    pub state: State,
    /// Why it changed (`lease-lapsed`, `requeued`, `failed`, `cancelled`,
    /// `timed-out`, or `expired` when the TTL came first).
    pub reason: Reason,
}

/// Queues the task's next due time if it moved earlier.
pub(super) fn schedule(due: &mut DueQueue, entry: &mut Entry, id: &str) {
    let Some(next) = entry.task.next_due(entry.task.lease()) else {
        return;
    };
    if !entry.scheduled.is_some_and(|queued| next >= queued) {
        entry.scheduled = Some(next);
        due.push(Reverse((Deadline(next), id.to_string())));
    }
}

impl Book {
    /// Queues the task's next due time if it moved earlier.
    pub(super) fn reschedule(&mut self, id: &str) {
        if let Some(entry) = self.tasks.get_mut(id) {
            schedule(&mut self.due, entry, id);
        }
    }

    /// Applies every lifecycle step due by `nowMs`, task by task in the
    /// order they fell due: a lease that ran out makes its task `unknown`
    /// (or `cancelled`, after a cancel), an `unknown` task past its grace
    /// period is re-queued or failed, a passed deadline times the task
    /// out. Each step is recorded at the time it fell due, and each
    /// terminal one puts its notification in the outbox. The TTL is
    /// [`Book::expire_due`]'s.
    pub fn sweep_due(&mut self, now_ms: f64) -> Result<Vec<Swept>, Error> {
        let now = Millis::new(now_ms, "nowMs")?;
        let mut swept = Vec::new();
        while let Some(Reverse((due, _))) = self.due.peek() {
            if due.0 > now.get() {
                break;
            }
            let Some(Reverse((due, id))) = self.due.pop() else {
                break;
            };
            let Some(entry) = self.tasks.get_mut(&id) else {
                continue;
            };
            if entry.scheduled != Some(due.0) {
                continue; // superseded by an earlier time
            }
            entry.scheduled = None;
            let (view, lease, history) = entry.task.parts_mut();
            while let Some(step) = view.sweep_step(lease.as_ref(), now) {
                step.lease.apply_to(lease);
                if let Some(entry) = step.entry {
                    if step.outcome.notify {
                        self.outbox.push(Notification {
                            task_id: id.clone(),
                            state: view.state,
                            at_ms: entry.event.at_ms().get(),
                        });
                    }
                    history.push(entry);
                }
                swept.push(Swept {
                    task_id: id.clone(),
                    state: view.state,
                    reason: step.outcome.reason,
                });
            }
            self.reschedule(&id);
        }
        Ok(swept)
    }
}

#[cfg(test)]
mod tests {
    use crate::json::testing::from_json;
    use crate::{Book, CreateTask, Event, Reason, State};

    fn event(json: &str) -> Event {
        from_json(json, "event").unwrap()
    }

    #[test]
    fn a_silent_worker_goes_unknown_then_is_requeued_and_heartbeats_hold_it_off() {
        let mut book = Book::new();
        let mut input = CreateTask::new("t", 0.0, 100_000.0, 2);
        input.unknown_grace_ms = Some(1_000.0);
        book.create(&input).unwrap();
        book.apply(
            "t",
            event(r#"{"type":"start","atMs":0,"worker":"w","attempt":1,"leaseMs":100}"#),
            None,
        )
        .unwrap();
        // Heartbeats keep it running: nothing due, no versions.
        for at in [50, 120, 190] {
            let hb = format!(r#"{{"type":"heartbeat","atMs":{at},"attempt":1}}"#);
            book.apply("t", event(&hb), None).unwrap();
            assert_eq!(book.sweep_due(f64::from(at)).unwrap(), []);
        }
        assert_eq!(book.get("t").unwrap().version, 1);
        // Silence: the lease (until 290) lapses, then the grace period.
        let swept = book.sweep_due(5_000.0).unwrap();
        let reasons: Vec<_> = swept.iter().map(|s| (s.state, s.reason)).collect();
        assert_eq!(
            reasons,
            [
                (State::Unknown, Reason::LeaseLapsed),
                (State::Queued, Reason::Requeued)
            ]
        );
        let task = book.get("t").unwrap();
        let at: Vec<f64> = task
            .history()
            .iter()
            .map(|e| e.event.at_ms().get())
            .collect();
        assert_eq!(
            at,
            [0.0, 290.0, 1_290.0],
            "recorded when due, not at the sweep"
        );
        assert_eq!(task.lease(), None);
        assert!(
            book.drain_notifications().is_empty(),
            "re-queued: not terminal"
        );
        assert_eq!(book.sweep_due(1e9).unwrap(), [], "nothing left to do");
    }
}

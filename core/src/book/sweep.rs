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

use super::{Book, Deadline, Notification};
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

impl Book {
    /// Queues the task's next due time if it moved earlier.
    pub(super) fn reschedule(&mut self, id: &str) {
        let Some(entry) = self.tasks.get_mut(id) else {
            return;
        };
        let Some(due) = entry.task.next_due(entry.task.lease()) else {
            return;
        };
        if !entry.scheduled.is_some_and(|queued| due >= queued) {
            entry.scheduled = Some(due);
            self.due.push(Reverse((Deadline(due), id.to_string())));
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

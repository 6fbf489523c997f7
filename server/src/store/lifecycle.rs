//! The task lifecycle as both stores write it: one pure layer between
//! core's rules and the SQL, so that a rule is never written twice.
//!
//! A task row holds, besides its versioned view, the current attempt's
//! lease (`tasks.lease`, JSON; core's [`Lease`]) and the next time the
//! sweeper has something to do for it (`tasks.due_at_ms`: a lease, grace
//! period or execution deadline running out, core's
//! [`TaskView::next_due`]; the TTL keeps its own column). Every write of a
//! task goes through [`Judged`]: the store fetches the row, calls one of
//! the functions here, and writes what comes back: the history entries
//! (each with the view after it, for the hub), the lease and the due
//! time. A heartbeat that only renews a lease has no entry: the store
//! writes the row's `lease` and `due_at_ms` alone, no version, nothing
//! published.

use taskwire_core::{Event, Lease, LeaseChange, Millis, Outcome, Step, TaskView};
use taskwire_wire::{from_json, to_json};

use super::{StoreError, TaskRecord};

/// One versioned change: the entry to append and the view after it.
#[derive(Debug, Clone)]
pub(crate) struct Appended {
    /// The task right after this entry.
    pub view: TaskView,
    /// The history entry.
    pub entry: taskwire_core::HistoryEntry,
    /// The change made the task terminal: write its outbox row.
    pub notify: bool,
    /// The notification's time when it is not the writer's `at_ms`: a
    /// lifecycle sweep's step (a timeout, a lapse that ends a task
    /// `cancelled`, an abandon that fails it) is notified at the time it
    /// fell due, the time its entry records, as core's `Book::sweep_due`
    /// does (PROTOCOL.md §The sweeper). A TTL expiry is notified at the
    /// sweeper's now, as core's `Book::expire_due`.
    pub notify_at: Option<f64>,
}

/// What judging one event (or one sweep of a row) does to a task row.
#[derive(Debug, Clone)]
pub(crate) struct Judged {
    /// Core's outcome (of the last step, for a sweep).
    pub outcome: Outcome,
    /// The versioned changes, in order (none for a heartbeat or a no-op).
    pub appended: Vec<Appended>,
    /// The row must be written: a change, or a lease that moved.
    pub write: bool,
}

/// Applies `event` to the record in place (view and lease) with core's
/// [`TaskView::step_received`]: a lease runs from `received`, the
/// server's clock when an executor's report arrived (`None` for a
/// person's request, which moves no lease).
pub(crate) fn judge_event(
    record: &mut TaskRecord,
    event: &Event,
    received: Option<Millis>,
) -> Judged {
    let step = record
        .view
        .step_received(record.lease.as_ref(), event, received);
    judge_one(record, step)
}

/// Runs core's sweeper steps on a due row until none is due at `now`
/// (at most three: a deadline, or a lapse and then an abandon).
pub(crate) fn judge_sweep(record: &mut TaskRecord, now: Millis) -> Judged {
    let mut judged = Judged {
        outcome: Outcome {
            changed: false,
            duplicate: false,
            notify: false,
            reason: taskwire_core::Reason::NotDue,
        },
        appended: Vec::new(),
        write: false,
    };
    for _ in 0..4 {
        let Some(step) = record.view.sweep_step(record.lease.as_ref(), now) else {
            break;
        };
        judged.outcome = step.outcome;
        take(record, step, &mut judged);
    }
    for appended in &mut judged.appended {
        appended.notify_at = Some(appended.entry.event.at_ms().get());
    }
    judged
}

/// Expires the row at its TTL ([`TaskView::expire_step`]); the attempt,
/// and with it the lease, ends.
pub(crate) fn judge_expiry(record: &mut TaskRecord) -> Judged {
    let step = record.view.expire_step();
    judge_one(record, step)
}

/// What one step of core's did to the record.
fn judge_one(record: &mut TaskRecord, step: Step) -> Judged {
    let mut judged = Judged {
        outcome: step.outcome,
        appended: Vec::new(),
        write: false,
    };
    take(record, step, &mut judged);
    judged
}

fn take(record: &mut TaskRecord, step: Step, judged: &mut Judged) {
    let lease_moved = match step.lease {
        LeaseChange::Keep => false,
        LeaseChange::Set(lease) => {
            let moved = record.lease != Some(lease);
            record.lease = Some(lease);
            moved
        }
        LeaseChange::Clear => record.lease.take().is_some(),
    };
    if let Some(entry) = step.entry {
        judged.appended.push(Appended {
            view: record.view.clone(),
            entry,
            notify: step.outcome.notify,
            notify_at: None,
        });
    }
    judged.write |= lease_moved || !judged.appended.is_empty();
}

/// `tasks.lease` for a record.
pub(crate) fn lease_column(record: &TaskRecord) -> Option<String> {
    record.lease.as_ref().map(to_json)
}

/// `tasks.due_at_ms` for a record: when the sweeper must look at it next.
pub(crate) fn due_column(record: &TaskRecord) -> Option<f64> {
    record.view.next_due(record.lease.as_ref())
}

/// Parses `tasks.lease` as read.
pub(crate) fn parse_lease(text: Option<&str>) -> Result<Option<Lease>, StoreError> {
    text.map(|t| from_json::<Lease>(t, "tasks.lease"))
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("stored row does not parse: {}", e.message)))
}

#[cfg(test)]
mod tests;

//! The pure state machine: one event in, one outcome out.
//!
//! ```text
//! from               event                         to (reason)
//! ─────────────────  ────────────────────────────  ─────────────────────────────────────
//! queued             start                         running (started)
//!                    cancel                        cancelled (cancelled)
//! running            progress | heartbeat          running (progress | heartbeat: no version)
//!                    succeed                       succeeded
//!                    fail                          queued (requeued) | failed
//!                    hold                          waiting_approval (held)
//!                    lapse                         unknown (lease-lapsed)
//!                    cancel                        cancelling (cancel-requested)
//! unknown            progress | heartbeat          running (recovered)
//!                    succeed | fail | hold         as from running
//!                    abandon (grace period over)   queued (requeued) | failed
//!                    cancel                        cancelled (cancelled)
//! waiting_approval   decide approve                queued (approved), one more start,
//!                                                  progress kept, error cleared
//!                    decide request_changes        queued (changes-requested), as approve
//!                    decide reject                 failed (rejected)
//!                    cancel                        cancelled (cancelled)
//! cancelling         cannot_cancel                 cancel_ineffective (cancel-ineffective)
//!                    ack_cancel                    cancelled (cancel-acknowledged)
//!                    fail | hold | lapse           cancelled (cancelled)
//!                    succeed                       cancelled (succeeded-after-cancel;
//!                                                  result kept, never delivered)
//!                    progress | heartbeat          cancelling
//! cancel_ineffective as cancelling (cannot_cancel again is a duplicate)
//! any live state     expire | any event ≥ expiresAtMs    expired
//!                    timeout | any event ≥ deadlineAtMs  timed_out
//! succeeded, failed, expired, cancelled, timed_out: terminal, absorb everything
//! ```
//!
//! Rules, in the order they are judged:
//! 1. **Fencing** (`liveness`). An event that carries `attempt` and does
//!    not belong to the task's current attempt is `stale-attempt` (on a
//!    queued task the only current event is the `start` of attempt
//!    `attempts + 1`).
//! 2. **Terminal** tasks absorb everything (`terminal`).
//! 3. **Time** (`time`): an `expire` event, or any event with `atMs >=
//!    expiresAtMs`, expires the task, recorded at `expiresAtMs`; any event
//!    with `atMs >= deadlineAtMs` times it out, recorded as `timeout` at
//!    `deadlineAtMs`. When both have passed, the earlier wins (a tie goes
//!    to the TTL, the seed's rule).
//! 4. Then the event's own rule (`work`, `liveness`, `cancel`,
//!    `approval`).
//!
//! Each change adds exactly one to `version` and one entry to the history;
//! an unchanged outcome changes nothing versioned. The lease
//! ([`crate::Lease`]) is judged after the versioned outcome and reported
//! as a [`LeaseChange`], so a heartbeat renews it without a version.

mod approval;
mod cancel;
#[cfg(feature = "steps")]
mod ledger;
mod liveness;
mod reason;
#[cfg(feature = "steps")]
mod steps;
mod terminal;
mod time;
mod work;

#[cfg(feature = "steps")]
pub use ledger::BUDGET_EXHAUSTED;
pub use reason::Reason;

use serde::Serialize;

use crate::event::Event;
use crate::lease::{Lease, LeaseChange};
use crate::task::{HistoryEntry, Task, TaskView};
use crate::value::Millis;

/// What an event did, without the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The task changed (version + 1, one history entry).
    pub changed: bool,
    /// The event repeated something already known.
    pub duplicate: bool,
    /// The task just became terminal: one notification is due.
    pub notify: bool,
    /// Why.
    pub reason: Reason,
}

impl Outcome {
    pub(crate) const fn unchanged(reason: Reason, duplicate: bool) -> Self {
        Outcome {
            changed: false,
            duplicate,
            notify: false,
            reason,
        }
    }

    pub(crate) const fn changed(reason: Reason, notify: bool) -> Self {
        Outcome {
            changed: true,
            duplicate: false,
            notify,
            reason,
        }
    }
}

/// The seed's transition shape: the task after the event, and what
/// happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    /// The task after the event (the same task when unchanged).
    pub task: Task,
    /// The task changed.
    pub changed: bool,
    /// The event repeated something already known.
    pub duplicate: bool,
    /// The task just became terminal.
    pub notify: bool,
    /// Why.
    pub reason: Reason,
}

/// Which event the history records for a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The event as it came in.
    Incoming,
    /// `expire` at `expiresAtMs`, whatever triggered the expiry.
    Expiry,
    /// `timeout` at `deadlineAtMs`, whatever triggered it.
    Timeout,
}

/// What [`TaskView::decide`] concluded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judgement {
    pub(crate) outcome: Outcome,
    pub(crate) recorded: Recorded,
    pub(crate) lease: LeaseChange,
}

/// Applies `event` to `task`. Takes the task by value and hands it back in
/// the transition, so nothing is copied: O(1) amortized, however long the
/// history (the seed copies the whole history on every event).
///
/// `event` is valid by construction (see [`Event`]), so this cannot fail.
pub fn apply_event(mut task: Task, event: Event) -> Transition {
    let outcome = task.apply(event);
    Transition::new(task, outcome)
}

/// Expires `task` now (a system action, recorded at `expiresAtMs` so that
/// a replay gives the same history): `expired`, or `duplicate-expire` /
/// `terminal-conflict` on a terminal task. A task whose execution
/// deadline came first times out instead.
pub fn expire_task(mut task: Task) -> Transition {
    let outcome = task.expire();
    Transition::new(task, outcome)
}

impl Transition {
    fn new(task: Task, o: Outcome) -> Self {
        Transition {
            task,
            changed: o.changed,
            duplicate: o.duplicate,
            notify: o.notify,
            reason: o.reason,
        }
    }
}

/// What one event did to a [`TaskView`]: the history entry a store must
/// append when the task changed, and what to write for the lease. A store
/// that keeps the view in one row and the history in another table uses
/// this instead of [`Task`].
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What happened.
    pub outcome: Outcome,
    /// The entry to append (exactly when `outcome.changed`).
    pub entry: Option<HistoryEntry>,
    /// The lease to write: `Set` on a start with `leaseMs` or a renewal
    /// (even when nothing is versioned), `Clear` when the attempt ended.
    pub lease: LeaseChange,
}

impl Step {
    pub(crate) const fn unchanged(reason: Reason) -> Self {
        Step {
            outcome: Outcome::unchanged(reason, false),
            entry: None,
            lease: LeaseChange::Keep,
        }
    }
}

impl Task {
    /// Applies `event` in place, with the task's lease; see
    /// [`apply_event`]. A lease it opens or extends is counted from the
    /// event's `atMs`; a server counts it from its own clock with
    /// [`Task::apply_received`].
    pub fn apply(&mut self, event: Event) -> Outcome {
        self.apply_received(event, None)
    }

    /// [`Task::apply`], with the lease counted from `received` (the
    /// server's clock when the report arrived) when given: a worker whose
    /// clock is wrong can neither lapse its lease nor stretch it.
    pub fn apply_received(&mut self, event: Event, received: Option<Millis>) -> Outcome {
        let (view, lease, history) = self.parts_mut();
        let judged = view.decide(&event, lease.as_ref(), received);
        if judged.outcome.changed {
            history.push(HistoryEntry {
                version: view.version,
                event: view.recorded_event(judged.recorded, event),
            });
        }
        judged.lease.apply_to(lease);
        judged.outcome
    }

    /// Expires the task in place; see [`expire_task`].
    pub fn expire(&mut self) -> Outcome {
        let event = self.view().expiry_event();
        self.apply(event)
    }
}

impl TaskView {
    /// Applies `event` to the fields alone, with no history and no lease:
    /// what a client mirror does with entries the server recorded (every
    /// recorded `lapse` was due, so none is refused for want of a lease).
    pub fn apply(&mut self, event: &Event) -> Outcome {
        self.judge_versioned(event, true).0
    }

    /// Applies `event` to a task that has no lease, and returns the
    /// history entry to append, if any; see [`TaskView::step_with`].
    pub fn step(&mut self, event: &Event) -> Step {
        self.step_with(None, event)
    }

    /// Applies `event`, given the stored `lease`, and returns what to
    /// write: the history entry, if the task changed, and the lease
    /// change. A heartbeat answers `changed: false`, no entry, and
    /// `lease: Set(..)`: the store writes the lease alone.
    pub fn step_with(&mut self, lease: Option<&Lease>, event: &Event) -> Step {
        self.step_received(lease, event, None)
    }

    /// [`TaskView::step_with`], with the lease counted from `received`
    /// (the server's clock when the report arrived) instead of the
    /// event's `atMs` when given (PROTOCOL.md §Workers, "Leases run on
    /// the server's clock"). The history records the event as sent; the
    /// lapse, if it comes, is recorded at the lease's end, so a replay
    /// needs no clock.
    pub fn step_received(
        &mut self,
        lease: Option<&Lease>,
        event: &Event,
        received: Option<Millis>,
    ) -> Step {
        let judged = self.decide(event, lease, received);
        let entry = judged.outcome.changed.then(|| HistoryEntry {
            version: self.version,
            event: self.recorded_event(judged.recorded, event.clone()),
        });
        Step {
            outcome: judged.outcome,
            entry,
            lease: judged.lease,
        }
    }

    /// Expires the view now and returns the history entry to append, if
    /// any; see [`expire_task`].
    pub fn expire_step(&mut self) -> Step {
        let event = self.expiry_event();
        self.step(&event)
    }

    /// The event the history records for a change judged `recorded`.
    pub(crate) fn recorded_event(&self, recorded: Recorded, incoming: Event) -> Event {
        match recorded {
            Recorded::Incoming => incoming,
            Recorded::Expiry => self.expiry_event(),
            Recorded::Timeout => self.timeout_event(),
        }
    }

    /// Which event the history would record for `event`, without applying
    /// it (what a mirror checks before replaying an entry).
    pub(crate) fn would_record(&self, event: &Event) -> Recorded {
        if self.fence(event).is_some() || self.state.is_terminal() {
            Recorded::Incoming
        } else {
            self.time_rule(event).unwrap_or(Recorded::Incoming)
        }
    }

    /// The one judge, given the stored lease: the versioned outcome
    /// (rules 1 to 4), then what it does to the lease.
    pub(crate) fn decide(
        &mut self,
        event: &Event,
        lease: Option<&Lease>,
        received: Option<Millis>,
    ) -> Judgement {
        // Whether a system event judged on the lease has come due.
        let at = event.at_ms();
        let due = match event {
            Event::Lapse { .. } => {
                lease.is_some_and(|l| l.attempt == self.attempts && at >= l.expires_at_ms)
            }
            Event::Abandon { .. } => self.grace_end(lease).is_some_and(|end| at.get() >= end),
            _ => false,
        };
        let (outcome, recorded) = self.judge_versioned(event, due);
        Judgement {
            outcome,
            recorded,
            lease: self.lease_change(event, outcome, lease, received),
        }
    }

    /// Rules 1 to 4, on the versioned fields alone. `due`: a `lapse` or
    /// `abandon` has come due by the lease (always true in a replay: the
    /// authority judged it). Never changes anything unless
    /// `outcome.changed`, and then adds one to the version.
    pub(crate) fn judge_versioned(&mut self, event: &Event, due: bool) -> (Outcome, Recorded) {
        let (outcome, recorded) = self.judge(event, due);
        if outcome.changed {
            self.version = self.version.saturating_add(1);
        }
        (outcome, recorded)
    }

    fn judge(&mut self, event: &Event, due: bool) -> (Outcome, Recorded) {
        use Recorded::Incoming;
        if let Some(reason) = self.fence(event) {
            return (Outcome::unchanged(reason, false), Incoming);
        }
        if self.state.is_terminal() {
            return (self.absorb(event), Incoming);
        }
        if let Some(recorded) = self.time_rule(event) {
            return (self.end_in_time(recorded), recorded);
        }
        let outcome = match event {
            #[cfg(feature = "steps")]
            Event::Start { plan, .. } => self.start_planned(plan.as_ref()),
            #[cfg(not(feature = "steps"))]
            Event::Start { .. } => self.start(),
            #[cfg(feature = "steps")]
            Event::Step {
                report, attempt, ..
            } => self.step_report(report, attempt.is_some()),
            #[cfg(feature = "steps")]
            Event::Reserve { .. }
            | Event::Settle { .. }
            | Event::Effect { .. }
            | Event::Exhaust { .. } => self.judge_ledger(event),
            Event::Progress {
                progress, attempt, ..
            } => self.report(Some(progress.get()), attempt.is_some()),
            Event::Heartbeat { attempt, .. } => self.report(None, attempt.is_some()),
            Event::Succeed {
                result_ref,
                result_hash,
                ..
            } => self.succeed(result_ref, result_hash),
            Event::Fail {
                error, retryable, ..
            } => self.fail(error, *retryable),
            Event::Hold {
                artifact_ref,
                artifact_hash,
                question,
                ..
            } => self.hold(artifact_ref, artifact_hash, question.as_deref()),
            Event::Decide {
                decision,
                artifact_hash,
                version,
                reason,
                ..
            } => self.decide_on(*decision, artifact_hash, *version, reason.as_deref()),
            Event::Cancel { .. } => self.cancel(),
            Event::AckCancel { .. } => self.ack_cancel(),
            Event::CannotCancel { .. } => self.cannot_cancel(),
            Event::Lapse { .. } => self.lapse(due),
            Event::Abandon { .. } => self.abandon(due),
            // Rule 3 takes every `expire`, and every `timeout` that is due.
            Event::Expire { .. } | Event::Timeout { .. } => {
                Outcome::unchanged(Reason::NotDue, false)
            }
        };
        (outcome, Incoming)
    }
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

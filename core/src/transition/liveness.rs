//! Rule 1 (fencing) and the lease's life: `lapse`, `abandon`, and the
//! sweeper steps that produce them.
//!
//! - **Fencing.** `start` opens attempt `attempts + 1`; from then on an
//!   event that carries another `attempt` is `stale-attempt` (003: 「带
//!   Task ID+序号+Worker 标识+租约 token…丢弃迟到事件」; 004: 「防止旧
//!   Worker 覆盖新结果」). Events without `attempt` are not fenced, as in
//!   the seed.
//! - **Lapse.** When the lease runs out, `running` becomes `unknown`: the
//!   work may still be running, so the task is neither failed nor retried
//!   (002 §九). After a cancel, a lapse ends the task as `cancelled`.
//! - **Grace.** An `unknown` task with no word from its attempt for
//!   `unknownGraceMs` after its lease ran out is given up (`abandon`;
//!   like `lapse`, judged on the stored lease, which an unknown task
//!   keeps, and trusted in a replay): re-queued, which fences the old
//!   attempt off at once, or failed when no attempt is left. A task that
//!   opted out (`autoRequeue: false` at creation: it keeps no grace
//!   period) or was given none waits in `unknown` for its executor, a
//!   person or the TTL (004: 「不会盲目自动重提」).
//!
//! The sweeper steps never read a clock: `now` is an argument, and each
//! records its event at the time it became due (the lease's end, the
//! grace period's end, the deadline), so a replay reproduces it.

use super::{Outcome, Reason, Step};
use crate::event::Event;
use crate::lease::{Lease, LeaseChange};
use crate::task::{State, TaskView};
use crate::value::Millis;
use alloc::string::String;

impl TaskView {
    /// Why `event` is fenced off, if it is: it carries an attempt that
    /// is not the current one (`stale-attempt`), or, on a queued task,
    /// it reports for the next attempt before that attempt's `start`
    /// (`not-started`). On a queued task nothing is open: only the
    /// `start` of attempt `attempts + 1` is current.
    pub(crate) fn fence(&self, event: &Event) -> Option<Reason> {
        let attempt = event.attempt()?;
        let next = self.attempts.checked_add(1);
        match (self.state, event) {
            (State::Queued, Event::Start { .. }) if Some(attempt) == next => None,
            (State::Queued, Event::Start { .. }) => Some(Reason::StaleAttempt),
            (State::Queued, _) if Some(attempt) == next => Some(Reason::NotStarted),
            (State::Queued, _) => Some(Reason::StaleAttempt),
            _ => (attempt != self.attempts).then_some(Reason::StaleAttempt),
        }
    }

    /// `due`: the current attempt's lease has run out by the event's time.
    pub(super) fn lapse(&mut self, due: bool) -> Outcome {
        if !self.state.is_leased() {
            return Outcome::unchanged(Reason::NotRunning, false);
        }
        if !due {
            return Outcome::unchanged(Reason::NotDue, false);
        }
        if self.state == State::Running {
            self.state = State::Unknown;
            Outcome::changed(Reason::LeaseLapsed, false)
        } else {
            // A cancel was asked, and the worker is gone: as a cancel of
            // an unknown task, it ends at once.
            self.state = State::Cancelled;
            Outcome::changed(Reason::Cancelled, true)
        }
    }

    /// When an `unknown` task's grace period runs out, counted from the
    /// end of its lapsed `lease` (kept while it is unknown), if it is
    /// re-queued automatically at all.
    pub fn grace_end(&self, lease: Option<&Lease>) -> Option<f64> {
        let lapsed = lease.filter(|l| l.attempt == self.attempts)?;
        if self.state != State::Unknown {
            return None;
        }
        Some(lapsed.expires_at_ms.get() + self.unknown_grace_ms?)
    }

    /// `due`: the grace period has run out by the event's time.
    pub(super) fn abandon(&mut self, due: bool) -> Outcome {
        if self.state != State::Unknown || self.unknown_grace_ms.is_none() || !due {
            return Outcome::unchanged(Reason::NotDue, false);
        }
        self.error = Some(String::from("lease lapsed, no sign in the grace period"));
        if self.attempts < self.allowed_attempts() {
            self.state = State::Queued;
            self.progress = 0;
            #[cfg(feature = "steps")]
            self.keep_steps_progress();
            Outcome::changed(Reason::Requeued, false)
        } else {
            self.state = State::Failed;
            Outcome::changed(Reason::Failed, true)
        }
    }

    /// What an outcome does to the lease, judged after it: an attempt
    /// that ended takes its lease along (`Clear`, even one the caller did
    /// not pass, so a store can always write it); a start with `leaseMs`
    /// opens one; a heartbeat or progress of the current attempt extends
    /// it, from `received` when the server gave its clock, else from the
    /// event's `atMs`. Kept out of the versioned judge, which the page's
    /// mirror runs without any lease.
    pub(super) fn lease_change(
        &self,
        event: &Event,
        outcome: Outcome,
        before: Option<&Lease>,
        received: Option<Millis>,
    ) -> LeaseChange {
        use Reason::*;
        if outcome.changed && !self.state.holds_attempt() {
            return LeaseChange::Clear;
        }
        let at = received.unwrap_or_else(|| event.at_ms());
        let after = match (event, outcome.reason) {
            (Event::Start { lease_ms, .. }, Started) => {
                // Without leaseMs, no lease: the seed's executors never lapse.
                Lease::extended(None, self.attempts, at, *lease_ms)
            }
            (Event::Heartbeat { lease_ms, .. }, Heartbeat | Recovered) => {
                Lease::extended(before, self.attempts, at, *lease_ms).or(before.copied())
            }
            (Event::Progress { .. }, Progress | StaleProgress | DuplicateProgress | Recovered) => {
                Lease::extended(before, self.attempts, at, None).or(before.copied())
            }
            // A step report is a sign of life, as a progress report is.
            #[cfg(feature = "steps")]
            (Event::Step { .. }, StepRecorded | DuplicateStep) => {
                Lease::extended(before, self.attempts, at, None).or(before.copied())
            }
            // So is a taken reservation, settlement or side effect.
            #[cfg(feature = "steps")]
            (
                Event::Reserve { .. } | Event::Settle { .. } | Event::Effect { .. },
                BudgetReserved | DuplicateReservation | BudgetSettled | BudgetOverrun
                | DuplicateSettlement | EffectRecorded | DuplicateEffect,
            ) => Lease::extended(before, self.attempts, at, None).or(before.copied()),
            _ => return LeaseChange::Keep,
        };
        LeaseChange::between(before, after)
    }

    /// When the current attempt's lease runs out, if one runs.
    fn lease_end(&self, lease: Option<&Lease>) -> Option<Millis> {
        lease
            .filter(|l| self.state.is_leased() && l.attempt == self.attempts)
            .map(|l| l.expires_at_ms)
    }

    /// The next time a sweeper has something to do for this task (a
    /// lease, a grace period or a deadline running out), not counting the
    /// TTL: a store indexes this to find due tasks.
    pub fn next_due(&self, lease: Option<&Lease>) -> Option<f64> {
        let deadline = self.deadline_at_ms.filter(|_| !self.state.is_terminal());
        [
            deadline,
            self.lease_end(lease).map(Millis::get),
            self.grace_end(lease),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::min)
    }

    /// Lapses the lease if it ran out by `now`: `running → unknown`,
    /// recorded as `lapse` at the lease's `expiresAtMs`. Otherwise
    /// unchanged (`not-due`).
    pub fn lapse_step(&mut self, lease: Option<&Lease>, now: Millis) -> Step {
        match (self.lease_end(lease), lease) {
            (Some(end), Some(l)) if end <= now => {
                let lapse = Event::Lapse {
                    at_ms: end,
                    attempt: Some(l.attempt),
                };
                self.step_with(lease, &lapse)
            }
            _ => Step::unchanged(Reason::NotDue),
        }
    }

    /// Gives up an `unknown` task whose grace period ran out by `now`,
    /// recorded as `abandon` at its end. Otherwise unchanged (`not-due`).
    pub fn grace_step(&mut self, lease: Option<&Lease>, now: Millis) -> Step {
        match self
            .grace_end(lease)
            .and_then(|end| Millis::new(end, "").ok())
        {
            Some(end) if end <= now => self.step_with(lease, &Event::Abandon { at_ms: end }),
            _ => Step::unchanged(Reason::NotDue),
        }
    }

    /// Times a live task out if its deadline passed by `now`, recorded as
    /// `timeout` at `deadlineAtMs`. Otherwise unchanged (`not-due`).
    pub fn deadline_step(&mut self, lease: Option<&Lease>, now: Millis) -> Step {
        match self.timeout_event() {
            event if self.deadline_at_ms.is_some_and(|d| d <= now.get()) => {
                self.step_with(lease, &event)
            }
            _ => Step::unchanged(Reason::NotDue),
        }
    }

    /// The earliest of the three sweeper steps that is due by `now`, or
    /// `None`. A sweeper calls it until it answers `None` (at most three
    /// times: a lapse, then an abandon, ends in a state with none due),
    /// applying each step's lease change before the next call.
    pub fn sweep_step(&mut self, lease: Option<&Lease>, now: Millis) -> Option<Step> {
        let due = self.next_due(lease).filter(|due| *due <= now.get())?;
        // Ties: the deadline first; the time rule would give the same.
        let step = if self.deadline_at_ms == Some(due) {
            self.deadline_step(lease, now)
        } else if self.lease_end(lease).map(Millis::get) == Some(due) {
            self.lapse_step(lease, now)
        } else {
            self.grace_step(lease, now)
        };
        // Always a change (each step is due by construction); the filter
        // only guarantees that a sweeper's loop ends.
        Some(step).filter(|s| s.outcome.changed)
    }
}

#[cfg(test)]
mod tests;

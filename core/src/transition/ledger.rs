//! `reserve`, `settle`, `effect` and `exhaust` (PROTOCOL.md §Budgets and
//! side effects; [`crate::ledger`] states the rules).
//!
//! Like a step report, each is judged only while an attempt holds the
//! task and after fencing, and one taken is a sign of life: it renews
//! the lease (`liveness.rs`), brings an `unknown` task back to `running`
//! and, from the current attempt, clears an error an earlier attempt
//! left. A `reserve` is refused once a cancel was asked: a worker checks
//! before each call (001 §10), and the server makes sure.

use super::{Outcome, Reason};
use crate::event::Event;
use crate::ledger::{
    Effect, EffectInput, Ledger, Reservation, ReserveInput, MAX_EFFECTS, MAX_RESERVATIONS,
};
use crate::steps::Usage;
use crate::task::{State, TaskView};

impl TaskView {
    /// `reserve`, `settle`, `effect` or `exhaust`, by its own rule (after
    /// fencing, terminal states and time, which `judge` applies to every
    /// event).
    pub(super) fn judge_ledger(&mut self, event: &Event) -> Outcome {
        let current = event.attempt().is_some();
        match event {
            Event::Reserve { reservation, .. } => self.reserve(reservation, current),
            Event::Settle {
                reservation, usage, ..
            } => self.settle(reservation, *usage, current),
            Event::Effect { effect, .. } => self.record_effect(effect, current),
            Event::Exhaust { partial, .. } => self.exhaust(
                partial
                    .as_ref()
                    .map(|p| (p.output_ref.as_str(), p.output_hash.as_str())),
            ),
            // `judge` sends only the four above here.
            _ => Outcome::unchanged(Reason::NotDue, false),
        }
    }

    fn ledger_mut(&mut self) -> &mut Ledger {
        self.ledger.get_or_insert_with(Default::default)
    }

    /// A `reserve` event.
    pub(super) fn reserve(&mut self, input: &ReserveInput, current: bool) -> Outcome {
        if !matches!(self.state, State::Running | State::Unknown) {
            return Outcome::unchanged(Reason::NotRunning, false);
        }
        let attempt = self.attempts;
        let step = input.step.as_ref().map(|s| s.as_str());
        if let Some(known) = self.ledger.as_ref().and_then(|l| l.reservation(&input.id)) {
            let same = known.attempt == attempt
                && known.amount == input.amount
                && known.step.as_deref() == step;
            return if same {
                Outcome::unchanged(Reason::DuplicateReservation, true)
            } else {
                Outcome::unchanged(Reason::ReservationConflict, false)
            };
        }
        if let Some(reason) = self.unknown_step(step) {
            return Outcome::unchanged(reason, false);
        }
        let ledger = self.ledger.as_deref();
        if ledger.is_some_and(|l| l.reservations.len() >= MAX_RESERVATIONS) {
            return Outcome::unchanged(Reason::LedgerFull, false);
        }
        if ledger.is_some_and(|l| !l.fits(input.amount)) {
            return Outcome::unchanged(Reason::OverBudget, false);
        }
        self.ledger_mut().reservations.push(Reservation {
            id: input.id.as_str().into(),
            attempt,
            step: step.map(Into::into),
            amount: input.amount,
            settled: None,
        });
        self.report_taken(current);
        Outcome::changed(Reason::BudgetReserved, false)
    }

    /// A `settle` event: `id`'s call used `usage`.
    pub(super) fn settle(&mut self, id: &str, usage: Usage, current: bool) -> Outcome {
        if !self.state.holds_attempt() {
            return Outcome::unchanged(Reason::NotRunning, false);
        }
        let Some(known) = self.ledger.as_ref().and_then(|l| l.reservation(id)) else {
            return Outcome::unchanged(Reason::UnknownReservation, false);
        };
        match known.settled {
            Some(settled) if settled == usage => {
                return Outcome::unchanged(Reason::DuplicateSettlement, true)
            }
            Some(_) => return Outcome::unchanged(Reason::ReservationConflict, false),
            None => {}
        }
        let ledger = self.ledger_mut();
        ledger.settle(id, usage);
        let reason = if ledger.overrun() {
            Reason::BudgetOverrun
        } else {
            Reason::BudgetSettled
        };
        self.report_taken(current);
        Outcome::changed(reason, false)
    }

    /// An `effect` event.
    pub(super) fn record_effect(&mut self, input: &EffectInput, current: bool) -> Outcome {
        if !self.state.holds_attempt() {
            return Outcome::unchanged(Reason::NotRunning, false);
        }
        let ledger = self.ledger.as_deref();
        if ledger.is_some_and(|l| l.effect(&input.step, &input.action).is_some()) {
            return Outcome::unchanged(Reason::DuplicateEffect, true);
        }
        if let Some(reason) = self.unknown_step(Some(&input.step)) {
            return Outcome::unchanged(reason, false);
        }
        if ledger.is_some_and(|l| l.effects.len() >= MAX_EFFECTS) {
            return Outcome::unchanged(Reason::LedgerFull, false);
        }
        let attempt = self.attempts;
        self.ledger_mut().effects.push(Effect {
            step: input.step.as_str().into(),
            action: input.action.as_str().into(),
            resource_id: input.resource_id.as_str().into(),
            attempt,
        });
        self.report_taken(current);
        Outcome::changed(Reason::EffectRecorded, false)
    }

    /// An `exhaust` event: the budget ran out, and the executor ends the
    /// task with what it has.
    pub(super) fn exhaust(&mut self, partial: Option<(&str, &str)>) -> Outcome {
        let reason = match self.state {
            State::Running | State::Unknown => {
                self.state = State::Failed;
                Reason::BudgetExhausted
            }
            // As any end after a cancel: cancelled.
            State::Cancelling | State::CancelIneffective => {
                self.state = State::Cancelled;
                Reason::Cancelled
            }
            _ => return Outcome::unchanged(Reason::NotRunning, false),
        };
        self.error = Some(BUDGET_EXHAUSTED.into());
        if let Some((result_ref, result_hash)) = partial {
            self.result_ref = Some(result_ref.into());
            self.result_hash = Some(result_hash.into());
        }
        Outcome::changed(reason, true)
    }

    /// When the task has a plan, a step it does not name is
    /// `unknown-step`.
    fn unknown_step(&self, step: Option<&str>) -> Option<Reason> {
        let (plan, step) = (self.plan.as_deref()?, step?);
        (!plan.steps.iter().any(|s| s.name == step)).then_some(Reason::UnknownStep)
    }

    /// A new attempt started: the open reservations of the attempts
    /// before it are charged in full.
    pub(super) fn charge_dead_attempts(&mut self) {
        let attempt = self.attempts;
        if let Some(ledger) = self.ledger.as_deref_mut() {
            ledger.charge_dead_attempts(attempt);
        }
    }
}

/// The error an exhausted task keeps: a code a page can test for.
pub const BUDGET_EXHAUSTED: &str = "budget-exhausted";

//! A task's budget and side effects (issue 26; seed 001 §5, §8, §10):
//! what a task may spend, what it reserved and spent, and the external
//! writes it made, each under one key.
//!
//! - **A budget** (`maxTokens`, `maxCostCents`, either or both) is given
//!   at creation and fixed for the task's life.
//! - **A reservation before a call** (`reserve`) is granted only if what
//!   was spent, plus what is reserved, plus the new amount, stays within
//!   every limit; else it is refused (`over-budget`) and nothing changes.
//!   The judgement is one step of the task's state machine, which a
//!   server runs under the task's row lock: two workers of one task can
//!   never both be granted the last of a budget (001 §8's single
//!   conditional update).
//! - **A settlement after the call** (`settle`) records what the call
//!   used and releases the rest of its reservation; a failed call settles
//!   what it used (often nothing), which releases the whole reservation.
//!   A reservation is the ceiling the executor gives its call (the model's
//!   `max_tokens`): a settlement above it is still recorded, because it
//!   happened, and answered `budget-overrun` when the total then passes a
//!   limit.
//! - **A dead attempt's reservations are charged in full** when the next
//!   attempt starts: nobody can say what a vanished call spent, and the
//!   budget must hold.
//! - **An exhausted budget ends the task** when the executor says so
//!   (`exhaust`): `failed`, with the error `budget-exhausted` and the
//!   partial result it names (001 §7: 「结束并交付部分结果」). The executor
//!   decides, because a workflow may instead degrade (a smaller context,
//!   an optional step skipped).
//! - **A side effect** (`effect`) is recorded under `(step, action)` on
//!   its task, which with the task id is 001 §5's idempotency key. The
//!   first record wins: recording the same key again is
//!   `duplicate-effect`, and the answer names the first resource id.
//!
//! Reservation ids and effect keys are remembered for the task's life, so
//! a resent `reserve` or `settle` is a duplicate and never spends twice.
//! Not in the page's build (feature `steps`), like the plan.

mod json;
mod report;
#[cfg(test)]
mod tests;

pub(crate) use json::{
    read_effect, read_partial, read_reserve, read_settle, read_task_ledger, write_event,
    write_task_ledger,
};
pub use report::CancelReport;

use crate::steps::Usage;
use crate::value::NonBlank;
use alloc::{string::String, vec::Vec};

/// The most reservations a task keeps (each is remembered for the task's
/// life, and carried in its snapshots).
pub const MAX_RESERVATIONS: usize = 256;

/// The most side effects a task records.
pub const MAX_EFFECTS: usize = 200;

/// What a task may spend, fixed at creation. A limit left out is no
/// limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    /// Model tokens.
    pub max_tokens: Option<u64>,
    /// Cost, in cents.
    pub max_cost_cents: Option<u64>,
}

/// An amount reserved before a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Amount {
    /// Model tokens.
    pub tokens: u64,
    /// Cost, in cents.
    pub cost_cents: u64,
}

/// One reservation, open until settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The executor's id for it: unique on its task.
    pub id: String,
    /// The attempt that made it.
    pub attempt: u64,
    /// The step it is for, if the executor said.
    pub step: Option<String>,
    /// What it holds back.
    pub amount: Amount,
    /// What the call used, once settled (the amount itself, when charged
    /// for a dead attempt).
    pub settled: Option<Usage>,
}

/// One external write, recorded once under its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The step that made it.
    pub step: String,
    /// The executor's name for the action within the step
    /// (`publish-report`): with the step and the task, the key.
    pub action: String,
    /// What the outside system calls what was written (a ticket number,
    /// a message id).
    pub resource_id: String,
    /// The attempt that recorded it first.
    pub attempt: u64,
}

/// A task's budget, its spending and its side effects.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ledger {
    /// The limits, if the task was given any.
    pub budget: Option<Budget>,
    /// What the settled calls used, in all.
    pub used: Usage,
    /// Every reservation, in the order made.
    pub reservations: Vec<Reservation>,
    /// Every side effect, in the order recorded.
    pub effects: Vec<Effect>,
}

/// A `reserve` event's own fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveInput {
    /// The reservation's id.
    pub id: NonBlank,
    /// The step it is for.
    pub step: Option<NonBlank>,
    /// How much.
    pub amount: Amount,
}

/// An `effect` event's own fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectInput {
    /// The step that made it.
    pub step: NonBlank,
    /// The action within the step.
    pub action: NonBlank,
    /// The outside system's id for what was written.
    pub resource_id: NonBlank,
}

impl Ledger {
    /// A ledger for a new task: its budget, nothing spent.
    pub fn with_budget(budget: Budget) -> Self {
        Ledger {
            budget: Some(budget),
            ..Ledger::default()
        }
    }

    /// The same ledger as a replay starts it: the budget kept, nothing
    /// spent or recorded. `None` when there is nothing to keep.
    pub fn restarted(&self) -> Option<Ledger> {
        self.budget.map(Ledger::with_budget)
    }

    /// What the open reservations hold back, in all.
    pub fn reserved(&self) -> Amount {
        let mut sum = Amount::default();
        for r in self.reservations.iter().filter(|r| r.settled.is_none()) {
            sum.tokens = sum.tokens.saturating_add(r.amount.tokens);
            sum.cost_cents = sum.cost_cents.saturating_add(r.amount.cost_cents);
        }
        sum
    }

    /// True when `amount` more can be reserved: spent + reserved + amount
    /// stays within every limit.
    pub fn fits(&self, amount: Amount) -> bool {
        let Some(budget) = self.budget else {
            return true;
        };
        let reserved = self.reserved();
        let within = |max: Option<u64>, used: u64, held: u64, more: u64| match max {
            None => true,
            Some(max) => used
                .checked_add(held)
                .and_then(|s| s.checked_add(more))
                .is_some_and(|total| total <= max),
        };
        within(
            budget.max_tokens,
            self.used.tokens,
            reserved.tokens,
            amount.tokens,
        ) && within(
            budget.max_cost_cents,
            self.used.cost_cents,
            reserved.cost_cents,
            amount.cost_cents,
        )
    }

    /// True when what was spent passed a limit (a settlement above its
    /// reservation).
    pub fn overrun(&self) -> bool {
        let Some(budget) = self.budget else {
            return false;
        };
        budget.max_tokens.is_some_and(|m| self.used.tokens > m)
            || budget
                .max_cost_cents
                .is_some_and(|m| self.used.cost_cents > m)
    }

    /// The reservation named `id`.
    pub fn reservation(&self, id: &str) -> Option<&Reservation> {
        self.reservations.iter().find(|r| r.id == id)
    }

    /// The side effect recorded under `(step, action)`: the first one.
    pub fn effect(&self, step: &str, action: &str) -> Option<&Effect> {
        self.effects
            .iter()
            .find(|e| e.step == step && e.action == action)
    }

    /// Settles `id` with what its call used and adds it to what was
    /// spent.
    pub(crate) fn settle(&mut self, id: &str, usage: Usage) {
        if let Some(r) = self.reservations.iter_mut().find(|r| r.id == id) {
            r.settled = Some(usage);
            self.used = add(self.used, usage);
        }
    }

    /// Charges every open reservation of an attempt before `attempt` in
    /// full (see the module's rules). True when one was.
    pub(crate) fn charge_dead_attempts(&mut self, attempt: u64) -> bool {
        let mut charged = Usage::default();
        let mut any = false;
        for r in &mut self.reservations {
            if r.settled.is_none() && r.attempt < attempt {
                let usage = Usage {
                    tokens: r.amount.tokens,
                    cost_cents: r.amount.cost_cents,
                    tool_calls: 0,
                };
                r.settled = Some(usage);
                charged = add(charged, usage);
                any = true;
            }
        }
        self.used = add(self.used, charged);
        any
    }
}

fn add(a: Usage, b: Usage) -> Usage {
    Usage {
        tokens: a.tokens.saturating_add(b.tokens),
        cost_cents: a.cost_cents.saturating_add(b.cost_cents),
        tool_calls: a.tool_calls.saturating_add(b.tool_calls),
    }
}

impl crate::TaskView {
    /// True when the task's history may hold an event the page's build
    /// cannot read (`step`, `reserve`, `settle`, `effect`, `exhaust`): it
    /// has a plan or a ledger, or `exhaust` ended it (its error says so).
    /// Such a task is followed by snapshots ([`crate::ResumePlan::answer`]).
    pub fn followed_by_snapshots(&self) -> bool {
        self.plan.is_some()
            || self.ledger.is_some()
            || self.error.as_deref() == Some(crate::transition::BUDGET_EXHAUSTED)
    }
}

/// The resource id an answer to `event` names: for an `effect`, the one
/// first recorded under its key on `view` (after the event was judged),
/// whoever recorded it. An executor that made a write again, after a
/// crash between the write and its record, learns the first write's id
/// and uses it (001 §5). Named whatever the outcome (a fenced attempt
/// learns it too); `None` for other events, and while nothing is
/// recorded under the key.
pub fn recorded_resource<'a>(view: &'a crate::TaskView, event: &crate::Event) -> Option<&'a str> {
    let crate::Event::Effect { effect, .. } = event else {
        return None;
    };
    let ledger = view.ledger.as_deref()?;
    ledger
        .effect(&effect.step, &effect.action)
        .map(|e| e.resource_id.as_str())
}

//! The hand-written writers of budgets and side effects, byte for byte
//! the serde writers' (`ledger/json.rs`). Only in builds with the
//! `steps` feature.

use super::{ToJson, Writer};
use crate::event::Event;
use crate::ledger::{Amount, Budget, Effect, Ledger, Reservation};
use crate::steps::Usage;

impl ToJson for Budget {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.some("maxTokens", &self.max_tokens);
        w.some("maxCostCents", &self.max_cost_cents);
        w.close();
    }
}

impl ToJson for Amount {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("tokens", &self.tokens);
        w.field("costCents", &self.cost_cents);
        w.close();
    }
}

impl ToJson for Reservation {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("id", &self.id);
        w.field("attempt", &self.attempt);
        w.some("step", &self.step);
        w.field("tokens", &self.amount.tokens);
        w.field("costCents", &self.amount.cost_cents);
        w.some("settled", &self.settled);
        w.close();
    }
}

impl ToJson for Effect {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("step", &self.step);
        w.field("action", &self.action);
        w.field("resourceId", &self.resource_id);
        w.field("attempt", &self.attempt);
        w.close();
    }
}

/// A task's ledger, after its plan.
pub(super) fn task_ledger(w: &mut Writer, ledger: Option<&Ledger>) {
    let Some(l) = ledger else {
        return;
    };
    let reserved = l.reserved();
    w.some("budget", &l.budget);
    if l.used != Usage::default() {
        w.field("used", &l.used);
    }
    if reserved != Amount::default() {
        w.field("reserved", &reserved);
    }
    if !l.reservations.is_empty() {
        w.field("reservations", &l.reservations);
    }
    if !l.effects.is_empty() {
        w.field("effects", &l.effects);
    }
}

/// The own fields of `reserve`, `settle`, `effect` and `exhaust`; false
/// for any other event.
pub(super) fn event(w: &mut Writer, event: &Event) -> bool {
    match event {
        Event::Reserve { reservation, .. } => {
            w.field("reservation", reservation.id.as_str());
            w.some("step", &reservation.step.as_ref().map(|s| s.as_str()));
            w.field("tokens", &reservation.amount.tokens);
            w.field("costCents", &reservation.amount.cost_cents);
        }
        Event::Settle {
            reservation, usage, ..
        } => {
            w.field("reservation", reservation.as_str());
            w.field("tokens", &usage.tokens);
            w.field("costCents", &usage.cost_cents);
            w.field("toolCalls", &usage.tool_calls);
        }
        Event::Effect { effect, .. } => {
            w.field("step", effect.step.as_str());
            w.field("action", effect.action.as_str());
            w.field("resourceId", effect.resource_id.as_str());
        }
        Event::Exhaust { partial, .. } => {
            if let Some(p) = partial {
                w.field("resultRef", p.output_ref.as_str());
                w.field("resultHash", p.output_hash.as_str());
            }
        }
        _ => return false,
    }
    true
}

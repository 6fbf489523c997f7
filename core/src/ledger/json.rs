//! Budgets and side effects on the wire.
//!
//! - Creation input: `"budget":{"maxTokens":…,"maxCostCents":…}`.
//! - Events (flat, after `type` and `atMs`): `reserve` is `reservation`,
//!   `step?`, `tokens`, `costCents`; `settle` is `reservation`, `tokens`,
//!   `costCents`, `toolCalls`; `effect` is `step`, `action`,
//!   `resourceId`; `exhaust` is `resultRef?` + `resultHash?` (both or
//!   neither). A counter left out is 0.
//! - The task view, after the plan: `budget?`, `used?`, `reserved?`
//!   (what open reservations hold, derived: written, not read),
//!   `reservations?` and `effects?`, each left out while empty.
//!
//! The serde writers here and the hand-written ones
//! (`json/write/ledger.rs`) write the same bytes (`wire/tests`).

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::{Amount, Budget, Effect, EffectInput, Ledger, Reservation, ReserveInput};
use crate::json::{self, Fields, FromJson, Gather, Path, Value};
use crate::steps::{Checkpoint, Usage};
use crate::value::NonBlank;

impl FromJson for Budget {
    /// `{"maxTokens"?,"maxCostCents"?}`: counters, at least one.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mut g = Gather::new(&f, None);
        let budget = Budget {
            max_tokens: g.opt("maxTokens"),
            max_cost_cents: g.opt("maxCostCents"),
        };
        if budget.max_tokens.is_none() && budget.max_cost_cents.is_none() {
            g.fail(
                "maxTokens",
                "a budget needs maxTokens, maxCostCents or both",
            );
        }
        g.finish(budget)
    }
}

json::impl_deserialize!(Budget);

use crate::steps::write_opt as opt;

impl Serialize for Budget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Budget", 2)?;
        opt(&mut st, "maxTokens", self.max_tokens)?;
        opt(&mut st, "maxCostCents", self.max_cost_cents)?;
        st.end()
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Amount", 2)?;
        st.serialize_field("tokens", &self.tokens)?;
        st.serialize_field("costCents", &self.cost_cents)?;
        st.end()
    }
}

impl Serialize for Reservation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Reservation", 6)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("attempt", &self.attempt)?;
        opt(&mut st, "step", self.step.as_ref())?;
        st.serialize_field("tokens", &self.amount.tokens)?;
        st.serialize_field("costCents", &self.amount.cost_cents)?;
        opt(&mut st, "settled", self.settled.as_ref())?;
        st.end()
    }
}

impl FromJson for Reservation {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mut g = Gather::new(&f, None);
        let id: NonBlank = g.req("id");
        let record = Reservation {
            id: id.into_string(),
            attempt: g.req("attempt"),
            step: g.opt("step"),
            amount: amount(&mut g),
            settled: g.opt("settled"),
        };
        g.finish(record)
    }
}

impl Serialize for Effect {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Effect", 4)?;
        st.serialize_field("step", &self.step)?;
        st.serialize_field("action", &self.action)?;
        st.serialize_field("resourceId", &self.resource_id)?;
        st.serialize_field("attempt", &self.attempt)?;
        st.end()
    }
}

impl FromJson for Effect {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mut g = Gather::new(&f, None);
        let input = read_effect(&mut g);
        let record = Effect {
            step: input.step.into_string(),
            action: input.action.into_string(),
            resource_id: input.resource_id.into_string(),
            attempt: g.req("attempt"),
        };
        g.finish(record)
    }
}

/// `tokens` and `costCents`, each 0 when left out.
fn amount(g: &mut Gather<'_, '_, '_, '_>) -> Amount {
    Amount {
        tokens: g.opt("tokens").unwrap_or(0),
        cost_cents: g.opt("costCents").unwrap_or(0),
    }
}

/// A `reserve` event's own fields.
pub(crate) fn read_reserve(g: &mut Gather<'_, '_, '_, '_>) -> ReserveInput {
    ReserveInput {
        id: g.req("reservation"),
        step: g.opt("step"),
        amount: amount(g),
    }
}

/// A `settle` event's own fields.
pub(crate) fn read_settle(g: &mut Gather<'_, '_, '_, '_>) -> (NonBlank, Usage) {
    let id = g.req("reservation");
    let amount = amount(g);
    let usage = Usage {
        tokens: amount.tokens,
        cost_cents: amount.cost_cents,
        tool_calls: g.opt("toolCalls").unwrap_or(0),
    };
    (id, usage)
}

/// An `effect` event's own fields (and an effect record's).
pub(crate) fn read_effect(g: &mut Gather<'_, '_, '_, '_>) -> EffectInput {
    EffectInput {
        step: g.req("step"),
        action: g.req("action"),
        resource_id: g.req("resourceId"),
    }
}

/// An `exhaust` event's partial result: `resultRef` and `resultHash`,
/// both or neither.
pub(crate) fn read_partial(g: &mut Gather<'_, '_, '_, '_>) -> Option<Checkpoint> {
    crate::steps::ref_and_hash(g, ["resultRef", "resultHash"])
}

/// Writes the own fields of `reserve`, `settle`, `effect` and `exhaust`
/// (serde side); false for any other event.
pub(crate) fn write_event<S: SerializeStruct>(
    st: &mut S,
    event: &crate::Event,
) -> Result<bool, S::Error> {
    use crate::Event;
    match event {
        Event::Reserve { reservation, .. } => {
            st.serialize_field("reservation", &reservation.id)?;
            opt(st, "step", reservation.step.as_ref())?;
            st.serialize_field("tokens", &reservation.amount.tokens)?;
            st.serialize_field("costCents", &reservation.amount.cost_cents)?;
        }
        Event::Settle {
            reservation, usage, ..
        } => {
            st.serialize_field("reservation", reservation)?;
            st.serialize_field("tokens", &usage.tokens)?;
            st.serialize_field("costCents", &usage.cost_cents)?;
            st.serialize_field("toolCalls", &usage.tool_calls)?;
        }
        Event::Effect { effect, .. } => {
            st.serialize_field("step", &effect.step)?;
            st.serialize_field("action", &effect.action)?;
            st.serialize_field("resourceId", &effect.resource_id)?;
        }
        Event::Exhaust { partial, .. } => {
            opt(st, "resultRef", partial.as_ref().map(|p| &p.output_ref))?;
            opt(st, "resultHash", partial.as_ref().map(|p| &p.output_hash))?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Writes a task's ledger, after its plan.
pub(crate) fn write_task_ledger<S: SerializeStruct>(
    st: &mut S,
    ledger: Option<&Ledger>,
) -> Result<(), S::Error> {
    let Some(l) = ledger else {
        return Ok(());
    };
    let reserved = l.reserved();
    let any_reserved = reserved != Amount::default();
    opt(st, "budget", l.budget.as_ref())?;
    opt(
        st,
        "used",
        Some(&l.used).filter(|u| **u != Usage::default()),
    )?;
    opt(st, "reserved", Some(&reserved).filter(|_| any_reserved))?;
    opt(
        st,
        "reservations",
        Some(&l.reservations).filter(|r| !r.is_empty()),
    )?;
    opt(st, "effects", Some(&l.effects).filter(|e| !e.is_empty()))
}

/// Reads a task's ledger from its view's fields; `None` when it has none.
pub(crate) fn read_task_ledger(g: &mut Gather<'_, '_, '_, '_>) -> Option<Ledger> {
    let ledger = Ledger {
        budget: g.opt("budget"),
        used: g.opt("used").unwrap_or_default(),
        reservations: g.opt("reservations").unwrap_or_default(),
        effects: g.opt("effects").unwrap_or_default(),
    };
    (ledger != Ledger::default()).then_some(ledger)
}

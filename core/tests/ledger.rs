//! Budgets and side effects (issue 26, PROTOCOL.md §Budgets and side
//! effects), over random streams of reservations, settlements, effects,
//! starts, failures, lapses, cancels and `exhaust` (proptest):
//!
//! - **a budget is never exceeded** while every settlement stays within
//!   its reservation: spent + reserved ≤ the limit after every event;
//! - **a side-effect key keeps its first result**: once recorded, an
//!   `(step, action)` names the same resource id for the task's life;
//! - a reservation id is granted at most once, and settled at most once;
//! - the client's replay of the history gives the same task.

mod strategies;

use proptest::prelude::*;
use strategies::{attempt, ms, text, timed};
use taskwire_core::ledger::{Amount, Budget, EffectInput, ReserveInput};
use taskwire_core::steps::Usage;
use taskwire_core::{apply_event, create_task, CreateTask, Event, Reason};

const MAX_TOKENS: u64 = 1_000;
const MAX_CENTS: u64 = 50;

const IDS: [&str; 6] = ["r1", "r2", "r3", "r4", "r5", "r6"];

/// One event at `at`. Settlements draw a fraction of some amount; the
/// test only checks the budget when no settlement went past its
/// reservation.
fn event(at: f64) -> impl Strategy<Value = Event> {
    let at_ms = ms(at);
    prop_oneof![
        3 => (0..IDS.len(), 0..400u64, 0..20u64, attempt()).prop_map(move |(i, tokens, cost_cents, attempt)| Event::Reserve {
            at_ms,
            reservation: ReserveInput { id: text(IDS[i]), step: None, amount: Amount { tokens, cost_cents } },
            attempt,
        }),
        3 => (0..IDS.len(), 0..400u64, 0..20u64, 0..3u64, attempt()).prop_map(move |(i, tokens, cost_cents, tool_calls, attempt)| Event::Settle {
            at_ms,
            reservation: text(IDS[i]),
            usage: Usage { tokens, cost_cents, tool_calls },
            attempt,
        }),
        2 => (0..3usize, 0..3usize, attempt()).prop_map(move |(a, r, attempt)| Event::Effect {
            at_ms,
            effect: EffectInput {
                step: text("publish"),
                action: text(["report", "ticket", "mail"][a]),
                resource_id: text(["R-1", "R-2", "R-3"][r]),
            },
            attempt,
        }),
        2 => attempt().prop_map(move |attempt| Event::Start { at_ms, worker: "w".into(), attempt, lease_ms: Some(ms(5.0)), plan: None }),
        1 => attempt().prop_map(move |attempt| Event::Fail { at_ms, error: "e".into(), retryable: true, attempt }),
        1 => attempt().prop_map(move |attempt| Event::Lapse { at_ms, attempt }),
        1 => Just(Event::Abandon { at_ms }),
        1 => Just(Event::Cancel { at_ms, reason: None, actor: None }),
        1 => attempt().prop_map(move |attempt| Event::Exhaust { at_ms, partial: None, attempt }),
    ]
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    timed(80, event)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn a_budget_holds_and_an_effect_keeps_its_first_result(events in events()) {
        let mut task = create_task(&CreateTask {
            budget: Some(Budget { max_tokens: Some(MAX_TOKENS), max_cost_cents: Some(MAX_CENTS) }),
            unknown_grace_ms: Some(3.0),
            ..CreateTask::new("t", 0.0, 1e9, 4)
        }).unwrap();
        let mut honest = true;
        let mut first_effects: Vec<(String, String)> = Vec::new();
        for event in events {
            if let Event::Settle { reservation, usage, .. } = &event {
                let reserved = task.ledger.as_ref().and_then(|l| l.reservation(reservation)).map(|r| r.amount);
                if reserved.is_some_and(|a| usage.tokens > a.tokens || usage.cost_cents > a.cost_cents) {
                    honest = false;
                }
            }
            let before = task.view().clone();
            let t = apply_event(task, event.clone());
            task = t.task;
            let ledger = task.ledger.as_ref().unwrap();
            let reserved = ledger.reserved();
            if honest {
                prop_assert!(ledger.used.tokens + reserved.tokens <= MAX_TOKENS, "tokens over budget: {ledger:?}");
                prop_assert!(ledger.used.cost_cents + reserved.cost_cents <= MAX_CENTS, "cost over budget: {ledger:?}");
            }
            if t.reason == Reason::OverBudget {
                prop_assert_eq!(task.view(), &before);
            }
            // Every effect recorded before stays as it was, in its place.
            for (i, (key, resource)) in first_effects.iter().enumerate() {
                let e = &ledger.effects[i];
                prop_assert_eq!(&format!("{}/{}", e.step, e.action), key);
                prop_assert_eq!(&e.resource_id, resource);
            }
            first_effects = ledger.effects.iter().map(|e| (format!("{}/{}", e.step, e.action), e.resource_id.clone())).collect();
            // A reservation id appears once.
            let mut ids: Vec<&str> = ledger.reservations.iter().map(|r| r.id.as_str()).collect();
            ids.sort_unstable();
            ids.dedup();
            prop_assert_eq!(ids.len(), ledger.reservations.len());
        }
        let mut replay = task.view().initial();
        for entry in task.history() {
            prop_assert!(replay.apply(&entry.event).changed);
        }
        prop_assert_eq!(&replay, task.view());
    }
}

//! What the property tests of steps and of budgets build their events
//! from: times, texts, attempts, and streams of events at increasing
//! times.

use proptest::prelude::*;
use taskwire_core::{Event, Millis, NonBlank};

/// A valid event time.
pub fn ms(v: f64) -> Millis {
    Millis::new(v, "atMs").unwrap()
}

/// A non-blank text.
pub fn text(s: &str) -> NonBlank {
    NonBlank::new(s, "s").unwrap()
}

/// The attempt an event names: mostly 1 to 3, sometimes none.
pub fn attempt() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![1 => Just(None), 4 => (1u64..4).prop_map(Some)]
}

/// 1 to `max` events, `event(at)` at increasing `at`, each 1 to 2 ms
/// after the one before.
pub fn timed<S>(max: usize, event: fn(f64) -> S) -> impl Strategy<Value = Vec<Event>>
where
    S: Strategy<Value = Event>,
{
    proptest::collection::vec(0.0..1.0f64, 1..max).prop_flat_map(move |gaps| {
        let mut at = 0.0;
        let times: Vec<f64> = gaps
            .into_iter()
            .map(|g| {
                at += 1.0 + g;
                at
            })
            .collect();
        times.into_iter().map(event).collect::<Vec<_>>()
    })
}

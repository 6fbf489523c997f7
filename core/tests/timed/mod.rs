//! Streams of events at increasing times, for the property tests of
//! steps and of budgets: each a strategy of `event(at)` for 1 to `max`
//! times, each 1 to 2 ms after the one before.

use proptest::prelude::*;
use taskwire_core::Event;

/// 1 to `max` events, `event(at)` at increasing `at`.
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

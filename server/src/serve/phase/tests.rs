//! A connection's phases, and the body timeout's error found under wrappers.

use super::*;

#[test]
fn every_change_is_seen_even_back_to_the_same_phase() {
    let activity = Activity::new();
    let start = activity.seen();
    assert_eq!(start.phase(), Phase::Head);
    let busy = Busy::start(&activity, false);
    assert_eq!(activity.seen().phase(), Phase::Busy);
    drop(busy);
    let idle = activity.seen();
    assert_eq!(idle.phase(), Phase::Idle);
    // A whole request within one poll: idle again, but not the same.
    activity.set(Phase::Head);
    drop(Busy::start(&activity, false));
    assert_eq!(activity.seen().phase(), Phase::Idle);
    assert_ne!(activity.seen(), idle);
}

#[test]
fn a_timeout_is_found_under_wrappers() {
    let inner: Box<dyn StdError + Send + Sync> = Box::new(BodyTimedOut(Duration::from_millis(5)));
    let wrapped = axum::Error::new(axum::Error::new(inner));
    assert_eq!(
        body_timed_out(&wrapped),
        Some(BodyTimedOut(Duration::from_millis(5)))
    );
    assert_eq!(body_timed_out(&io::Error::other("x")), None);
}

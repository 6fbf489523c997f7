//! The follow's own deadline on a long-poll: a request not answered by
//! then is cut and sent again at once, and is no failure (a browser may
//! not have sent it: 6 connections per origin over HTTP/1.1).

use super::*;

#[test]
fn a_poll_without_a_head_at_its_deadline_is_resent_at_once_and_is_no_failure() {
    let mut h = H::new(Transport::LongPoll, true);
    h.answer(&snapshot(&view(1, "running", 0)));
    let statuses = h.statuses().len();
    for round in 1..=3 {
        let held = h.last();
        assert_eq!(h.f.poll_timeout(), Some(h.now + 40_000.0), "waitMs + 15 s");
        h.fire();
        assert_eq!(
            h.aborted.last(),
            Some(&held),
            "round {round}: cut on the follow's timer"
        );
        assert_eq!(h.sent.len(), 2 + round, "round {round}: sent again at once");
        assert_eq!(
            h.f.poll_timeout(),
            Some(h.now + 40_000.0),
            "no backoff wait"
        );
    }
    assert_eq!(
        h.statuses().len(),
        statuses,
        "no `reconnecting`: {:?}",
        h.statuses()
    );
    // The next failure is the first one counted.
    let id = h.last();
    h.f.handle_failure(h.now, id, Failure::Network("refused"));
    h.drain();
    let last = h.statuses().pop().unwrap();
    assert_eq!((last.0, last.1), (ConnState::Reconnecting, Some(1)));
}

#[test]
fn a_poll_that_stalls_after_its_head_is_resent_at_once_too() {
    let mut h = H::new(Transport::LongPoll, true);
    h.answer(&snapshot(&view(1, "running", 0)));
    let statuses = h.statuses().len();
    let id = h.last();
    h.f.handle_head(h.now, id, 200, None);
    h.drain();
    h.fire();
    assert_eq!(h.aborted.last(), Some(&id));
    assert_eq!(h.sent.len(), 3, "sent again at once");
    assert_eq!(h.statuses().len(), statuses, "no `reconnecting`");
}

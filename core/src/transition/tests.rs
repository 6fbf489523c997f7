use super::*;
use crate::lease::LeaseChange;
use crate::task::{create_task, CreateTask, State};
use crate::value::{Millis, Percent};

fn view() -> TaskView {
    let input = CreateTask::new("t", 0.0, 100.0, 1);
    create_task(&input).unwrap().view().clone()
}

fn at(ms: f64) -> Millis {
    Millis::new(ms, "atMs").unwrap()
}

#[test]
fn step_returns_the_entry_a_store_appends() {
    let mut v = view();
    let start = Event::Start {
        at_ms: at(1.0),
        worker: "w".into(),
        attempt: None,
        lease_ms: None,
        #[cfg(feature = "steps")]
        plan: None,
    };
    let step = v.step(&start);
    assert_eq!(step.outcome.reason, Reason::Started);
    assert_eq!(step.lease, LeaseChange::Keep, "a seed start opens no lease");
    assert_eq!(
        step.entry,
        Some(HistoryEntry {
            version: 1,
            event: start.clone()
        })
    );
    // Unchanged: no entry, nothing touched.
    let before = v.clone();
    let step = v.step(&start);
    assert_eq!(
        (step.outcome.reason, step.entry),
        (Reason::AlreadyRunning, None)
    );
    assert_eq!(v, before);
    // A late event records the expiry at expiresAtMs, not the event.
    let late = Event::Progress {
        at_ms: at(500.0),
        progress: Percent::new(5.0, "p").unwrap(),
        cursor: String::new(),
        attempt: None,
    };
    let step = v.step(&late);
    assert_eq!(step.outcome.reason, Reason::Expired);
    assert_eq!(
        step.entry.map(|e| (e.version, e.event)),
        Some((2, Event::Expire { at_ms: at(100.0) }))
    );
    assert_eq!(v.expire_step().outcome.reason, Reason::DuplicateExpire);
}

#[test]
fn expire_step_on_a_live_view() {
    let mut v = view();
    let step = v.expire_step();
    assert!(step.outcome.notify);
    assert_eq!(step.entry.map(|e| e.version), Some(1));
    assert_eq!(v.state, State::Expired);
}

mod cancel_and_approval {
    use crate::delivery::{decide_delivery, DeliveryReason};
    use crate::event::DecisionKind::{Approve, Reject, RequestChanges};
    use crate::task::{create_task, CreateTask, State, Task};
    use crate::transition::fixtures::*;
    use crate::transition::Reason;
    use crate::value::NonBlank;

    fn running(max_attempts: u64) -> Task {
        let mut task = create_task(&CreateTask::new("t", 0.0, 1_000.0, max_attempts)).unwrap();
        task.apply(start(1.0, Some(1), Some(100.0)));
        task
    }

    #[test]
    fn cancel_ends_at_once_without_a_worker_and_waits_for_one_with() {
        let mut queued = create_task(&CreateTask::new("q", 0.0, 1_000.0, 1)).unwrap();
        let o = queued.apply(cancel(5.0));
        assert_eq!(
            (o.reason, o.notify, queued.state),
            (Reason::Cancelled, true, State::Cancelled)
        );
        let again = queued.apply(cancel(6.0));
        assert_eq!(
            (again.reason, again.duplicate, again.changed),
            (Reason::DuplicateCancel, true, false)
        );
        assert_eq!(queued.version, 1, "no second version");

        let mut task = running(1);
        let o = task.apply(cancel(5.0));
        assert_eq!(
            (o.reason, o.notify, task.state),
            (Reason::CancelRequested, false, State::Cancelling)
        );
        assert_eq!(task.apply(cancel(6.0)).reason, Reason::DuplicateCancel);
        assert!(task.lease().is_some(), "the worker still holds it");
        let o = task.apply(crate::Event::AckCancel {
            at_ms: at(7.0),
            attempt: Some(1),
        });
        assert_eq!(
            (o.reason, o.notify, task.state),
            (Reason::CancelAcknowledged, true, State::Cancelled)
        );
        assert_eq!(task.lease(), None);
        assert_eq!(task.version, 3);
    }

    #[test]
    fn a_cancel_that_cannot_take_effect_shows_and_ends_honestly() {
        let mut task = running(3);
        task.apply(cancel(5.0));
        let cannot = crate::Event::CannotCancel {
            at_ms: at(6.0),
            reason: Some("remote".into()),
            attempt: Some(1),
        };
        assert_eq!(task.apply(cannot.clone()).reason, Reason::CancelIneffective);
        assert_eq!(task.state, State::CancelIneffective);
        assert_eq!(task.apply(cannot).reason, Reason::DuplicateCancel);
        // The work goes on: progress still counts.
        assert_eq!(
            task.apply(progress(7.0, 40, Some(1))).reason,
            Reason::Progress
        );
        // It finishes anyway: cancelled, the result kept, never delivered.
        let o = task.apply(succeed(8.0, "h", Some(1)));
        assert_eq!((o.reason, o.notify), (Reason::SucceededAfterCancel, true));
        assert_eq!(task.state, State::Cancelled);
        assert_eq!(task.result_hash.as_deref(), Some("h"));
        let key = NonBlank::new("k", "k").unwrap();
        let d = decide_delivery(None, "t", Some(task.view()), &key, at(9.0)).unwrap();
        assert_eq!(
            (d.ok, d.reason, d.receipt),
            (false, DeliveryReason::NotSucceeded, None)
        );
        // A redelivered result is a duplicate; another one a conflict.
        assert_eq!(
            task.apply(succeed(9.0, "h", Some(1))).reason,
            Reason::DuplicateResult
        );
        assert_eq!(
            task.apply(succeed(9.0, "x", Some(1))).reason,
            Reason::ResultConflict
        );
    }

    #[test]
    fn a_failure_after_a_cancel_is_a_cancel_not_a_retry() {
        let mut task = running(3);
        task.apply(cancel(5.0));
        let o = task.apply(fail(6.0, true, Some(1)));
        assert_eq!(
            (o.reason, task.state),
            (Reason::Cancelled, State::Cancelled)
        );
        assert_eq!(task.error.as_deref(), Some("e"));
        // Acknowledgements without a cancel are refused.
        let mut other = running(1);
        let ack = crate::Event::AckCancel {
            at_ms: at(6.0),
            attempt: Some(1),
        };
        assert_eq!(other.apply(ack).reason, Reason::NotCancelling);
    }

    #[test]
    fn decisions_must_name_the_held_artifact_and_version() {
        let mut task = running(1);
        assert_eq!(task.apply(hold(5.0, "h1", Some(1))).reason, Reason::Held);
        assert_eq!((task.state, task.version), (State::WaitingApproval, 2));
        assert_eq!(task.lease(), None, "no lease while it waits");
        assert_eq!(
            task.apply(hold(6.0, "h1", Some(1))).reason,
            Reason::DuplicateHold
        );
        assert_eq!(
            task.apply(heartbeat(6.0, Some(1), None)).reason,
            Reason::NotRunning
        );
        for stale in [
            decide(7.0, Approve, "h0", 2),
            decide(7.0, Approve, "h1", 1),
            decide(7.0, Approve, "h1", 3),
        ] {
            let o = task.apply(stale);
            assert_eq!(
                (o.reason, o.changed, o.duplicate),
                (Reason::StaleDecision, false, false)
            );
        }
        let o = task.apply(decide(8.0, RequestChanges, "h1", 2));
        assert_eq!(
            (o.reason, task.state, task.continuations),
            (Reason::ChangesRequested, State::Queued, 1)
        );
        assert_eq!(
            task.apply(decide(9.0, RequestChanges, "h1", 2)).reason,
            Reason::DuplicateDecision
        );
        assert_eq!(
            task.apply(decide(9.0, Approve, "h1", 2)).reason,
            Reason::StaleDecision
        );
        // maxAttempts 1, and yet the next attempt may start: a continuation.
        assert_eq!(
            task.apply(start(10.0, Some(2), None)).reason,
            Reason::Started
        );
        assert_eq!(task.apply(hold(11.0, "h2", Some(2))).reason, Reason::Held);
        assert_eq!(task.decision, None, "a new artifact, no decision yet");
        let o = task.apply(decide(12.0, Reject, "h2", task.version));
        assert_eq!(
            (o.reason, o.notify, task.state),
            (Reason::Rejected, true, State::Failed)
        );
        assert_eq!(task.error.as_deref(), Some("rejected"));
        assert_eq!(
            task.apply(decide(13.0, Reject, "h2", 5)).reason,
            Reason::DuplicateDecision
        );
        assert_eq!(
            task.apply(decide(13.0, Approve, "h2", 5)).reason,
            Reason::TerminalConflict
        );
    }

    #[test]
    fn a_held_task_still_expires_at_its_ttl() {
        let mut task = running(1);
        task.apply(hold(5.0, "h1", Some(1)));
        let o = task.apply(decide(1_000.0, Approve, "h1", 2));
        assert_eq!((o.reason, task.state), (Reason::Expired, State::Expired));
        assert_eq!(task.history().last().unwrap().event, task.expiry_event());
    }
}

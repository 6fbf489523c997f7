use crate::lease::{Lease, LeaseChange};
use crate::task::{create_task, CreateTask, State, Task};
use crate::transition::fixtures::*;
use crate::transition::Reason;
use crate::{Event, TaskView};

/// A task with a 30 s grace period, started as attempt 1 at 10 with a
/// 100 ms lease (until 110).
fn leased(max_attempts: u64, auto_requeue: bool) -> Task {
    let mut input = CreateTask::new("t", 0.0, 10_000.0, max_attempts);
    input.unknown_grace_ms = Some(30.0);
    input.auto_requeue = auto_requeue;
    let mut task = create_task(&input).unwrap();
    assert_eq!(
        task.apply(start(10.0, Some(1), Some(100.0))).reason,
        Reason::Started
    );
    task
}

fn lease_until(task: &Task) -> Option<f64> {
    task.lease().map(|l| l.expires_at_ms.get())
}

#[test]
fn a_fenced_attempt_changes_nothing_and_is_not_a_duplicate() {
    let mut task = leased(2, true);
    let before = task.clone();
    for zombie in [
        succeed(20.0, "h", Some(7)),
        progress(20.0, 50, Some(2)),
        heartbeat(20.0, Some(2), Some(1e6)),
        fail(20.0, false, Some(3)),
        hold(20.0, "a", Some(2)),
        start(20.0, Some(2), None),
    ] {
        let outcome = task.apply(zombie);
        assert_eq!(outcome.reason, Reason::StaleAttempt);
        assert!(!outcome.changed && !outcome.duplicate && !outcome.notify);
        assert_eq!(task, before, "lease and history untouched too");
    }
    // Without `attempt`, as in the seed: judged, not fenced.
    assert_eq!(task.apply(progress(20.0, 5, None)).reason, Reason::Progress);
    // On a queued task only the next attempt's start is current.
    let mut queued = create_task(&CreateTask::new("q", 0.0, 100.0, 2)).unwrap();
    assert_eq!(
        queued.apply(start(1.0, Some(2), None)).reason,
        Reason::StaleAttempt
    );
    // A report of that next attempt before its start is early, not stale.
    assert_eq!(
        queued.apply(heartbeat(1.0, Some(1), None)).reason,
        Reason::NotStarted
    );
    assert_eq!(
        queued.apply(start(1.0, Some(1), None)).reason,
        Reason::Started
    );
}

#[test]
fn a_heartbeat_renews_the_lease_without_a_version() {
    let mut view: TaskView = leased(1, true).view().clone();
    let lease = Lease::extended(None, 1, at(10.0), Some(at(100.0)));
    let step = view.step_with(lease.as_ref(), &heartbeat(60.0, Some(1), None));
    assert_eq!(step.outcome.reason, Reason::Heartbeat);
    assert!(!step.outcome.changed && !step.outcome.duplicate);
    assert_eq!(step.entry, None, "no history entry");
    assert_eq!(view.version, 1, "no version");
    let LeaseChange::Set(renewed) = step.lease else {
        panic!("the store must write the lease: {:?}", step.lease)
    };
    assert_eq!(renewed.expires_at_ms.get(), 160.0);
    // A new length from the heartbeat; progress renews with the stored one.
    let step = view.step_with(Some(&renewed), &heartbeat(70.0, Some(1), Some(500.0)));
    assert!(matches!(step.lease, LeaseChange::Set(l) if l.expires_at_ms.get() == 570.0));
    let step = view.step_with(Some(&renewed), &progress(80.0, 10, Some(1)));
    assert!(step.entry.is_some());
    assert!(matches!(step.lease, LeaseChange::Set(l) if l.expires_at_ms.get() == 180.0));
}

#[test]
fn the_lease_lapses_into_unknown_and_the_attempt_can_come_back() {
    let mut task = leased(1, true);
    let (view, lease, _) = task.parts_mut();
    // Not yet.
    let step = view.lapse_step(lease.as_ref(), at(109.0));
    assert_eq!((step.outcome.reason, step.entry), (Reason::NotDue, None));
    // Due: recorded at the lease's end, not at `now`.
    let step = view.lapse_step(lease.as_ref(), at(500.0));
    assert_eq!(step.outcome.reason, Reason::LeaseLapsed);
    assert_eq!(view.state, State::Unknown);
    let entry = step.entry.unwrap();
    assert_eq!((entry.version, entry.event), (2, lapse(110.0, Some(1))));
    assert_eq!(step.lease, LeaseChange::Keep, "the lapsed lease stays");
    // A lapse the Book is asked to apply early is refused the same way.
    let mut early = leased(1, true);
    assert_eq!(early.apply(lapse(50.0, Some(1))).reason, Reason::NotDue);
    assert_eq!(early.version, 1);
    // The attempt reports again: running, a version, a fresh lease.
    let mut task = leased(1, true);
    task.apply(lapse(110.0, Some(1)));
    let outcome = task.apply(heartbeat(130.0, Some(1), None));
    assert_eq!((outcome.reason, outcome.changed), (Reason::Recovered, true));
    assert_eq!((task.state, task.version), (State::Running, 3));
    assert_eq!(lease_until(&task), Some(230.0));
}

#[test]
fn after_the_grace_period_unknown_is_requeued_and_the_old_attempt_fenced() {
    let mut task = leased(2, true);
    task.apply(lapse(110.0, Some(1)));
    let (view, lease, _) = task.parts_mut();
    assert_eq!(view.next_due(lease.as_ref()), Some(140.0));
    let step = view.grace_step(lease.as_ref(), at(139.0));
    assert_eq!(step.outcome.reason, Reason::NotDue);
    let step = view.grace_step(lease.as_ref(), at(1000.0));
    assert_eq!(step.outcome.reason, Reason::Requeued);
    assert_eq!(step.lease, LeaseChange::Clear);
    assert_eq!(
        step.entry.unwrap().event,
        Event::Abandon { at_ms: at(140.0) }
    );
    assert_eq!((view.state, view.progress), (State::Queued, 0));
    assert!(view.error.as_deref().unwrap().starts_with("lease lapsed"));
    // The zombie is fenced; the next attempt runs.
    let mut view = view.clone();
    let mut zombie = view.clone();
    assert_eq!(
        zombie.step(&succeed(150.0, "h", Some(1))).outcome.reason,
        Reason::StaleAttempt
    );
    assert_eq!(zombie, view);
    assert_eq!(
        view.step(&start(150.0, Some(2), Some(100.0)))
            .outcome
            .reason,
        Reason::Started
    );
}

#[test]
fn with_no_attempt_left_unknown_fails_and_notifies() {
    let mut task = leased(1, true);
    task.apply(lapse(110.0, Some(1)));
    assert_eq!(
        task.apply(Event::Abandon { at_ms: at(139.0) }).reason,
        Reason::NotDue
    );
    let outcome = task.apply(Event::Abandon { at_ms: at(140.0) });
    assert_eq!((outcome.reason, outcome.notify), (Reason::Failed, true));
    assert_eq!(task.state, State::Failed);
    assert_eq!(task.lease(), None);
}

#[test]
fn a_task_that_opted_out_waits_in_unknown() {
    let mut task = leased(3, false);
    task.apply(lapse(110.0, Some(1)));
    let (view, lease, _) = task.parts_mut();
    assert_eq!(view.next_due(lease.as_ref()), None, "only the TTL is left");
    assert_eq!(view.sweep_step(lease.as_ref(), at(9_999.0)), None);
    assert_eq!(
        view.step(&Event::Abandon { at_ms: at(9_999.0) })
            .outcome
            .reason,
        Reason::NotDue
    );
    assert_eq!(view.state, State::Unknown);
    // It still ends: by a cancel (or the TTL).
    assert_eq!(
        view.step(&cancel(9_999.0)).outcome.reason,
        Reason::Cancelled
    );
}

#[test]
fn a_sweep_applies_what_fell_due_in_order() {
    let mut input = CreateTask::new("t", 0.0, 10_000.0, 2);
    input.unknown_grace_ms = Some(30.0);
    input.deadline_ms = Some(5_000.0);
    let mut task = create_task(&input).unwrap();
    task.apply(start(10.0, Some(1), Some(100.0)));
    let (view, lease, _) = task.parts_mut();
    assert_eq!(view.next_due(lease.as_ref()), Some(110.0));
    let mut reasons = Vec::new();
    while let Some(step) = view.sweep_step(lease.as_ref(), at(1_000.0)) {
        step.lease.apply_to(lease);
        reasons.push(step.outcome.reason);
    }
    assert_eq!(reasons, [Reason::LeaseLapsed, Reason::Requeued]);
    assert_eq!(view.next_due(lease.as_ref()), Some(5_000.0), "the deadline");
    let step = view.sweep_step(lease.as_ref(), at(6_000.0)).unwrap();
    assert_eq!(step.outcome.reason, Reason::TimedOut);
    assert_eq!(step.entry.unwrap().event, view.timeout_event());
    assert_eq!(view.next_due(lease.as_ref()), None);
}

#[test]
fn a_lapse_after_a_cancel_ends_the_task() {
    let mut task = leased(1, true);
    assert_eq!(task.apply(cancel(20.0)).reason, Reason::CancelRequested);
    let (view, lease, _) = task.parts_mut();
    assert_eq!(view.next_due(lease.as_ref()), Some(110.0), "the lease runs");
    let step = view.lapse_step(lease.as_ref(), at(200.0));
    assert_eq!(
        (step.outcome.reason, step.outcome.notify),
        (Reason::Cancelled, true)
    );
    assert_eq!(view.state, State::Cancelled);
}

#[test]
fn seed_executors_never_lapse() {
    let mut task = create_task(&CreateTask::new("t", 0.0, 100.0, 1)).unwrap();
    task.apply(start(1.0, None, None));
    assert_eq!(task.lease(), None);
    assert_eq!(task.next_due(task.lease()), None);
    assert_eq!(task.apply(lapse(50.0, None)).reason, Reason::NotDue);
    assert_eq!(
        task.apply(heartbeat(2.0, None, None)).reason,
        Reason::Heartbeat
    );
    assert_eq!(task.lease(), None);
}

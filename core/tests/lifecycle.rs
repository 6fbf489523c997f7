//! Invariants of the full lifecycle over random streams of every event
//! kind (executor reports with and without `attempt`, people's cancels and
//! decisions, system events) interleaved with both sweepers (proptest).
//! `properties.rs` holds the seed-era invariants; this file extends them
//! to the new states.

use proptest::prelude::*;
use taskwire_core::{
    Book, CreateTask, DecisionKind, Event, HistoryEntry, Millis, Mirror, Next, NonBlank, Percent,
    Reason, ResumeAnswer, State, Task, TaskView,
};

const TTL: f64 = 1_000.0;
const TASKS: usize = 3;

fn ms(v: f64) -> Millis {
    Millis::new(v, "atMs").unwrap()
}

fn text(s: &str) -> NonBlank {
    NonBlank::new(s, "s").unwrap()
}

/// Mostly inside the TTL, sometimes at or past it.
fn at() -> impl Strategy<Value = Millis> {
    prop_oneof![9 => 0.0..TTL, 1 => TTL..TTL * 1.5].prop_map(ms)
}

/// No attempt (a seed executor), the likely current ones, or a stale one.
fn attempt() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![2 => Just(None), 3 => (1u64..4).prop_map(Some)]
}

fn lease_ms() -> impl Strategy<Value = Option<Millis>> {
    proptest::option::of(prop_oneof![Just(20.0), Just(150.0)].prop_map(ms))
}

fn event() -> impl Strategy<Value = Event> {
    let hash = || prop_oneof![Just("h1"), Just("h2")].prop_map(text);
    let decision = prop_oneof![
        Just(DecisionKind::Approve),
        Just(DecisionKind::RequestChanges),
        Just(DecisionKind::Reject)
    ];
    prop_oneof![
        3 => (at(), attempt(), lease_ms()).prop_map(|(at_ms, attempt, lease_ms)| Event::Start {
            at_ms, worker: "w".into(), attempt, lease_ms, plan: None }),
        4 => (at(), 0u8..=100, attempt()).prop_map(|(at_ms, p, attempt)| Event::Progress {
            at_ms, progress: Percent::new(f64::from(p), "p").unwrap(), cursor: String::new(), attempt }),
        4 => (at(), attempt(), lease_ms()).prop_map(|(at_ms, attempt, lease_ms)| Event::Heartbeat {
            at_ms, attempt, lease_ms }),
        1 => (at(), hash(), attempt()).prop_map(|(at_ms, result_hash, attempt)| Event::Succeed {
            at_ms, result_ref: text("r"), result_hash, attempt }),
        2 => (at(), any::<bool>(), attempt()).prop_map(|(at_ms, retryable, attempt)| Event::Fail {
            at_ms, error: "e".into(), retryable, attempt }),
        2 => (at(), hash(), attempt()).prop_map(|(at_ms, artifact_hash, attempt)| Event::Hold {
            at_ms, artifact_ref: text("a"), artifact_hash, question: None, attempt }),
        2 => (at(), decision, hash(), 0u64..12).prop_map(|(at_ms, decision, artifact_hash, version)| {
            Event::Decide { at_ms, decision, artifact_hash, version, reason: None, actor: None } }),
        1 => at().prop_map(|at_ms| Event::Cancel { at_ms, reason: None, actor: Some(text("u")) }),
        1 => (at(), attempt()).prop_map(|(at_ms, attempt)| Event::AckCancel { at_ms, attempt }),
        1 => (at(), attempt()).prop_map(|(at_ms, attempt)| Event::CannotCancel { at_ms, reason: None, attempt }),
        1 => (at(), attempt()).prop_map(|(at_ms, attempt)| Event::Lapse { at_ms, attempt }),
        1 => at().prop_map(|at_ms| Event::Abandon { at_ms }),
        1 => at().prop_map(|at_ms| Event::Timeout { at_ms }),
        1 => at().prop_map(|at_ms| Event::Expire { at_ms }),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Apply(usize, Event, Option<u8>),
    Sweep(f64),
    ExpireDue(f64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..TASKS, event(), proptest::option::of(0u8..6)).prop_map(|(i, e, cb)| Op::Apply(i, e, cb)),
        2 => (0.0..TTL * 1.5).prop_map(Op::Sweep),
        1 => (0.0..TTL * 1.5).prop_map(Op::ExpireDue),
    ]
}

/// Three tasks with different lifecycle options: a deadline and a grace
/// period, an opt-out of re-queueing, and a seed-like one.
fn book() -> Book {
    let mut book = Book::new();
    let mut a = CreateTask::new("t0", 0.0, TTL, 2);
    a.deadline_ms = Some(TTL * 0.8);
    a.unknown_grace_ms = Some(40.0);
    let mut b = CreateTask::new("t1", 0.0, TTL, 3);
    b.unknown_grace_ms = Some(0.0);
    b.auto_requeue = false;
    let c = CreateTask::new("t2", 0.0, TTL, 1);
    for input in [a, b, c] {
        book.create(&input).unwrap();
    }
    book
}

/// The fencing rule, stated independently of the implementation.
fn fenced(view: &TaskView, event: &Event) -> bool {
    match (event.attempt(), view.state, event) {
        (None, _, _) => false,
        (Some(a), State::Queued, Event::Start { .. }) => a != view.attempts + 1,
        (Some(_), State::Queued, _) => true,
        (Some(a), _, _) => a != view.attempts,
    }
}

/// Version, attempts, progress within an open attempt, and life after a
/// terminal state never go back.
fn assert_no_regression(before: &TaskView, after: &TaskView) {
    assert!(after.version >= before.version, "version went back");
    assert!(after.attempts >= before.attempts, "attempts went back");
    if before.state.holds_attempt()
        && after.state.holds_attempt()
        && before.attempts == after.attempts
    {
        assert!(after.progress >= before.progress, "progress went back");
    }
    if before.state.is_terminal() {
        assert_eq!(after, before, "a terminal task changed");
    }
}

/// Issue 26: progress falls only when the work starts over (a retried
/// `fail` or an `abandon` re-queued the task; in a sweep, the deadline
/// may end it right after), never across a continuation (a decision,
/// then the next start).
fn assert_progress_falls_only_on_a_retry(before: &Task, after: &Task) {
    if after.progress < before.progress {
        let new = &after.history()[before.history().len()..];
        assert!(
            new.iter()
                .any(|e| matches!(e.event, Event::Fail { .. } | Event::Abandon { .. })),
            "progress fell without a re-queue: {new:?}"
        );
        assert_eq!(
            after.continuations, before.continuations,
            "progress fell on a continuation"
        );
    }
}

/// Issue 26: a continuation is not a failure (it keeps progress and
/// clears the error), and a report that names the current attempt and
/// changes the task clears a stale error; one without `attempt` keeps the
/// seed's rule (the error stays until a success).
fn assert_continuation_rules(before: &TaskView, event: &Event, reason: Reason, after: &TaskView) {
    match reason {
        Reason::Approved | Reason::ChangesRequested => {
            assert_eq!(after.progress, before.progress, "a decision moved progress");
            assert_eq!(after.error, None, "an error survived a continuation");
            assert_eq!(after.continuations, before.continuations + 1);
            assert_eq!(
                after.attempts, before.attempts,
                "a decision spent an attempt"
            );
        }
        Reason::Started => assert_eq!(after.progress, before.progress, "a start moved progress"),
        Reason::Progress | Reason::Recovered if event.attempt().is_some() => {
            assert_eq!(after.error, None, "a current report kept a stale error");
        }
        Reason::Progress | Reason::Recovered => {
            assert_eq!(
                after.error, before.error,
                "a report without attempt moved the error"
            );
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn every_change_is_one_version_and_terminal_states_absorb(ops in proptest::collection::vec(op(), 0..120)) {
        let mut book = book();
        for op in ops {
            let before: Vec<_> = (0..TASKS).map(|i| book.get(&format!("t{i}")).unwrap().clone()).collect();
            match op {
                Op::Apply(i, event, cb) => {
                    let id = format!("t{i}");
                    let before = &before[i];
                    let is_heartbeat = matches!(event, Event::Heartbeat { .. });
                    let must_fence = fenced(before.view(), &event);
                    let cb = cb.map(|c| format!("cb{c}"));
                    let applied = book.apply(&id, event.clone(), cb.as_deref()).unwrap();
                    let (changed, notify, reason) = (applied.changed, applied.notify, applied.reason);
                    let after = book.get(&id).unwrap();
                    if changed {
                        assert_continuation_rules(before.view(), &event, reason, after.view());
                    }
                    if reason != Reason::DuplicateCallback && reason != Reason::CallbackConflict {
                        let refused = matches!(reason, Reason::StaleAttempt | Reason::NotStarted);
                        prop_assert_eq!(refused, must_fence, "fencing rule");
                    }
                    if matches!(reason, Reason::StaleAttempt | Reason::NotStarted) {
                        prop_assert_eq!(after, before, "a fenced attempt changed something");
                    }
                    if changed {
                        prop_assert_eq!(after.version, before.version + 1);
                        prop_assert!(!before.state.is_terminal(), "a terminal task changed");
                    } else {
                        prop_assert_eq!(after.view(), before.view(), "an unchanged outcome changed the view");
                        prop_assert_eq!(after.history(), before.history());
                        if after.lease() != before.lease() {
                            prop_assert!(matches!(reason, Reason::Heartbeat | Reason::StaleProgress
                                | Reason::DuplicateProgress), "lease moved on {:?}", reason);
                        }
                    }
                    if is_heartbeat && changed {
                        // Heartbeats never version, except to bring an
                        // unknown task back, or as the late event that
                        // ends a task in time.
                        let ok = (reason == Reason::Recovered && before.state == State::Unknown)
                            || matches!(reason, Reason::Expired | Reason::TimedOut);
                        prop_assert!(ok, "a heartbeat versioned: {:?} from {:?}", reason, before.state);
                    }
                    prop_assert_eq!(notify, changed && after.state.is_terminal());
                }
                Op::Sweep(now) => {
                    for swept in book.sweep_due(now).unwrap() {
                        let i: usize = swept.task_id[1..].parse().unwrap();
                        prop_assert!(!before[i].state.is_terminal(), "the sweeper changed a terminal task");
                    }
                    // Nothing is left due.
                    for i in 0..TASKS {
                        let task = book.get(&format!("t{i}")).unwrap();
                        prop_assert!(!matches!(task.next_due(task.lease()), Some(due) if due <= now));
                    }
                }
                Op::ExpireDue(now) => { book.expire_due(now).unwrap(); }
            }
            for (i, before) in before.iter().enumerate() {
                let after = book.get(&format!("t{i}")).unwrap();
                prop_assert_eq!(after.history().len() as u64, after.version);
                prop_assert!(after.history().iter().enumerate().all(|(n, e)| e.version == n as u64 + 1));
                assert_no_regression(before.view(), after.view());
                assert_progress_falls_only_on_a_retry(before, after);
                if after.state.is_terminal() {
                    prop_assert_eq!(after.lease(), None, "a terminal task holds a lease");
                }
            }
        }
    }

    #[test]
    fn at_most_one_notification_per_task(ops in proptest::collection::vec(op(), 0..120)) {
        let mut book = book();
        let mut notes = Vec::new();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Apply(i, event, cb) => {
                    let cb = cb.map(|c| format!("cb{c}"));
                    book.apply(&format!("t{i}"), event, cb.as_deref()).unwrap();
                }
                Op::Sweep(now) => { book.sweep_due(now).unwrap(); }
                Op::ExpireDue(now) => { book.expire_due(now).unwrap(); }
            }
            if n % 7 == 0 {
                notes.extend(book.drain_notifications());
            }
        }
        book.sweep_due(TTL * 2.0).unwrap();
        book.expire_due(TTL * 2.0).unwrap();
        notes.extend(book.drain_notifications());
        for i in 0..TASKS {
            let id = format!("t{i}");
            let task = book.get(&id).unwrap();
            prop_assert!(task.state.is_terminal(), "{} still live after every clock ran out", id);
            let mine: Vec<_> = notes.iter().filter(|n| n.task_id == id).collect();
            prop_assert_eq!(mine.len(), 1, "task {} has {} notifications", id, mine.len());
            prop_assert_eq!(mine[0].state, task.state);
        }
    }

    #[test]
    fn a_mirror_converges_and_never_regresses(
        ops in proptest::collection::vec(op(), 1..80),
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), any::<proptest::sample::Index>(), 0u8..4), 0..60),
        retention in 0u64..10,
    ) {
        let mut book = Book::with_retention(retention);
        let mut input = CreateTask::new("t", 0.0, TTL, 2);
        input.deadline_ms = Some(TTL * 0.9);
        input.unknown_grace_ms = Some(30.0);
        book.create(&input).unwrap();
        let mut answers: Vec<ResumeAnswer> = Vec::new();
        for op in ops {
            match op {
                Op::Apply(_, event, _) => { book.apply("t", event, None).unwrap(); }
                Op::Sweep(now) => { book.sweep_due(now).unwrap(); }
                Op::ExpireDue(now) => { book.expire_due(now).unwrap(); }
            }
            let version = book.get("t").unwrap().version;
            for cursor in [0, version.saturating_sub(1), version.saturating_sub(3), version, version + 1] {
                answers.push(book.resume("t", cursor).unwrap());
            }
        }
        let mut mirror = Mirror::new("t").unwrap();
        for (which, cut, how) in picks {
            let answer = mangle(answers[which.index(answers.len())].clone(), cut, how);
            let before = mirror.task().cloned();
            mirror.merge(&answer);
            if let (Some(before), Some(after)) = (before, mirror.task()) {
                assert_no_regression(&before, after);
            }
        }
        for _ in 0..3 {
            let answer = book.resume("t", mirror.version()).unwrap();
            if mirror.merge(&answer).next == Next::Snapshot {
                let task = book.get("t").unwrap().view().clone();
                mirror.merge(&ResumeAnswer::Snapshot { task });
            }
        }
        prop_assert_eq!(mirror.task(), Some(book.get("t").unwrap().view()));
        // A fresh mirror replaying the whole history lands on the same view.
        let task = book.get("t").unwrap();
        let mut replayed = task.view().initial();
        for entry in task.history() {
            prop_assert!(replayed.apply(&entry.event).changed, "entry {} did not replay", entry.version);
        }
        prop_assert_eq!(&replayed, task.view());
    }
}

/// Truncates a delta at its head or tail, or leaves the answer alone.
fn mangle(answer: ResumeAnswer, cut: proptest::sample::Index, how: u8) -> ResumeAnswer {
    match answer {
        ResumeAnswer::Delta { mut events, task } if !events.is_empty() => {
            let at = cut.index(events.len());
            let events: Vec<HistoryEntry> = match how {
                0 => events.split_off(at),
                1 => {
                    events.truncate(at);
                    events
                }
                _ => events,
            };
            ResumeAnswer::Delta { events, task }
        }
        other => other,
    }
}

//! Invariants checked over random event streams (proptest).

use proptest::prelude::*;
use taskwire_core::{
    Book, CreateTask, Event, HistoryEntry, Millis, Mirror, Next, NonBlank, Percent, ResumeAnswer,
    State, TaskView,
};

const TTL: f64 = 1_000.0;

fn event_strategy() -> impl Strategy<Value = Event> {
    // Times mostly inside the TTL, sometimes at or past it.
    let at = prop_oneof![9 => 0.0..TTL, 1 => TTL..TTL * 1.5]
        .prop_map(|ms| Millis::new(ms, "atMs").unwrap());
    let hash = prop_oneof![Just("h1"), Just("h2")].prop_map(|h| NonBlank::new(h, "h").unwrap());
    prop_oneof![
        3 => at.clone().prop_map(|at_ms| Event::Start { at_ms, worker: "w".into(), attempt: None, lease_ms: None, plan: None }),
        6 => (at.clone(), 0u8..=100).prop_map(|(at_ms, p)| Event::Progress {
            at_ms,
            progress: Percent::new(f64::from(p), "p").unwrap(),
            cursor: String::new(),
            attempt: None,
        }),
        1 => (at.clone(), hash).prop_map(|(at_ms, result_hash)| Event::Succeed {
            at_ms,
            result_ref: NonBlank::new("r", "r").unwrap(),
            result_hash,
            attempt: None,
        }),
        2 => (at.clone(), any::<bool>()).prop_map(|(at_ms, retryable)| Event::Fail {
            at_ms,
            error: "e".into(),
            retryable,
            attempt: None,
        }),
        1 => at.prop_map(|at_ms| Event::Expire { at_ms }),
    ]
}

/// An event for one of three tasks, with an optional callback id from a
/// small pool (so that ids repeat).
fn call_strategy() -> impl Strategy<Value = (usize, Event, Option<u8>)> {
    (0usize..3, event_strategy(), proptest::option::of(0u8..6))
}

fn book_with_tasks(n: usize) -> Book {
    let mut book = Book::new();
    for i in 0..n {
        book.create(&CreateTask::new(format!("t{i}"), 0.0, TTL, 3))
            .unwrap();
    }
    book
}

/// Checks that `after` does not move backwards from `before`: version,
/// attempts, and progress while the same attempt is running.
fn assert_no_regression(before: &TaskView, after: &TaskView) {
    assert!(
        after.version >= before.version,
        "version {} -> {}",
        before.version,
        after.version
    );
    assert!(after.attempts >= before.attempts, "attempts went back");
    if before.state == State::Running
        && after.state == State::Running
        && before.attempts == after.attempts
    {
        assert!(
            after.progress >= before.progress,
            "progress {} -> {}",
            before.progress,
            after.progress
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn versions_rise_by_one_per_change_and_terminal_absorbs(calls in proptest::collection::vec(call_strategy(), 0..80)) {
        let mut book = book_with_tasks(3);
        for (i, event, cb) in calls {
            let id = format!("t{i}");
            let before = book.get(&id).unwrap().clone();
            let cb = cb.map(|c| format!("cb{c}"));
            let applied = book.apply(&id, event, cb.as_deref()).unwrap();
            let (changed, notify) = (applied.changed, applied.notify);
            let after = book.get(&id).unwrap();
            if changed {
                prop_assert_eq!(after.version, before.version + 1);
                prop_assert!(!before.state.is_terminal(), "a terminal task changed");
            } else {
                prop_assert_eq!(after, &before, "an unchanged outcome changed the task");
            }
            prop_assert_eq!(after.history().len() as u64, after.version);
            prop_assert_eq!(after.history().last().map_or(0, |e| e.version), after.version);
            prop_assert_eq!(notify, changed && after.state.is_terminal());
            assert_no_regression(before.view(), after.view());
        }
    }

    #[test]
    fn at_most_one_notification_per_task(
        calls in proptest::collection::vec(call_strategy(), 0..80),
        sweep in proptest::option::of(0.0..TTL * 2.0),
    ) {
        let mut book = book_with_tasks(3);
        let mut notes = Vec::new();
        for (n, (i, event, cb)) in calls.into_iter().enumerate() {
            let cb = cb.map(|c| format!("cb{c}"));
            book.apply(&format!("t{i}"), event, cb.as_deref()).unwrap();
            if n % 7 == 0 {
                notes.extend(book.drain_notifications());
            }
        }
        if let Some(now) = sweep {
            book.expire_due(now).unwrap();
            book.expire_due(now).unwrap();
        }
        notes.extend(book.drain_notifications());
        for i in 0..3 {
            let id = format!("t{i}");
            let count = notes.iter().filter(|n| n.task_id == id).count();
            let terminal = book.get(&id).unwrap().state.is_terminal();
            prop_assert_eq!(count, usize::from(terminal), "task {} has {} notifications", id, count);
        }
    }

    #[test]
    fn a_mirror_converges_and_never_regresses(
        events in proptest::collection::vec(event_strategy(), 1..60),
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), any::<proptest::sample::Index>(), 0u8..4), 0..60),
        retention in 0u64..10,
    ) {
        let mut book = Book::with_retention(retention);
        book.create(&CreateTask::new("t", 0.0, TTL, 3)).unwrap();
        // Every answer the server could have given at some point, to any
        // cursor: the material a network can duplicate, reorder, delay.
        let mut answers: Vec<ResumeAnswer> = Vec::new();
        for event in events {
            book.apply("t", event, None).unwrap();
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
        // Reconnect for real: resume, and take a snapshot when asked.
        for _ in 0..3 {
            let answer = book.resume("t", mirror.version()).unwrap();
            if mirror.merge(&answer).next == Next::Snapshot {
                let task = book.get("t").unwrap().view().clone();
                mirror.merge(&ResumeAnswer::Snapshot { task });
            }
        }
        prop_assert_eq!(mirror.task(), Some(book.get("t").unwrap().view()));
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

#[test]
fn mirror_persistence_round_trips_and_rejects_foreign_values() {
    use taskwire_wire::{from_json, to_json};
    let mut book = book_with_tasks(1);
    book.apply(
        "t0",
        Event::Start {
            at_ms: Millis::new(1.0, "a").unwrap(),
            worker: "w".into(),
            attempt: None,
            lease_ms: None,
            plan: None,
        },
        None,
    )
    .unwrap();
    let mirror = Mirror::from_snapshot(book.get("t0").unwrap().view().clone());
    let text = to_json(&mirror);
    assert_eq!(from_json::<Mirror>(&text, "mirror").unwrap(), mirror);
    let foreign = text.replacen("\"taskId\":\"t0\"", "\"taskId\":\"t9\"", 1);
    assert!(from_json::<Mirror>(&foreign, "mirror").is_err());
    assert!(from_json::<Mirror>("{\"taskId\":\"\"}", "mirror").is_err());
    assert_eq!(
        from_json::<Mirror>("{\"taskId\":\"x\",\"task\":null}", "mirror")
            .unwrap()
            .version(),
        0
    );
}

/// Random JSON values: scalars of every kind, including the awkward ones
/// (huge, negative, fractional numbers, blank strings), nested at random,
/// plus objects that look almost like the real shapes.
fn json_strategy() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        Just(json!(1152921504606846976u64)),
        Just(json!(-0.0)),
        "[ a-z\u{FEFF}]{0,8}".prop_map(Value::from),
        prop_oneof![
            Just("start"),
            Just("progress"),
            Just("succeed"),
            Just("fail"),
            Just("expire"),
            Just("delta"),
            Just("snapshot"),
            Just("caught-up"),
            Just("running")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        let keys = prop_oneof![
            Just("type"),
            Just("atMs"),
            Just("progress"),
            Just("cursor"),
            Just("worker"),
            Just("resultRef"),
            Just("resultHash"),
            Just("error"),
            Just("retryable"),
            Just("id"),
            Just("state"),
            Just("version"),
            Just("attempts"),
            Just("maxAttempts"),
            Just("expiresAtMs"),
            Just("history"),
            Just("event"),
            Just("mode"),
            Just("events"),
            Just("task"),
            Just("taskId"),
            Just("nowMs"),
            Just("ttlMs"),
            Just("x"),
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            proptest::collection::btree_map(keys, inner, 0..10).prop_map(|m| {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Nothing panics on any input: every parser answers Ok or an
    /// invalid-request error that names where the problem is.
    #[test]
    fn parsers_never_panic(value in json_strategy(), junk in ".{0,40}") {
        use taskwire_wire::from_json;
        use taskwire_core::{CreateTask, ErrorCode, Task};
        let text = value.to_string();
        for t in [text.as_str(), junk.as_str()] {
            macro_rules! check {
                ($ty:ty, $what:literal) => {
                    if let Err(e) = from_json::<$ty>(t, $what) {
                        prop_assert_eq!(e.code, ErrorCode::InvalidRequest);
                        prop_assert!(e.message.starts_with($what), "{}", e.message);
                    }
                };
            }
            check!(Event, "event");
            check!(Task, "task");
            check!(TaskView, "task");
            check!(ResumeAnswer, "answer");
            check!(Mirror, "mirror");
            check!(CreateTask, "input");
        }
        // Whatever parsed feeds the machinery without a panic.
        let mut book = book_with_tasks(1);
        if let Ok(event) = from_json::<Event>(&text, "event") {
            book.apply("t0", event, Some("cb")).unwrap();
        }
        if let Ok(answer) = from_json::<ResumeAnswer>(&text, "answer") {
            Mirror::new("t0").unwrap().merge(&answer);
        }
        if let Ok(input) = from_json::<CreateTask>(&text, "input") {
            let _ = book.create(&input);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The compact codec (taskwire-wire and core/src/json) agrees with serde_json, the
    /// reference: what it writes, serde_json reads as the same value, and
    /// what serde_json writes, it reads back to the same Rust value.
    #[test]
    fn codec_agrees_with_serde_json(
        events in proptest::collection::vec(event_strategy(), 1..30),
        odd in "[\"\\\\\u{0}-\u{1f}a-z\u{e9}\u{1F600}]{0,12}",
        fraction in 0.0f64..1e6,
    ) {
        use taskwire_wire::{from_json, to_json};
        use taskwire_core::Task;
        let mut book = book_with_tasks(1);
        let worker = odd.clone();
        book.apply("t0", Event::Start { at_ms: Millis::new(fraction, "a").unwrap(), worker, attempt: None, lease_ms: None, plan: None }, Some(&odd)).ok();
        for e in events {
            book.apply("t0", e, None).unwrap();
        }
        let task = book.get("t0").unwrap().clone();
        let ours = to_json(&task);
        let reference: serde_json::Value = serde_json::from_str(&ours).unwrap();
        prop_assert_eq!(&reference, &serde_json::to_value(&task).unwrap());
        let back: Task = from_json(&serde_json::to_string(&task).unwrap(), "task").unwrap();
        prop_assert_eq!(&back, &task);
        let answer = book.resume("t0", 0).unwrap();
        let back: ResumeAnswer = from_json(&serde_json::to_string(&answer).unwrap(), "answer").unwrap();
        prop_assert_eq!(back, answer);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    /// The codec's number parser (no lookup tables, see wire/src/
    /// number.rs) rounds exactly as Rust's (and JavaScript's) does.
    #[test]
    fn numbers_parse_exactly(
        negative in any::<bool>(),
        int in "(0|[1-9][0-9]{0,24})",
        frac in proptest::option::of("[0-9]{1,24}"),
        exp in proptest::option::of(-340i32..320),
        bits in any::<u64>(),
    ) {
        let mut text = String::new();
        if negative { text.push('-'); }
        text.push_str(&int);
        if let Some(f) = &frac { text.push('.'); text.push_str(f); }
        if let Some(e) = exp { text.push_str(&format!("e{e}")); }
        let std = text.parse::<f64>().unwrap();
        let ours = taskwire_wire::from_str::<f64>(&text);
        if std.is_finite() {
            prop_assert_eq!(ours.map(f64::to_bits).ok(), Some(std.to_bits()), "{}", text);
        } else {
            prop_assert!(ours.is_err(), "{} should overflow", text);
        }
        // Every finite double survives the trip through its shortest form.
        let v = f64::from_bits(bits);
        if v.is_finite() {
            let shortest = format!("{v:e}");
            let back = taskwire_wire::from_str::<f64>(&shortest).unwrap();
            prop_assert_eq!(back.to_bits(), v.to_bits(), "{}", shortest);
        }
    }
}

use super::*;
use crate::json::testing::{from_json, to_json};
use crate::ErrorCode;

fn input(id: &str, now_ms: f64, ttl_ms: f64, max_attempts: u64) -> CreateTask {
    CreateTask::new(id, now_ms, ttl_ms, max_attempts)
}

#[test]
fn creates_a_queued_task_at_version_zero() {
    let task = create_task(&input("t1", 0.0, 3_600_000.0, 3)).unwrap();
    assert_eq!(
        to_json(&task),
        r#"{"id":"t1","state":"queued","expiresAtMs":3600000,"attempts":0,"maxAttempts":3,"progress":0,"version":0,"history":[]}"#
    );
    assert_eq!(
        to_json(task.view()),
        r#"{"id":"t1","state":"queued","expiresAtMs":3600000,"attempts":0,"maxAttempts":3,"progress":0,"version":0}"#
    );
}

#[test]
fn every_create_error_names_its_field() {
    let cases = [
        (input(" \u{FEFF}", 0.0, 1.0, 1), "id:"),
        (input("t", -1.0, 1.0, 1), "nowMs:"),
        (input("t", f64::NAN, 1.0, 1), "nowMs:"),
        (input("t", 0.0, 0.0, 1), "ttlMs:"),
        (input("t", 0.0, f64::INFINITY, 1), "ttlMs:"),
        (input("t", 0.0, 1.0, 0), "maxAttempts:"),
        (input("t", 0.0, 1.0, MAX_SAFE_INTEGER + 1), "maxAttempts:"),
        (input("t", f64::MAX, f64::MAX, 1), "ttlMs:"),
    ];
    for (bad, field) in cases {
        let err = create_task(&bad).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidRequest);
        assert!(err.message.starts_with(field), "{}", err.message);
    }
}

#[test]
fn create_input_from_json_rejects_fractional_attempts() {
    let err = from_json::<CreateTask>(
        r#"{"id":"t","nowMs":0,"ttlMs":1,"maxAttempts":2.5}"#,
        "input",
    )
    .unwrap_err();
    assert!(
        err.message.starts_with("input.maxAttempts:"),
        "{}",
        err.message
    );
    let ok: CreateTask = from_json(
        r#"{"id":"t","nowMs":0,"ttlMs":1,"maxAttempts":2.0}"#,
        "input",
    )
    .unwrap();
    assert_eq!(ok.max_attempts, 2);
}

#[test]
fn a_task_round_trips_and_checks_its_history() {
    let json = r#"{"id":"t","state":"running","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":0,"version":1,"history":[{"version":1,"event":{"type":"start","atMs":1,"worker":"w"}}]}"#;
    let task: Task = from_json(json, "task").unwrap();
    assert_eq!(to_json(&task), json);

    let gap = json.replace(r#""version":1,"event""#, r#""version":2,"event""#);
    let err = from_json::<Task>(&gap, "task").unwrap_err();
    assert_eq!(err.message, "task.history[0].version: expected 1, got 2");

    let short = json.replace(r#""version":1,"history""#, r#""version":2,"history""#);
    let err = from_json::<Task>(&short, "task").unwrap_err();
    assert_eq!(
        err.message,
        "task.history: holds 1 entries but version is 2"
    );
}

#[test]
fn a_view_ignores_history_and_checks_invariants() {
    let view: TaskView = from_json(
        r#"{"id":"t","state":"queued","expiresAtMs":10,"attempts":0,"maxAttempts":1,"progress":0,"version":3,"history":"junk"}"#,
        "task",
    )
    .unwrap();
    assert_eq!(view.version, 3);

    for (json, prefix) in [
        (
            r#"{"id":"t","state":"running","expiresAtMs":10,"attempts":2,"maxAttempts":1,"progress":0,"version":3}"#,
            "task.attempts:",
        ),
        (
            r#"{"id":"t","state":"succeeded","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":100,"version":3}"#,
            "task.resultRef:",
        ),
        (
            r#"{"id":"t","state":"done","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":100,"version":3}"#,
            "task.state:",
        ),
        (
            r#"{"id":"t","state":"queued","expiresAtMs":10,"attempts":0,"maxAttempts":1,"progress":0,"version":3.5}"#,
            "task.version:",
        ),
        (
            r#"{"id":"","state":"queued","expiresAtMs":10,"attempts":0,"maxAttempts":1,"progress":0,"version":3}"#,
            "task.id:",
        ),
    ] {
        let err = from_json::<TaskView>(json, "task").unwrap_err();
        assert!(err.message.starts_with(prefix), "{}", err.message);
    }
}

#[test]
fn history_after_is_a_safe_slice() {
    let task = create_task(&input("t", 0.0, 1.0, 1)).unwrap();
    assert!(task.history_after(0).is_empty());
    assert!(task.history_after(u64::MAX).is_empty());
}

#[test]
fn lifecycle_options_are_checked_and_left_out_when_default() {
    let mut with = input("t", 100.0, 1000.0, 2);
    with.deadline_ms = Some(50.0);
    with.unknown_grace_ms = Some(0.0);
    with.auto_requeue = false;
    let task = create_task(&with).unwrap();
    assert_eq!(task.deadline_at_ms, Some(150.0));
    assert_eq!(
        task.unknown_grace_ms, None,
        "opting out keeps no grace period"
    );
    assert_eq!(
        to_json(task.view()),
        r#"{"id":"t","state":"queued","expiresAtMs":1100,"attempts":0,"maxAttempts":2,"progress":0,"version":0,"deadlineAtMs":150}"#
    );
    let back: TaskView = from_json(&to_json(task.view()), "task").unwrap();
    assert_eq!(&back, task.view());

    let bad = |f: &dyn Fn(&mut CreateTask)| {
        let mut i = input("t", 0.0, 10.0, 1);
        f(&mut i);
        create_task(&i).unwrap_err().message
    };
    assert!(
        bad(&|i| i.deadline_ms = Some(0.0)).starts_with("deadlineMs: must be a finite number > 0")
    );
    assert!(bad(&|i| i.deadline_ms = Some(f64::NAN)).starts_with("deadlineMs:"));
    assert!(bad(&|i| {
        i.now_ms = f64::MAX;
        i.ttl_ms = 1.0;
        i.deadline_ms = Some(f64::MAX);
    })
    .starts_with("deadlineMs: nowMs + deadlineMs must be a finite number"));
    assert!(bad(&|i| i.unknown_grace_ms = Some(-1.0)).starts_with("unknownGraceMs:"));

    let parsed: CreateTask = from_json(
        r#"{"id":"t","nowMs":0,"ttlMs":1,"maxAttempts":1,"deadlineMs":5,"autoRequeue":false}"#,
        "input",
    )
    .unwrap();
    assert_eq!(
        (parsed.deadline_ms, parsed.auto_requeue),
        (Some(5.0), false)
    );
    let err = from_json::<CreateTask>(
        r#"{"id":"t","nowMs":0,"ttlMs":1,"maxAttempts":1,"autoRequeue":"no"}"#,
        "input",
    )
    .unwrap_err();
    assert!(
        err.message.starts_with("input.autoRequeue:"),
        "{}",
        err.message
    );
}

#[test]
fn new_states_need_their_fields() {
    let base =
        r#"{"id":"t","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":0,"version":2"#;
    for (rest, prefix) in [
        (
            r#","state":"unknown","deadlineAtMs":-1}"#,
            "task.deadlineAtMs:",
        ),
        (
            r#","state":"queued","attempts":2,"continuations":0}"#,
            "task.attempts:",
        ),
        (
            r#","state":"queued","decision":"yes","decisionVersion":1}"#,
            "task.decision:",
        ),
    ] {
        let json = format!("{base}{rest}");
        let err = from_json::<TaskView>(&json, "task").unwrap_err();
        assert!(err.message.starts_with(prefix), "{json}: {}", err.message);
    }
    // Continuations raise the allowed attempts.
    let ok = format!(r#"{base},"state":"queued","attempts":2,"continuations":1}}"#);
    assert_eq!(
        from_json::<TaskView>(&ok, "task")
            .unwrap()
            .allowed_attempts(),
        2
    );
}

#[test]
fn a_task_keeps_its_lease_on_the_wire() {
    let json = r#"{"id":"t","state":"running","expiresAtMs":10,"attempts":1,"maxAttempts":1,"progress":0,"version":1,"lease":{"attempt":1,"expiresAtMs":8,"leaseMs":5},"history":[{"version":1,"event":{"type":"start","atMs":3,"worker":"w","attempt":1,"leaseMs":5}}]}"#;
    let task: Task = from_json(json, "task").unwrap();
    assert_eq!(task.lease().map(|l| l.expires_at_ms.get()), Some(8.0));
    assert_eq!(to_json(&task), json);
    // The view never carries it: two views at one version are equal.
    assert!(!to_json(task.view()).contains("lease"));
}

use super::*;
use crate::json::testing::from_json;
use crate::task::{create_task, CreateTask, Task};
use alloc::string::ToString;

fn ms(v: f64) -> Millis {
    Millis::new(v, "t").unwrap()
}

fn task(max_attempts: u64) -> Task {
    create_task(&CreateTask::new("t", 0.0, 100_000.0, max_attempts)).unwrap()
}

fn start(attempt: u64) -> Event {
    Event::Start {
        at_ms: ms(10.0),
        worker: "w".to_string(),
        attempt: Some(attempt),
        lease_ms: Some(ms(1_000.0)),
        #[cfg(feature = "steps")]
        plan: None,
    }
}

fn heartbeat(attempt: u64) -> Event {
    Event::Heartbeat {
        at_ms: ms(20.0),
        attempt: Some(attempt),
        lease_ms: None,
    }
}

fn directive(task: &mut Task, event: Event) -> (Reason, Directive) {
    let outcome = task.apply(event.clone());
    (
        outcome.reason,
        Directive::after(event.attempt(), &outcome, task.view()),
    )
}

#[test]
fn the_current_attempt_continues_and_a_replaced_one_stops() {
    let mut t = task(2);
    assert_eq!(
        directive(&mut t, start(1)),
        (Reason::Started, Directive::Continue)
    );
    assert_eq!(
        directive(&mut t, heartbeat(1)),
        (Reason::Heartbeat, Directive::Continue)
    );
    let fail = Event::Fail {
        at_ms: ms(30.0),
        error: "quota".to_string(),
        retryable: true,
        attempt: Some(1),
    };
    // The attempt ended (re-queued): stop, though nothing was refused.
    assert_eq!(directive(&mut t, fail), (Reason::Requeued, Directive::Stop));
    assert_eq!(
        directive(&mut t, start(2)),
        (Reason::Started, Directive::Continue)
    );
    assert_eq!(
        directive(&mut t, heartbeat(1)),
        (Reason::StaleAttempt, Directive::Stop)
    );
}

#[test]
fn a_report_before_its_start_is_not_started_and_stops() {
    let mut t = task(2);
    assert_eq!(
        directive(&mut t, heartbeat(1)),
        (Reason::NotStarted, Directive::Stop)
    );
    // Not the next attempt: replaced (or confused), not early.
    assert_eq!(
        directive(&mut t, heartbeat(2)),
        (Reason::StaleAttempt, Directive::Stop)
    );
    // Seed 000's events, without attempt, keep their reason.
    let plain = Event::Heartbeat {
        at_ms: ms(20.0),
        attempt: None,
        lease_ms: None,
    };
    assert_eq!(
        directive(&mut t, plain),
        (Reason::NotRunning, Directive::Stop)
    );
    assert_eq!(t.view().version, 0, "nothing changed");
}

#[test]
fn a_cancel_asks_the_worker_to_cancel() {
    let mut t = task(1);
    directive(&mut t, start(1));
    t.apply(Event::Cancel {
        at_ms: ms(15.0),
        reason: None,
        actor: None,
    });
    assert_eq!(
        directive(&mut t, heartbeat(1)),
        (Reason::Heartbeat, Directive::Cancel)
    );
    let cannot = Event::CannotCancel {
        at_ms: ms(25.0),
        reason: None,
        attempt: Some(1),
    };
    assert_eq!(directive(&mut t, cannot).1, Directive::Continue);
}

#[test]
fn a_lease_counts_from_the_time_the_server_received_the_report() {
    let mut view = task(1).view().clone();
    // The worker's clock says 10; the server received it at 500_000.
    let step = view.step_received(None, &start(1), Some(ms(500_000.0)));
    let crate::LeaseChange::Set(lease) = step.lease else {
        panic!("a start with leaseMs opens a lease: {:?}", step.lease);
    };
    assert_eq!(lease.expires_at_ms.get(), 501_000.0);
    // The history records the event as sent.
    assert_eq!(step.entry.unwrap().event, start(1));
    // Without a received time, the seed's rule: from atMs.
    let mut view = task(1).view().clone();
    let crate::LeaseChange::Set(lease) = view.step_with(None, &start(1)).lease else {
        panic!("no lease");
    };
    assert_eq!(lease.expires_at_ms.get(), 1_010.0);
}

#[test]
fn reports_far_from_the_servers_clock_are_refused_when_they_carry_an_attempt() {
    let now = ms(1_000_000.0);
    let at = |t: f64| Event::Heartbeat {
        at_ms: ms(t),
        attempt: Some(1),
        lease_ms: None,
    };
    assert!(check_report_clock(&at(1_000_000.0 - 300_000.0), now).is_ok());
    let err = check_report_clock(&at(1_000_000.0 + 300_001.0), now).unwrap_err();
    assert_eq!(err.code, ErrorCode::ClockSkew);
    assert!(
        err.message.starts_with("atMs: 300001 ms ahead of"),
        "{}",
        err.message
    );
    let err = check_report_clock(&at(1_000.0), now).unwrap_err();
    assert!(
        err.message.starts_with("atMs: 999000 ms behind"),
        "{}",
        err.message
    );
    // Seed 000's executors send no attempt: not checked.
    let plain = Event::Heartbeat {
        at_ms: ms(1.0),
        attempt: None,
        lease_ms: None,
    };
    assert!(check_report_clock(&plain, now).is_ok());
}

#[test]
fn a_claim_takes_queued_tasks_before_their_ttl_and_deadline() {
    let mut t = task(2);
    assert!(claimable(t.view(), ms(5.0)));
    assert!(!claimable(t.view(), ms(100_000.0)), "at the TTL");
    let worker = NonBlank::new("w", "worker").unwrap();
    let event = claim_start(t.view(), &worker, ms(30_000.0), ms(7.0));
    assert_eq!(event.attempt(), Some(1));
    t.apply(event);
    assert!(!claimable(t.view(), ms(8.0)), "running");
}

#[test]
fn claim_bodies_are_validated_field_by_field() {
    let read = |text: &str| from_json::<ClaimRequest>(text, "claim");
    let ok = read(r#"{"worker":"w","kinds":["summary",""]}"#).unwrap();
    assert_eq!((ok.max, ok.wait_ms, ok.lease_ms.get()), (1, 0, 30_000.0));
    for (body, field) in [
        (r#"{"kinds":["a"]}"#, "worker"),
        (r#"{"worker":"  ","kinds":["a"]}"#, "worker"),
        (r#"{"worker":"w","kinds":[]}"#, "kinds"),
        (r#"{"worker":"w","kinds":[1]}"#, "kinds[0]"),
        (r#"{"worker":"w","kinds":["a"],"max":0}"#, "max"),
        (r#"{"worker":"w","kinds":["a"],"max":101}"#, "max"),
        (r#"{"worker":"w","kinds":["a"],"waitMs":30001}"#, "waitMs"),
        (r#"{"worker":"w","kinds":["a"],"leaseMs":999}"#, "leaseMs"),
        (r#"{"worker":"w","kinds":["a"],"leaseMs":1.5}"#, "leaseMs"),
        (
            r#"{"worker":"w","kinds":["a"],"workflowVersions":[" "]}"#,
            "workflowVersions[0]",
        ),
        (
            r#"{"worker":"w","kinds":["a"],"workflowVersions":"v1"}"#,
            "workflowVersions",
        ),
    ] {
        let err = read(body).unwrap_err();
        let named = alloc::format!("claim.{field}");
        assert!(err.message.starts_with(&named), "{body}: {}", err.message);
    }
}

#[test]
fn a_worker_naming_its_workflow_versions_runs_only_theirs_and_tasks_without_a_plan() {
    let read = |text: &str| from_json::<ClaimRequest>(text, "claim");
    let named = read(r#"{"worker":"w","kinds":["a"],"workflowVersions":["v2","v3"]}"#).unwrap();
    assert_eq!(named.workflow_versions, ["v2", "v3"]);
    assert!(read(r#"{"worker":"w","kinds":["a"]}"#)
        .unwrap()
        .workflow_versions
        .is_empty());
    let many = alloc::format!(
        r#"{{"worker":"w","kinds":["a"],"workflowVersions":[{}]}}"#,
        (0..17)
            .map(|i| alloc::format!("\"v{i}\""))
            .collect::<Vec<_>>()
            .join(",")
    );
    assert!(read(&many)
        .unwrap_err()
        .message
        .starts_with("claim.workflowVersions"));
    let planned = |version: &str| {
        create_task(&CreateTask {
            workflow_version: Some(version.into()),
            steps: Some(alloc::vec!["a".into()]),
            ..CreateTask::new("t", 0.0, 1e6, 1)
        })
        .unwrap()
    };
    let versions = ["v2".to_string(), "v3".to_string()];
    assert!(runs_workflow(planned("v2").view(), &versions));
    assert!(
        !runs_workflow(planned("v1").view(), &versions),
        "an older task waits for its own workers"
    );
    assert!(
        runs_workflow(planned("v1").view(), &[]),
        "a worker that names none runs any"
    );
    let bare = create_task(&CreateTask::new("t", 0.0, 1e6, 1)).unwrap();
    assert!(
        runs_workflow(bare.view(), &versions),
        "a task without a plan is anyone's"
    );
}

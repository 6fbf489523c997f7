use taskwire_core::{create_task, CreateTask, Event, Millis};
use taskwire_wire::from_json;

use super::*;

fn record() -> TaskRecord {
    let task = create_task(&CreateTask {
        unknown_grace_ms: Some(100.0),
        ..CreateTask::new("t1", 0.0, 1e9, 2)
    })
    .expect("a task");
    TaskRecord {
        tenant: "acme".into(),
        view: task.view().clone(),
        kind: None,
        input: None,
        lease: None,
        batch: None,
    }
}

fn event(json: &str) -> Event {
    from_json(json, "event").expect("an event")
}

#[test]
fn a_heartbeat_writes_the_lease_alone_and_a_start_both() {
    let mut r = record();
    let started = judge_event(
        &mut r,
        &event(r#"{"type":"start","atMs":10,"worker":"w","attempt":1,"leaseMs":50}"#),
        None,
    );
    assert!(started.write);
    assert_eq!(started.appended.len(), 1);
    assert_eq!(due_column(&r), Some(60.0));
    let beat = judge_event(
        &mut r,
        &event(r#"{"type":"heartbeat","atMs":30,"attempt":1}"#),
        None,
    );
    assert!(beat.write, "the lease moved");
    assert!(beat.appended.is_empty(), "no version for a heartbeat");
    assert_eq!(due_column(&r), Some(80.0));
    assert_eq!(
        parse_lease(lease_column(&r).as_deref()).unwrap(),
        r.lease,
        "the column round-trips"
    );
    // The same heartbeat again: the lease cannot shrink, nothing to write.
    let again = judge_event(
        &mut r,
        &event(r#"{"type":"heartbeat","atMs":30,"attempt":1}"#),
        None,
    );
    assert!(!again.write);
}

#[test]
fn a_sweep_runs_every_due_step_in_order() {
    let mut r = record();
    judge_event(
        &mut r,
        &event(r#"{"type":"start","atMs":10,"worker":"w","attempt":1,"leaseMs":50}"#),
        None,
    );
    // At 500 the lease (60) and the grace period (160) are both over.
    let swept = judge_sweep(&mut r, Millis::new(500.0, "now").unwrap());
    let kinds: Vec<&str> = swept
        .appended
        .iter()
        .map(|a| a.entry.event.kind().as_str())
        .collect();
    assert_eq!(kinds, ["lapse", "abandon"]);
    assert_eq!(r.view.state.as_str(), "queued");
    assert_eq!(r.lease, None, "the abandoned attempt's lease is gone");
    assert_eq!(due_column(&r), None);
    let nothing = judge_sweep(&mut r, Millis::new(500.0, "now").unwrap());
    assert!(!nothing.write);
}

#[test]
fn a_bad_lease_column_names_itself() {
    let e = parse_lease(Some("{\"attempt\":1}")).unwrap_err();
    assert!(e.to_string().contains("tasks.lease"), "{e}");
}

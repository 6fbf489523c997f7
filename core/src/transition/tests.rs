use super::*;
use crate::lease::LeaseChange;
use crate::task::{create_task, CreateTask};
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

//! Unit tests of the PostgreSQL store's pure parts: URL redaction, lock
//! ids, and the NOTIFY payloads (what a commit sends, what a listener of
//! this version or an older one reads of it).

use std::collections::{BTreeMap, HashMap};

use taskwire_core::{create_task, CreateTask, Event, Millis};

use super::batch::notify_payloads;
use super::listen::{parse_payload, Heard};
use super::redact;
use super::writer::lock_id;
use crate::hub::Change;

#[test]
fn urls_are_redacted() {
    assert_eq!(
        redact("postgres://u:secret@h:5432/db"),
        "postgres://u:***@h:5432/db"
    );
    assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
}

#[test]
fn lock_ids_keep_the_parts_apart() {
    assert_ne!(lock_id(&["a", "bc"]), lock_id(&["ab", "c"]));
}

#[test]
fn payloads_round_trip_and_split() {
    let mut heard = Heard::default();
    parse_payload("3 tsk_a\n5 tsk b\nbad\n", &mut heard);
    parse_payload("2 tsk_a\n", &mut heard);
    assert_eq!(heard.tasks["tsk_a"], 3);
    assert_eq!(heard.tasks["tsk b"], 5);
    assert!(heard.batches.is_empty());
    // The sender's line (`i <instance>`, hub/work.rs) names no task, for
    // this parser and for the one before batches.
    let mut heard = Heard::default();
    parse_payload("i 00ff00ff00ff00ff\n4 tsk_c\n", &mut heard);
    assert_eq!(heard.tasks.len(), 1);
    let mut old = HashMap::new();
    parse_payload_before_batches("i 00ff00ff00ff00ff\n4 tsk_c\n", &mut old);
    assert_eq!(old.len(), 1);
}

/// The parser of servers before batches, verbatim: what an older instance
/// on the same database makes of this version's payloads.
fn parse_payload_before_batches(payload: &str, into: &mut HashMap<String, u64>) {
    for line in payload.lines() {
        let Some((version, id)) = line.split_once(' ') else {
            continue;
        };
        let Ok(version) = version.parse::<u64>() else {
            continue;
        };
        let v = into.entry(id.to_string()).or_insert(0);
        *v = (*v).max(version);
    }
}

fn changes(ids: &[String]) -> Vec<Change> {
    ids.iter()
        .map(|id| {
            let mut view = create_task(&CreateTask::new(id, 0.0, 1e9, 1))
                .unwrap()
                .view()
                .clone();
            let event = Event::Start {
                at_ms: Millis::new(1.0, "atMs").unwrap(),
                worker: "w".into(),
                attempt: None,
                lease_ms: None,
                plan: None,
            };
            let entry = view.step(&event).entry.unwrap();
            Change {
                view,
                entry,
                batch: None,
            }
        })
        .collect()
}

#[test]
fn batch_lines_are_heard_here_and_skipped_by_older_servers() {
    let tasks: Vec<String> = (0..3).map(|i| format!("tsk_{i}")).collect();
    let marks = BTreeMap::from([("bat_x".to_string(), 7), ("bat_y".to_string(), 2)]);
    let payloads = notify_payloads(&changes(&tasks), &marks);
    assert_eq!(payloads.len(), 1);
    assert!(
        payloads[0].ends_with("b 7 bat_x\nb 2 bat_y\n"),
        "{payloads:?}"
    );
    let mut heard = Heard::default();
    parse_payload(&payloads[0], &mut heard);
    assert_eq!(
        heard.batches,
        HashMap::from([("bat_x".into(), 7), ("bat_y".into(), 2)])
    );
    assert_eq!(heard.tasks.len(), 3);
    let mut old = HashMap::new();
    parse_payload_before_batches(&payloads[0], &mut old);
    assert_eq!(
        old, heard.tasks,
        "an older server reads the task lines only"
    );
}

#[test]
fn many_lines_split_under_the_payload_limit() {
    let tasks: Vec<String> = (0..300).map(|i| format!("tsk_{i:032}")).collect();
    let marks: BTreeMap<String, u64> = (0..300)
        .map(|i| (format!("bat_{i:032}"), u64::MAX - i))
        .collect();
    let payloads = notify_payloads(&changes(&tasks), &marks);
    assert!(payloads.len() > 1);
    let mut heard = Heard::default();
    for p in &payloads {
        assert!(p.len() < 8_000, "{}", p.len());
        parse_payload(p, &mut heard);
    }
    assert_eq!(heard.tasks.len(), 300);
    assert_eq!(heard.batches.len(), 300);
    assert_eq!(heard.batches[&format!("bat_{:032}", 5)], u64::MAX - 5);
}

//! The shared vectors (tests/vectors/ at the repository's root) that pin
//! `next`: every answer they expect is read by this crate's reader and
//! moves the job as PROTOCOL.md §Workers says, so the server and the
//! worker cannot drift (the Python library runs the same check).

use std::path::Path;

use serde_json::Value;

use crate::report::{signal_for, Kind, StopReason};
use crate::wire::read_reply;

/// The report kind of an event type, as the worker sends it.
fn kind_of(event_type: &str) -> Kind {
    match event_type {
        "start" | "progress" | "heartbeat" => Kind::Renewing,
        "cannot_cancel" => Kind::Note,
        _ => Kind::Last,
    }
}

#[test]
fn every_next_the_vectors_expect_moves_the_job_as_the_protocol_says() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut seen = std::collections::BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|f| f.path().extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort_by_key(|f| f.path());
    for file in files {
        let vector: Value =
            serde_json::from_str(&std::fs::read_to_string(file.path()).unwrap()).unwrap();
        let steps = vector["steps"].as_array().cloned().unwrap_or_default();
        for (i, step) in steps.iter().enumerate() {
            let expect = &step["expect"];
            if step["op"] != "apply" || expect.get("next").is_none() {
                continue;
            }
            let at = format!("{}, step {i}", file.path().display());
            let next = read_reply(&expect.to_string())
                .unwrap_or_else(|e| panic!("{at}: {e}"))
                .next;
            seen.insert(next.as_str());
            let event_type = step["event"]["type"].as_str().unwrap();
            let fired = signal_for(kind_of(event_type), next);
            let want = match (next.as_str(), kind_of(event_type)) {
                ("continue", _) => None,
                (_, Kind::Last) => None,
                ("cancel", _) => Some(StopReason::Cancel),
                _ => Some(StopReason::Stop),
            };
            assert_eq!(fired, want, "{at}: {event_type} answered {expect}");
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["cancel", "continue", "stop"],
        "the vectors pin every value of next"
    );
}

/// Every step report the vectors judge: the worker reads it as refused
/// exactly when the step was not recorded (nor already so), whatever
/// `next` says (PROTOCOL.md §Steps; `taskwire_core::work::report_taken`).
#[test]
fn every_step_report_the_vectors_refuse_is_read_as_refused() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
    let mut refused = std::collections::BTreeSet::new();
    for file in std::fs::read_dir(&dir).unwrap().flatten() {
        let Some(name) = file.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !name.starts_with("steps-") {
            continue;
        }
        let vector: Value =
            serde_json::from_str(&std::fs::read_to_string(file.path()).unwrap()).unwrap();
        for step in vector["steps"].as_array().cloned().unwrap_or_default() {
            let mut answer = step["expect"].clone();
            if step["event"]["type"] != "step" || answer.get("reason").is_none() {
                continue;
            }
            // A refused step report keeps its attempt alive: `continue`.
            answer["next"] = Value::from("continue");
            let reply = read_reply(&answer.to_string()).unwrap();
            let reason = answer["reason"].as_str().unwrap().to_string();
            let recorded = matches!(reason.as_str(), "step-recorded" | "duplicate-step");
            assert_eq!(reply.refused.is_none(), recorded, "{name}: {answer}");
            if let Some(why) = reply.refused {
                assert_eq!(why, reason);
                refused.insert(why);
            }
        }
    }
    for reason in ["no-plan", "step-conflict", "unknown-step"] {
        assert!(
            refused.contains(reason),
            "the vectors refuse a step with {reason}"
        );
    }
}

//! The page's writers (`ToJson`, in core) write what the serde writer
//! (this crate's `to_json`) writes, byte for byte, for every type the
//! page emits.

use taskwire_core::json::{object, write};
use taskwire_core::{Event, Mirror, ResumeAnswer, TaskView};
use taskwire_wire::{from_json, to_json};

#[test]
fn writes_what_serde_writes() {
    let events = [
        r#"{"type":"start","atMs":1.5,"worker":"w \"1\"\n"}"#,
        r#"{"type":"progress","atMs":2,"progress":40,"cursor":"é😀"}"#,
        r#"{"type":"fail","atMs":3e-7,"error":"quota","retryable":true}"#,
        r#"{"type":"start","atMs":4,"worker":"w2"}"#,
        r#"{"type":"succeed","atMs":9007199254740993,"resultRef":"r","resultHash":"h"}"#,
    ];
    let mut mirror = Mirror::new("t").unwrap();
    let view = |v: u64, state: &str, extra: &str| {
        format!(
            r#"{{"id":"t","state":"{state}","expiresAtMs":1e15,"attempts":1,"maxAttempts":3,"progress":0,"version":{v}{extra}}}"#
        )
    };
    let entries: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(i, e)| format!(r#"{{"version":{},"event":{e}}}"#, i + 1))
        .collect();
    let answers = [
        format!(
            r#"{{"mode":"delta","events":[{}],"task":{}}}"#,
            entries[..2].join(","),
            view(2, "running", "").replace(r#""progress":0"#, r#""progress":40"#)
        ),
        format!(
            r#"{{"mode":"snapshot","events":[],"task":{}}}"#,
            view(1, "running", "")
        ),
        format!(r#"{{"mode":"delta","events":[{}]}}"#, entries[3]),
        format!(
            r#"{{"mode":"caught-up","events":[],"task":{}}}"#,
            view(3, "queued", r#","error":"quota""#)
        ),
    ];
    for text in &answers {
        let answer: ResumeAnswer = from_json(text, "answer").unwrap();
        let outcome = mirror.merge(&answer);
        assert_eq!(write(&outcome), to_json(&outcome), "{text}");
        assert_eq!(write(&mirror), to_json(&mirror));
        assert_eq!(write(answer.events()), to_json(answer.events()));
        assert_eq!(write(&answer.task()), to_json(&answer.task()));
    }
    for e in events {
        let event: Event = from_json(e, "event").unwrap();
        assert_eq!(write(&event), to_json(&event), "{e}");
    }
    assert_eq!(object(&[("task", &None::<TaskView>)]), r#"{"task":null}"#);
}

/// The lifecycle's events and fields (issue 11) reach the page through
/// this writer too: it must agree with serde on every one.
#[test]
fn writes_the_lifecycle_as_serde_writes_it() {
    for e in [
        r#"{"type":"start","atMs":1,"worker":"w","attempt":2,"leaseMs":30000.5}"#,
        r#"{"type":"progress","atMs":1,"progress":5,"cursor":"","attempt":2}"#,
        r#"{"type":"succeed","atMs":1,"resultRef":"r","resultHash":"h","attempt":2}"#,
        r#"{"type":"fail","atMs":1,"error":"e","retryable":false,"attempt":2}"#,
        r#"{"type":"heartbeat","atMs":1}"#,
        r#"{"type":"heartbeat","atMs":1,"attempt":3,"leaseMs":0.5}"#,
        r#"{"type":"hold","atMs":1,"artifactRef":"a","artifactHash":"h","question":"ok?","attempt":1}"#,
        r#"{"type":"hold","atMs":1,"artifactRef":"a","artifactHash":"h"}"#,
        r#"{"type":"ack_cancel","atMs":1,"attempt":1}"#,
        r#"{"type":"cannot_cancel","atMs":1,"reason":"remote job","attempt":1}"#,
        r#"{"type":"lapse","atMs":1,"attempt":1}"#,
        r#"{"type":"abandon","atMs":1}"#,
        r#"{"type":"timeout","atMs":1}"#,
        r#"{"type":"cancel","atMs":1,"reason":"not needed","actor":"user:ann"}"#,
        r#"{"type":"decide","atMs":1,"decision":"request_changes","artifactHash":"h","version":4,"reason":"shorter","actor":"user:bo"}"#,
        r#"{"type":"decide","atMs":1,"decision":"approve","artifactHash":"h","version":0}"#,
    ] {
        let event: Event = from_json(e, "event").unwrap();
        assert_eq!(write(&event), e);
        assert_eq!(to_json(&event), e);
    }
    let view = r#"{"id":"t","state":"waiting_approval","expiresAtMs":1e15,"attempts":2,"maxAttempts":1,"progress":40,"version":7,"error":"e","deadlineAtMs":90000.5,"unknownGraceMs":30000,"continuations":1,"artifactRef":"a","artifactHash":"h","question":"ok?","decision":"request_changes","decisionVersion":4,"decisionReason":"shorter"}"#;
    let task: TaskView = from_json(view, "task").unwrap();
    assert_eq!(write(&task), to_json(&task));
    assert!(write(&task).contains(r#""decisionReason":"shorter""#));
}

#[test]
fn times_encode_like_json_stringify() {
    use serde::{Serialize, Serializer};
    struct M(f64);
    impl Serialize for M {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            taskwire_core::value::ms::serialize(&self.0, s)
        }
    }
    let enc = |v: f64| to_json(&M(v));
    assert_eq!(enc(1200.0), "1200");
    assert_eq!(enc(-0.0), "0");
    assert_eq!(enc(0.5), "0.5");
    assert_eq!(enc(1e300), "1e300"); // JSON.stringify: 1e+300, same value
}

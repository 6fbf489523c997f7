use super::*;
use crate::json::testing::from_json;
use crate::Error;

fn parse(json: &str) -> Result<Event, Error> {
    from_json(json, "event")
}

#[test]
fn round_trips_every_kind() {
    let all = [
        r#"{"type":"start","atMs":1200,"worker":"w1"}"#,
        r#"{"type":"progress","atMs":6400,"progress":25,"cursor":"c"}"#,
        r#"{"type":"succeed","atMs":24300,"resultRef":"r","resultHash":"sha256:ab12"}"#,
        r#"{"type":"fail","atMs":5,"error":"quota","retryable":true}"#,
        r#"{"type":"expire","atMs":0.5}"#,
        r#"{"type":"start","atMs":1,"worker":"w","attempt":2,"leaseMs":30000}"#,
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
        r#"{"type":"cancel","atMs":1}"#,
        r#"{"type":"cancel","atMs":1,"reason":"not needed","actor":"user:ann"}"#,
        r#"{"type":"decide","atMs":1,"decision":"request_changes","artifactHash":"h","version":4,"reason":"shorter","actor":"user:bo"}"#,
        r#"{"type":"decide","atMs":1,"decision":"approve","artifactHash":"h","version":0}"#,
    ];
    #[cfg(feature = "steps")]
    let steps = [
        r#"{"type":"start","atMs":1,"worker":"w","attempt":1,"leaseMs":30000,"workflowVersion":"v1","steps":["load","classify"]}"#,
        r#"{"type":"step","atMs":1,"name":"load","status":"running","label":"1/2: loading","attempt":1}"#,
        r#"{"type":"step","atMs":1,"name":"load","status":"succeeded","usage":{"tokens":5,"costCents":1,"toolCalls":0},"outputRef":"o","outputHash":"h"}"#,
        r#"{"type":"reserve","atMs":1,"reservation":"1:draft","step":"load","tokens":800,"costCents":4,"attempt":1}"#,
        r#"{"type":"reserve","atMs":1,"reservation":"r","tokens":0,"costCents":2}"#,
        r#"{"type":"settle","atMs":1,"reservation":"1:draft","tokens":640,"costCents":3,"toolCalls":1,"attempt":1}"#,
        r#"{"type":"effect","atMs":1,"step":"publish","action":"post-report","resourceId":"REP-7","attempt":1}"#,
        r#"{"type":"exhaust","atMs":1,"resultRef":"s3://partial","resultHash":"h","attempt":1}"#,
        r#"{"type":"exhaust","atMs":1}"#,
    ];
    #[cfg(not(feature = "steps"))]
    let steps: [&str; 0] = [];
    let mut kinds = std::collections::HashSet::new();
    for json in all.into_iter().chain(steps) {
        let event = parse(json).unwrap();
        kinds.insert(event.kind());
        assert_eq!(serde_json::to_string(&event).unwrap(), json);
        assert_eq!(crate::json::testing::to_json(&event), json);
    }
    assert_eq!(kinds.len(), EventKind::ALL.len(), "every kind is covered");
}

#[test]
fn names_the_missing_field() {
    let err = parse(r#"{"type":"fail","atMs":5,"error":"x"}"#).unwrap_err();
    assert_eq!(err.message, "event.retryable: required for a fail event");
    let err = parse(r#"{"type":"start","worker":"w"}"#).unwrap_err();
    assert_eq!(err.message, "event.atMs: required for a start event");
    let err = parse(r#"{"type":"hold","atMs":1,"artifactRef":"a"}"#).unwrap_err();
    assert_eq!(err.message, "event.artifactHash: required for a hold event");
    let err =
        parse(r#"{"type":"decide","atMs":1,"decision":"approve","artifactHash":"h"}"#).unwrap_err();
    assert_eq!(err.message, "event.version: required for a decide event");
    let err = parse(r#"{"type":"decide","atMs":1,"artifactHash":"h","version":1}"#).unwrap_err();
    assert_eq!(err.message, "event.decision: required for a decide event");
}

#[test]
fn names_the_bad_field() {
    let cases = [
        (r#"{"type":"start","atMs":-1,"worker":"w"}"#, "event.atMs:"),
        (r#"{"type":"start","atMs":"1","worker":"w"}"#, "event.atMs:"),
        (
            r#"{"type":"progress","atMs":1,"progress":25.5,"cursor":"c"}"#,
            "event.progress:",
        ),
        (
            r#"{"type":"progress","atMs":1,"progress":101,"cursor":"c"}"#,
            "event.progress:",
        ),
        (
            r#"{"type":"succeed","atMs":1,"resultRef":" ","resultHash":"h"}"#,
            "event.resultRef:",
        ),
        (
            r#"{"type":"fail","atMs":1,"error":"e","retryable":"yes"}"#,
            "event.retryable:",
        ),
        (r#"{"type":"launch","atMs":1}"#, "event.type: unknown value"),
        (r#"{"atMs":1}"#, "event.type: required"),
        (r#"[]"#, "event: expected an object, got an array"),
        (r#"null"#, "event: expected an object, got null"),
        (
            r#"{"type":"start","atMs":1,"worker":"w","attempt":0}"#,
            "event.attempt: must be an integer from 1",
        ),
        (
            r#"{"type":"succeed","atMs":1,"resultRef":"r","resultHash":"h","attempt":1.5}"#,
            "event.attempt:",
        ),
        (
            r#"{"type":"heartbeat","atMs":1,"attempt":"1"}"#,
            "event.attempt: expected a number",
        ),
        (
            r#"{"type":"heartbeat","atMs":1,"leaseMs":0}"#,
            "event.leaseMs: must be a finite number > 0",
        ),
        (
            r#"{"type":"start","atMs":1,"worker":"w","leaseMs":-5}"#,
            "event.leaseMs:",
        ),
        (
            r#"{"type":"hold","atMs":1,"artifactRef":"a","artifactHash":"\t"}"#,
            "event.artifactHash: must not be blank",
        ),
        (
            r#"{"type":"hold","atMs":1,"artifactRef":"a","artifactHash":"h","question":7}"#,
            "event.question: expected a string",
        ),
        (
            r#"{"type":"cancel","atMs":1,"actor":" "}"#,
            "event.actor: must not be blank",
        ),
        (
            r#"{"type":"cancel","atMs":1,"reason":false}"#,
            "event.reason: expected a string",
        ),
        (
            r#"{"type":"decide","atMs":1,"decision":"maybe","artifactHash":"h","version":1}"#,
            "event.decision: unknown value \"maybe\", expected one of approve, request_changes, reject",
        ),
        (
            r#"{"type":"decide","atMs":1,"decision":"reject","artifactHash":"h","version":-1}"#,
            "event.version:",
        ),
        (
            r#"{"type":"cannot_cancel","atMs":1,"attempt":9007199254740992}"#,
            "event.attempt:",
        ),
    ];
    for (json, prefix) in cases {
        let err = parse(json).unwrap_err();
        assert_eq!(err.code, crate::ErrorCode::InvalidRequest);
        assert!(err.message.starts_with(prefix), "{json}: {}", err.message);
    }
}

#[test]
fn serde_reads_the_same_format() {
    let json = r#"{"type":"fail","atMs":5,"error":"quota","retryable":true}"#;
    let via_serde: Event = serde_json::from_str(json).unwrap();
    assert_eq!(via_serde, parse(json).unwrap());
    let err = serde_json::from_str::<Event>(r#"{"type":"fail","atMs":5}"#).unwrap_err();
    assert!(err.to_string().starts_with(".error: required"), "{err}");
    let json = r#"{"type":"decide","atMs":1,"decision":"reject","artifactHash":"h","version":3}"#;
    let via_serde: Event = serde_json::from_str(json).unwrap();
    assert_eq!(via_serde, parse(json).unwrap());
}

#[test]
fn unknown_fields_are_ignored_for_forward_compatibility() {
    let event = parse(r#"{"type":"expire","atMs":3,"note":{"deep":[1,2]}}"#).unwrap();
    assert_eq!(event.kind(), EventKind::Expire);
    // A field of another kind is not read: `attempt` means nothing to
    // `cancel`, so a bad one there is ignored, not an error.
    let event = parse(r#"{"type":"cancel","atMs":3,"attempt":"x"}"#).unwrap();
    assert_eq!(event.attempt(), None);
}

#[test]
fn kinds_know_who_sends_them() {
    for kind in EventKind::ALL {
        assert!(!(kind.is_system() && kind.is_personal()), "{kind:?}");
        let text = crate::json::testing::to_json(&kind);
        assert_eq!(text, format!("\"{}\"", kind.as_str()));
    }
    assert!(EventKind::Lapse.is_system());
    assert!(EventKind::Decide.is_personal());
    assert!(!EventKind::Heartbeat.is_system());
}

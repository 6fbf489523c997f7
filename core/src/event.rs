//! The five events an executor (or the system) reports about a task.

use serde::{Deserialize, Serialize};

use crate::value::{Millis, NonBlank, Percent};

/// One report about a task, tagged by `type` on the wire:
///
/// ```json
/// {"type":"progress","atMs":6400,"progress":25,"cursor":"chunk-3"}
/// ```
///
/// Every field holds a validated value ([`Millis`], [`Percent`],
/// [`NonBlank`]), so an `Event` that exists is valid. Parsing checks the
/// whole event before any state logic runs (fix 4 to the seed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase",
    try_from = "RawEvent"
)]
pub enum Event {
    /// A worker picked the task up.
    Start {
        /// When it happened.
        at_ms: Millis,
        /// Who picked it up (free text).
        worker: String,
    },
    /// The running attempt reports progress.
    Progress {
        /// When it happened.
        at_ms: Millis,
        /// Percent done, 0 to 100.
        progress: Percent,
        /// The executor's own resume point (free text, opaque here).
        cursor: String,
    },
    /// The running attempt produced its result.
    Succeed {
        /// When it happened.
        at_ms: Millis,
        /// Where the result is stored (notifications carry no result).
        result_ref: NonBlank,
        /// Content hash of the result: same hash = same result.
        result_hash: NonBlank,
    },
    /// The running attempt failed.
    Fail {
        /// When it happened.
        at_ms: Millis,
        /// What went wrong (free text).
        error: String,
        /// Whether another attempt may help.
        retryable: bool,
    },
    /// The time to live ran out.
    Expire {
        /// When it happened.
        at_ms: Millis,
    },
}

/// The event kinds, as spelled in `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// [`Event::Start`]
    Start,
    /// [`Event::Progress`]
    Progress,
    /// [`Event::Succeed`]
    Succeed,
    /// [`Event::Fail`]
    Fail,
    /// [`Event::Expire`]
    Expire,
}

impl EventKind {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::Progress => "progress",
            EventKind::Succeed => "succeed",
            EventKind::Fail => "fail",
            EventKind::Expire => "expire",
        }
    }
}

impl Event {
    /// When the event happened.
    pub fn at_ms(&self) -> Millis {
        match self {
            Event::Start { at_ms, .. }
            | Event::Progress { at_ms, .. }
            | Event::Succeed { at_ms, .. }
            | Event::Fail { at_ms, .. }
            | Event::Expire { at_ms } => *at_ms,
        }
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Start { .. } => EventKind::Start,
            Event::Progress { .. } => EventKind::Progress,
            Event::Succeed { .. } => EventKind::Succeed,
            Event::Fail { .. } => EventKind::Fail,
            Event::Expire { .. } => EventKind::Expire,
        }
    }
}

/// The flat shape every event is parsed into first. Parsing a flat struct
/// needs no buffering (unlike serde's internally tagged enums), and the
/// per-kind check below can say exactly which field a kind is missing.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEvent {
    #[serde(rename = "type")]
    kind: EventKind,
    at_ms: Option<Millis>,
    worker: Option<String>,
    progress: Option<Percent>,
    cursor: Option<String>,
    result_ref: Option<NonBlank>,
    result_hash: Option<NonBlank>,
    error: Option<String>,
    retryable: Option<bool>,
}

/// The error names the field relative to the event (`.worker: …`); the
/// parser prefixes where the event sits (see [`crate::wire::from_json`]).
fn required<T>(value: Option<T>, field: &str, kind: EventKind) -> Result<T, String> {
    value.ok_or_else(|| format!(".{field}: required for a {} event", kind.as_str()))
}

impl TryFrom<RawEvent> for Event {
    type Error = String;

    fn try_from(raw: RawEvent) -> Result<Self, String> {
        let kind = raw.kind;
        let at_ms = required(raw.at_ms, "atMs", kind)?;
        Ok(match kind {
            EventKind::Start => Event::Start {
                at_ms,
                worker: required(raw.worker, "worker", kind)?,
            },
            EventKind::Progress => Event::Progress {
                at_ms,
                progress: required(raw.progress, "progress", kind)?,
                cursor: required(raw.cursor, "cursor", kind)?,
            },
            EventKind::Succeed => Event::Succeed {
                at_ms,
                result_ref: required(raw.result_ref, "resultRef", kind)?,
                result_hash: required(raw.result_hash, "resultHash", kind)?,
            },
            EventKind::Fail => Event::Fail {
                at_ms,
                error: required(raw.error, "error", kind)?,
                retryable: required(raw.retryable, "retryable", kind)?,
            },
            EventKind::Expire => Event::Expire { at_ms },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::from_json;
    use crate::Error;

    fn parse(json: &str) -> Result<Event, Error> {
        from_json(json, "event")
    }

    #[test]
    fn round_trips_every_kind() {
        for json in [
            r#"{"type":"start","atMs":1200,"worker":"w1"}"#,
            r#"{"type":"progress","atMs":6400,"progress":25,"cursor":"c"}"#,
            r#"{"type":"succeed","atMs":24300,"resultRef":"r","resultHash":"sha256:ab12"}"#,
            r#"{"type":"fail","atMs":5,"error":"quota","retryable":true}"#,
            r#"{"type":"expire","atMs":0.5}"#,
        ] {
            let event = parse(json).unwrap();
            assert_eq!(serde_json::to_string(&event).unwrap(), json);
        }
    }

    #[test]
    fn names_the_missing_field() {
        let err = parse(r#"{"type":"fail","atMs":5,"error":"x"}"#).unwrap_err();
        assert_eq!(err.message, "event.retryable: required for a fail event");
        let err = parse(r#"{"type":"start","worker":"w"}"#).unwrap_err();
        assert_eq!(err.message, "event.atMs: required for a start event");
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
            (r#"{"type":"launch","atMs":1}"#, "event.type:"),
            (r#"{"atMs":1}"#, "event.type: required"),
            (r#"[]"#, "event:"),
            (r#"null"#, "event:"),
        ];
        for (json, prefix) in cases {
            let err = parse(json).unwrap_err();
            assert_eq!(err.code, crate::ErrorCode::InvalidRequest);
            assert!(err.message.starts_with(prefix), "{json}: {}", err.message);
        }
    }

    #[test]
    fn unknown_fields_are_ignored_for_forward_compatibility() {
        let event = parse(r#"{"type":"expire","atMs":3,"note":{"deep":[1,2]}}"#).unwrap();
        assert_eq!(event.kind(), EventKind::Expire);
    }
}

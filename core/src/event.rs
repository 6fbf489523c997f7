//! The five events an executor (or the system) reports about a task.

use serde::Serialize;

use crate::json::{self, Fields, FromJson, Path, Value};
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
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
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

impl FromJson for EventKind {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        use EventKind::*;
        json::variant(
            value,
            at,
            &[
                ("start", Start),
                ("progress", Progress),
                ("succeed", Succeed),
                ("fail", Fail),
                ("expire", Expire),
            ],
        )
    }
}

impl FromJson for Event {
    /// Reads `type` first, then exactly the fields that kind needs; other
    /// fields are ignored (forward compatibility).
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let kind: EventKind = f.req("type")?;
        let required =
            |field: &str| f.missing(field, &format!("required for a {} event", kind.as_str()));
        let at_ms: Millis = f.get("atMs")?.ok_or_else(|| required("atMs"))?;
        Ok(match kind {
            EventKind::Start => Event::Start {
                at_ms,
                worker: f.get("worker")?.ok_or_else(|| required("worker"))?,
            },
            EventKind::Progress => Event::Progress {
                at_ms,
                progress: f.get("progress")?.ok_or_else(|| required("progress"))?,
                cursor: f.get("cursor")?.ok_or_else(|| required("cursor"))?,
            },
            EventKind::Succeed => Event::Succeed {
                at_ms,
                result_ref: f.get("resultRef")?.ok_or_else(|| required("resultRef"))?,
                result_hash: f.get("resultHash")?.ok_or_else(|| required("resultHash"))?,
            },
            EventKind::Fail => Event::Fail {
                at_ms,
                error: f.get("error")?.ok_or_else(|| required("error"))?,
                retryable: f.get("retryable")?.ok_or_else(|| required("retryable"))?,
            },
            EventKind::Expire => Event::Expire { at_ms },
        })
    }
}

json::impl_deserialize!(Event, EventKind);

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
            (r#"{"type":"launch","atMs":1}"#, "event.type: unknown value"),
            (r#"{"atMs":1}"#, "event.type: required"),
            (r#"[]"#, "event: expected an object, got an array"),
            (r#"null"#, "event: expected an object, got null"),
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
    }

    #[test]
    fn unknown_fields_are_ignored_for_forward_compatibility() {
        let event = parse(r#"{"type":"expire","atMs":3,"note":{"deep":[1,2]}}"#).unwrap();
        assert_eq!(event.kind(), EventKind::Expire);
    }
}

//! Reading events from JSON: `type` first, then exactly the fields that
//! kind needs, each error naming its field (`event.leaseMs: …`).

use super::{DecisionKind, Event, EventKind};
use crate::json::{self, Fields, FromJson, Path, Value};
use crate::value::{Millis, MAX_SAFE_INTEGER};

impl FromJson for EventKind {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        const NAMES: [(&str, EventKind); 14] = {
            let mut names = [("", EventKind::Start); 14];
            let mut i = 0;
            while i < EventKind::ALL.len() {
                names[i] = (EventKind::ALL[i].as_str(), EventKind::ALL[i]);
                i += 1;
            }
            names
        };
        json::variant(value, at, &NAMES)
    }
}

impl FromJson for DecisionKind {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        use DecisionKind::*;
        json::variant(
            value,
            at,
            &[
                ("approve", Approve),
                ("request_changes", RequestChanges),
                ("reject", Reject),
            ],
        )
    }
}

/// An event's fields, with the errors a missing or bad one gets.
struct Reader<'f, 'v, 'a, 'p> {
    f: &'f Fields<'v, 'a, 'p>,
    kind: EventKind,
}

impl Reader<'_, '_, '_, '_> {
    fn req<T: FromJson>(&self, key: &str) -> Result<T, json::Error> {
        self.f.get(key)?.ok_or_else(|| {
            self.f
                .missing(key, &format!("required for a {} event", self.kind.as_str()))
        })
    }

    /// The fencing token: an attempt number, counted from 1.
    fn attempt(&self) -> Result<Option<u64>, json::Error> {
        let attempt: Option<u64> = self.f.get("attempt")?;
        if attempt == Some(0) {
            return Err(self.f.missing(
                "attempt",
                &format!("must be an integer from 1 to {MAX_SAFE_INTEGER}, got 0"),
            ));
        }
        Ok(attempt)
    }

    /// A lease length: finite and > 0.
    fn lease_ms(&self) -> Result<Option<Millis>, json::Error> {
        let lease: Option<Millis> = self.f.get("leaseMs")?;
        if lease.is_some_and(|l| l.get() <= 0.0) {
            return Err(self.f.missing("leaseMs", "must be a finite number > 0"));
        }
        Ok(lease)
    }
}

impl FromJson for Event {
    /// Reads `type` first, then exactly the fields that kind needs; other
    /// fields are ignored (forward compatibility).
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let kind: EventKind = f.req("type")?;
        let r = Reader { f: &f, kind };
        let at_ms: Millis = r.req("atMs")?;
        Ok(match kind {
            EventKind::Start => Event::Start {
                at_ms,
                worker: r.req("worker")?,
                attempt: r.attempt()?,
                lease_ms: r.lease_ms()?,
            },
            EventKind::Progress => Event::Progress {
                at_ms,
                progress: r.req("progress")?,
                cursor: r.req("cursor")?,
                attempt: r.attempt()?,
            },
            EventKind::Succeed => Event::Succeed {
                at_ms,
                result_ref: r.req("resultRef")?,
                result_hash: r.req("resultHash")?,
                attempt: r.attempt()?,
            },
            EventKind::Fail => Event::Fail {
                at_ms,
                error: r.req("error")?,
                retryable: r.req("retryable")?,
                attempt: r.attempt()?,
            },
            EventKind::Expire => Event::Expire { at_ms },
            EventKind::Heartbeat => Event::Heartbeat {
                at_ms,
                attempt: r.attempt()?,
                lease_ms: r.lease_ms()?,
            },
            EventKind::Hold => Event::Hold {
                at_ms,
                artifact_ref: r.req("artifactRef")?,
                artifact_hash: r.req("artifactHash")?,
                question: f.get("question")?,
                attempt: r.attempt()?,
            },
            EventKind::AckCancel => Event::AckCancel {
                at_ms,
                attempt: r.attempt()?,
            },
            EventKind::CannotCancel => Event::CannotCancel {
                at_ms,
                reason: f.get("reason")?,
                attempt: r.attempt()?,
            },
            EventKind::Lapse => Event::Lapse {
                at_ms,
                attempt: r.attempt()?,
            },
            EventKind::Abandon => Event::Abandon { at_ms },
            EventKind::Timeout => Event::Timeout { at_ms },
            EventKind::Cancel => Event::Cancel {
                at_ms,
                reason: f.get("reason")?,
                actor: f.get("actor")?,
            },
            EventKind::Decide => Event::Decide {
                at_ms,
                decision: r.req("decision")?,
                artifact_hash: r.req("artifactHash")?,
                version: r.req("version")?,
                reason: f.get("reason")?,
                actor: f.get("actor")?,
            },
        })
    }
}

json::impl_deserialize!(Event, EventKind, DecisionKind);

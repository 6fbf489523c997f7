//! Events on the wire: `{"type":…,"atMs":…, the kind's own fields}`.
//!
//! Writing goes through one flat, borrowed record of every field an event
//! can have ([`Out`]), in one global order that is also each kind's
//! declaration order; reading keeps the first error instead of returning
//! at each field. Both are about the page's wasm: serde's derived
//! serializer for fourteen tagged variants and a reader with an early
//! return per field cost ~8 KB more; the JSON is the same (seed events
//! keep their exact shape).

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::{DecisionKind, Event, EventKind};
use crate::json::{self, Fields, FromJson, Gather, Path, Placeholder, Value};
use crate::value::{Millis, NonBlank};

fn field<S: SerializeStruct, T: Serialize>(
    s: &mut S,
    name: &'static str,
    value: &Option<T>,
) -> Result<(), S::Error> {
    match value {
        Some(v) => s.serialize_field(name, v),
        None => s.skip_field(name),
    }
}

impl Serialize for Event {
    /// `type`, `atMs`, then the kind's fields in declaration order; absent
    /// optional fields are left out.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Event", 8)?;
        st.serialize_field("type", self.kind().as_str())?;
        st.serialize_field("atMs", &self.at_ms())?;
        match self {
            Event::Start {
                worker, lease_ms, ..
            } => {
                st.serialize_field("worker", worker)?;
                field(&mut st, "attempt", &self.attempt())?;
                field(&mut st, "leaseMs", lease_ms)?;
                #[cfg(feature = "steps")]
                if let Event::Start { plan, .. } = self {
                    crate::steps::write_plan(&mut st, plan.as_ref())?;
                }
            }
            #[cfg(feature = "steps")]
            Event::Step { report, .. } => crate::steps::write_report(&mut st, report)?,
            #[cfg(feature = "steps")]
            Event::Reserve { .. }
            | Event::Settle { .. }
            | Event::Effect { .. }
            | Event::Exhaust { .. } => {
                crate::ledger::write_event(&mut st, self)?;
            }
            Event::Progress {
                progress, cursor, ..
            } => {
                st.serialize_field("progress", progress)?;
                st.serialize_field("cursor", cursor)?;
            }
            Event::Succeed {
                result_ref,
                result_hash,
                ..
            } => {
                st.serialize_field("resultRef", result_ref)?;
                st.serialize_field("resultHash", result_hash)?;
            }
            Event::Fail {
                error, retryable, ..
            } => {
                st.serialize_field("error", error)?;
                st.serialize_field("retryable", retryable)?;
            }
            Event::Heartbeat { lease_ms, .. } => {
                field(&mut st, "attempt", &self.attempt())?;
                field(&mut st, "leaseMs", lease_ms)?;
            }
            Event::Hold {
                artifact_ref,
                artifact_hash,
                question,
                ..
            } => {
                st.serialize_field("artifactRef", artifact_ref)?;
                st.serialize_field("artifactHash", artifact_hash)?;
                field(&mut st, "question", question)?;
            }
            Event::CannotCancel { reason, .. } => field(&mut st, "reason", reason)?,
            Event::Cancel { reason, actor, .. } => {
                field(&mut st, "reason", reason)?;
                field(&mut st, "actor", actor)?;
            }
            Event::Decide {
                decision,
                artifact_hash,
                version,
                reason,
                actor,
                ..
            } => {
                st.serialize_field("decision", decision)?;
                st.serialize_field("artifactHash", artifact_hash)?;
                st.serialize_field("version", version)?;
                field(&mut st, "reason", reason)?;
                field(&mut st, "actor", actor)?;
            }
            Event::Expire { .. }
            | Event::AckCancel { .. }
            | Event::Lapse { .. }
            | Event::Abandon { .. }
            | Event::Timeout { .. } => {}
        }
        // `attempt` comes last, except on start and heartbeat (written
        // before leaseMs, above).
        if !matches!(self, Event::Start { .. } | Event::Heartbeat { .. }) {
            field(&mut st, "attempt", &self.attempt())?;
        }
        st.end()
    }
}

impl Serialize for EventKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for DecisionKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl FromJson for EventKind {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        const NAMES: [(&str, EventKind); EventKind::ALL.len()] = {
            let mut names = [("", EventKind::Start); EventKind::ALL.len()];
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

/// Spelled out rather than formatted: `format!` on the page's paths
/// costs code (a unit test checks it against `MAX_SAFE_INTEGER`).
const ATTEMPT_ZERO: &str = "must be an integer from 1 to 9007199254740991, got 0";

/// The fencing token (an attempt number, counted from 1) and a lease
/// length (> 0).
fn attempt(g: &mut Gather<'_, '_, '_, '_>) -> Option<u64> {
    let attempt = g.opt("attempt");
    if attempt == Some(0) {
        g.fail("attempt", ATTEMPT_ZERO);
    }
    attempt
}

fn lease_ms(g: &mut Gather<'_, '_, '_, '_>) -> Option<Millis> {
    let lease: Option<Millis> = g.opt("leaseMs");
    if lease.is_some_and(|l| l.get() <= 0.0) {
        g.fail("leaseMs", "must be a finite number > 0");
    }
    lease
}

impl Placeholder for NonBlank {
    fn placeholder() -> Self {
        NonBlank::placeholder()
    }
}

impl Placeholder for DecisionKind {
    fn placeholder() -> Self {
        DecisionKind::Approve
    }
}

impl FromJson for Event {
    /// Reads `type` first, then exactly the fields that kind has, in
    /// declaration order; other fields are ignored (forward
    /// compatibility).
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let kind: EventKind = f.req("type")?;
        let mut r = Gather::new(&f, Some(kind.as_str()));
        let at_ms: Millis = r.req("atMs");
        let event = match kind {
            EventKind::Start => Event::Start {
                at_ms,
                worker: r.req("worker"),
                attempt: attempt(&mut r),
                lease_ms: lease_ms(&mut r),
                #[cfg(feature = "steps")]
                plan: crate::steps::read_plan(&mut r, &f),
            },
            EventKind::Progress => Event::Progress {
                at_ms,
                progress: r.req("progress"),
                cursor: r.req("cursor"),
                attempt: attempt(&mut r),
            },
            EventKind::Succeed => Event::Succeed {
                at_ms,
                result_ref: r.req("resultRef"),
                result_hash: r.req("resultHash"),
                attempt: attempt(&mut r),
            },
            EventKind::Fail => Event::Fail {
                at_ms,
                error: r.req("error"),
                retryable: r.req("retryable"),
                attempt: attempt(&mut r),
            },
            EventKind::Expire => Event::Expire { at_ms },
            EventKind::Heartbeat => Event::Heartbeat {
                at_ms,
                attempt: attempt(&mut r),
                lease_ms: lease_ms(&mut r),
            },
            EventKind::Hold => Event::Hold {
                at_ms,
                artifact_ref: r.req("artifactRef"),
                artifact_hash: r.req("artifactHash"),
                question: r.opt("question"),
                attempt: attempt(&mut r),
            },
            EventKind::AckCancel => Event::AckCancel {
                at_ms,
                attempt: attempt(&mut r),
            },
            EventKind::CannotCancel => Event::CannotCancel {
                at_ms,
                reason: r.opt("reason"),
                attempt: attempt(&mut r),
            },
            EventKind::Lapse => Event::Lapse {
                at_ms,
                attempt: attempt(&mut r),
            },
            EventKind::Abandon => Event::Abandon { at_ms },
            EventKind::Timeout => Event::Timeout { at_ms },
            EventKind::Cancel => Event::Cancel {
                at_ms,
                reason: r.opt("reason"),
                actor: r.opt("actor"),
            },
            EventKind::Decide => Event::Decide {
                at_ms,
                decision: r.req("decision"),
                artifact_hash: r.req("artifactHash"),
                version: r.req("version"),
                reason: r.opt("reason"),
                actor: r.opt("actor"),
            },
            #[cfg(feature = "steps")]
            EventKind::Step => Event::Step {
                at_ms,
                report: crate::steps::read_report(&mut r),
                attempt: attempt(&mut r),
            },
            #[cfg(feature = "steps")]
            EventKind::Reserve => Event::Reserve {
                at_ms,
                reservation: crate::ledger::read_reserve(&mut r),
                attempt: attempt(&mut r),
            },
            #[cfg(feature = "steps")]
            EventKind::Settle => {
                let (reservation, usage) = crate::ledger::read_settle(&mut r);
                Event::Settle {
                    at_ms,
                    reservation,
                    usage,
                    attempt: attempt(&mut r),
                }
            }
            #[cfg(feature = "steps")]
            EventKind::Effect => Event::Effect {
                at_ms,
                effect: crate::ledger::read_effect(&mut r),
                attempt: attempt(&mut r),
            },
            #[cfg(feature = "steps")]
            EventKind::Exhaust => Event::Exhaust {
                at_ms,
                partial: crate::ledger::read_partial(&mut r),
                attempt: attempt(&mut r),
            },
        };
        r.finish(event)
    }
}

json::impl_deserialize!(Event, EventKind, DecisionKind);

#[cfg(test)]
mod tests {
    #[test]
    fn the_spelled_out_bound_is_the_safe_integer_bound() {
        let expected = format!(
            "must be an integer from 1 to {}, got 0",
            crate::value::MAX_SAFE_INTEGER
        );
        assert_eq!(super::ATTEMPT_ZERO, expected);
    }
}

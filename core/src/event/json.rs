//! Events on the wire: `{"type":…,"atMs":…, the kind's own fields}`.
//!
//! Both directions go through one flat record of every field an event
//! can have ([`Flat`]), in one global order that is also each kind's
//! declaration order. Why not serde's derive: for fourteen tagged
//! variants its serializer and our per-kind reader cost ~9 KB of the
//! page's wasm; one flat pass costs a fraction of that, and the JSON is
//! the same (seed events keep their exact shape).

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::{DecisionKind, Event, EventKind};
use crate::json::{self, Fields, FromJson, Path, Value};
use crate::value::{Millis, NonBlank, Percent, MAX_SAFE_INTEGER};

/// Every field an event can have; each kind sets its own.
#[derive(Default)]
struct Flat {
    worker: Option<String>,
    progress: Option<Percent>,
    cursor: Option<String>,
    result_ref: Option<NonBlank>,
    result_hash: Option<NonBlank>,
    error: Option<String>,
    retryable: Option<bool>,
    decision: Option<DecisionKind>,
    artifact_ref: Option<NonBlank>,
    artifact_hash: Option<NonBlank>,
    version: Option<u64>,
    question: Option<String>,
    reason: Option<String>,
    actor: Option<NonBlank>,
    attempt: Option<u64>,
    lease_ms: Option<Millis>,
}

/// The fields of each kind, as bits of [`F`]: which are read, in
/// [`REQUIRED`] which must be there.
struct F;
impl F {
    const WORKER: u32 = 1;
    const PROGRESS: u32 = 1 << 1;
    const CURSOR: u32 = 1 << 2;
    const RESULT_REF: u32 = 1 << 3;
    const RESULT_HASH: u32 = 1 << 4;
    const ERROR: u32 = 1 << 5;
    const RETRYABLE: u32 = 1 << 6;
    const DECISION: u32 = 1 << 7;
    const ARTIFACT_REF: u32 = 1 << 8;
    const ARTIFACT_HASH: u32 = 1 << 9;
    const VERSION: u32 = 1 << 10;
    const QUESTION: u32 = 1 << 11;
    const REASON: u32 = 1 << 12;
    const ACTOR: u32 = 1 << 13;
    const ATTEMPT: u32 = 1 << 14;
    const LEASE_MS: u32 = 1 << 15;
}

/// Every kind has `atMs`, required.
const AT_MS: u32 = 1 << 16;

/// (fields read, fields required) per kind, besides `atMs`.
const fn fields(kind: EventKind) -> (u32, u32) {
    use EventKind as K;
    match kind {
        K::Start => (F::WORKER | F::ATTEMPT | F::LEASE_MS, F::WORKER),
        K::Progress => (
            F::PROGRESS | F::CURSOR | F::ATTEMPT,
            F::PROGRESS | F::CURSOR,
        ),
        K::Succeed => (
            F::RESULT_REF | F::RESULT_HASH | F::ATTEMPT,
            F::RESULT_REF | F::RESULT_HASH,
        ),
        K::Fail => (
            F::ERROR | F::RETRYABLE | F::ATTEMPT,
            F::ERROR | F::RETRYABLE,
        ),
        K::Heartbeat => (F::ATTEMPT | F::LEASE_MS, 0),
        K::Hold => (
            F::ARTIFACT_REF | F::ARTIFACT_HASH | F::QUESTION | F::ATTEMPT,
            F::ARTIFACT_REF | F::ARTIFACT_HASH,
        ),
        K::AckCancel | K::Lapse => (F::ATTEMPT, 0),
        K::CannotCancel => (F::REASON | F::ATTEMPT, 0),
        K::Cancel => (F::REASON | F::ACTOR, 0),
        K::Decide => (
            F::DECISION | F::ARTIFACT_HASH | F::VERSION | F::REASON | F::ACTOR,
            F::DECISION | F::ARTIFACT_HASH | F::VERSION,
        ),
        K::Expire | K::Abandon | K::Timeout => (0, 0),
    }
}

/// An event's fields, borrowed, for writing.
#[derive(Default)]
struct Out<'a> {
    worker: Option<&'a str>,
    progress: Option<Percent>,
    cursor: Option<&'a str>,
    result_ref: Option<&'a NonBlank>,
    result_hash: Option<&'a NonBlank>,
    error: Option<&'a str>,
    retryable: Option<bool>,
    decision: Option<DecisionKind>,
    artifact_ref: Option<&'a NonBlank>,
    artifact_hash: Option<&'a NonBlank>,
    version: Option<u64>,
    question: Option<&'a str>,
    reason: Option<&'a str>,
    actor: Option<&'a NonBlank>,
    lease_ms: Option<Millis>,
}

impl Event {
    /// The event's own fields (the inverse of [`Flat::build`]).
    fn out(&self) -> Out<'_> {
        let mut o = Out::default();
        match self {
            Event::Start {
                worker, lease_ms, ..
            } => (o.worker, o.lease_ms) = (Some(worker.as_str()), *lease_ms),
            Event::Progress {
                progress, cursor, ..
            } => (o.progress, o.cursor) = (Some(*progress), Some(cursor.as_str())),
            Event::Succeed {
                result_ref,
                result_hash,
                ..
            } => (o.result_ref, o.result_hash) = (Some(result_ref), Some(result_hash)),
            Event::Fail {
                error, retryable, ..
            } => (o.error, o.retryable) = (Some(error.as_str()), Some(*retryable)),
            Event::Heartbeat { lease_ms, .. } => o.lease_ms = *lease_ms,
            Event::Hold {
                artifact_ref,
                artifact_hash,
                question,
                ..
            } => {
                (o.artifact_ref, o.artifact_hash) = (Some(artifact_ref), Some(artifact_hash));
                o.question = question.as_deref();
            }
            Event::CannotCancel { reason, .. } => o.reason = reason.as_deref(),
            Event::Cancel { reason, actor, .. } => {
                (o.reason, o.actor) = (reason.as_deref(), actor.as_ref());
            }
            Event::Decide {
                decision,
                artifact_hash,
                version,
                reason,
                actor,
                ..
            } => {
                (o.decision, o.artifact_hash) = (Some(*decision), Some(artifact_hash));
                (o.version, o.reason, o.actor) =
                    (Some(*version), reason.as_deref(), actor.as_ref());
            }
            Event::Expire { .. }
            | Event::AckCancel { .. }
            | Event::Lapse { .. }
            | Event::Abandon { .. }
            | Event::Timeout { .. } => {}
        }
        o
    }
}

impl Flat {
    /// The event of `kind` from these fields, which hold at least the
    /// kind's required ones (checked by the reader). `None` otherwise.
    fn build(self, kind: EventKind, at_ms: Millis) -> Option<Event> {
        let attempt = self.attempt;
        Some(match kind {
            EventKind::Start => Event::Start {
                at_ms,
                worker: self.worker?,
                attempt,
                lease_ms: self.lease_ms,
            },
            EventKind::Progress => Event::Progress {
                at_ms,
                progress: self.progress?,
                cursor: self.cursor?,
                attempt,
            },
            EventKind::Succeed => Event::Succeed {
                at_ms,
                result_ref: self.result_ref?,
                result_hash: self.result_hash?,
                attempt,
            },
            EventKind::Fail => Event::Fail {
                at_ms,
                error: self.error?,
                retryable: self.retryable?,
                attempt,
            },
            EventKind::Expire => Event::Expire { at_ms },
            EventKind::Heartbeat => Event::Heartbeat {
                at_ms,
                attempt,
                lease_ms: self.lease_ms,
            },
            EventKind::Hold => Event::Hold {
                at_ms,
                artifact_ref: self.artifact_ref?,
                artifact_hash: self.artifact_hash?,
                question: self.question,
                attempt,
            },
            EventKind::AckCancel => Event::AckCancel { at_ms, attempt },
            EventKind::CannotCancel => Event::CannotCancel {
                at_ms,
                reason: self.reason,
                attempt,
            },
            EventKind::Lapse => Event::Lapse { at_ms, attempt },
            EventKind::Abandon => Event::Abandon { at_ms },
            EventKind::Timeout => Event::Timeout { at_ms },
            EventKind::Cancel => Event::Cancel {
                at_ms,
                reason: self.reason,
                actor: self.actor,
            },
            EventKind::Decide => Event::Decide {
                at_ms,
                decision: self.decision?,
                artifact_hash: self.artifact_hash?,
                version: self.version?,
                reason: self.reason,
                actor: self.actor,
            },
        })
    }
}

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
        let f = self.out();
        let mut st = s.serialize_struct("Event", 18)?;
        st.serialize_field("type", self.kind().as_str())?;
        st.serialize_field("atMs", &self.at_ms())?;
        field(&mut st, "worker", &f.worker)?;
        field(&mut st, "progress", &f.progress)?;
        field(&mut st, "cursor", &f.cursor)?;
        field(&mut st, "resultRef", &f.result_ref)?;
        field(&mut st, "resultHash", &f.result_hash)?;
        field(&mut st, "error", &f.error)?;
        field(&mut st, "retryable", &f.retryable)?;
        field(&mut st, "decision", &f.decision)?;
        field(&mut st, "artifactRef", &f.artifact_ref)?;
        field(&mut st, "artifactHash", &f.artifact_hash)?;
        field(&mut st, "version", &f.version)?;
        field(&mut st, "question", &f.question)?;
        field(&mut st, "reason", &f.reason)?;
        field(&mut st, "actor", &f.actor)?;
        field(&mut st, "attempt", &self.attempt())?;
        field(&mut st, "leaseMs", &f.lease_ms)?;
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

/// Reads the fields of one kind and keeps the first error: no early
/// return per field, so the partly read record is dropped at one place
/// (an early return per field repeats the drop code at every one).
struct Reader<'f, 'v, 'a, 'p> {
    f: &'f Fields<'v, 'a, 'p>,
    kind: EventKind,
    read: u32,
    required: u32,
    error: Option<json::Error>,
}

impl Reader<'_, '_, '_, '_> {
    /// `key` when the kind has it, else `None` without looking (other
    /// kinds' fields are ignored, for forward compatibility).
    fn get<T: FromJson>(&mut self, bit: u32, key: &str) -> Option<T> {
        if self.read & bit == 0 || self.error.is_some() {
            return None;
        }
        match self.f.get(key) {
            Ok(None) if self.required & bit != 0 => self.fail(self.missing(key)),
            Ok(value) => value,
            Err(e) => self.fail(e),
        }
    }

    fn fail<T>(&mut self, e: json::Error) -> Option<T> {
        self.error = Some(e);
        None
    }

    /// Out of line: one copy, not one per field type.
    #[inline(never)]
    fn missing(&self, key: &str) -> json::Error {
        self.f
            .missing(key, &format!("required for a {} event", self.kind.as_str()))
    }
}

impl FromJson for Event {
    /// Reads `type` first, then exactly the fields that kind has; other
    /// fields are ignored (forward compatibility).
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let kind: EventKind = f.req("type")?;
        let (read, required) = fields(kind);
        let mut r = Reader {
            f: &f,
            kind,
            read: read | AT_MS,
            required: required | AT_MS,
            error: None,
        };
        let at_ms: Millis = r.get(AT_MS, "atMs").unwrap_or_default();
        let flat = Flat {
            worker: r.get(F::WORKER, "worker"),
            progress: r.get(F::PROGRESS, "progress"),
            cursor: r.get(F::CURSOR, "cursor"),
            result_ref: r.get(F::RESULT_REF, "resultRef"),
            result_hash: r.get(F::RESULT_HASH, "resultHash"),
            error: r.get(F::ERROR, "error"),
            retryable: r.get(F::RETRYABLE, "retryable"),
            decision: r.get(F::DECISION, "decision"),
            artifact_ref: r.get(F::ARTIFACT_REF, "artifactRef"),
            artifact_hash: r.get(F::ARTIFACT_HASH, "artifactHash"),
            version: r.get(F::VERSION, "version"),
            question: r.get(F::QUESTION, "question"),
            reason: r.get(F::REASON, "reason"),
            actor: r.get(F::ACTOR, "actor"),
            attempt: r.get(F::ATTEMPT, "attempt"),
            lease_ms: r.get(F::LEASE_MS, "leaseMs"),
        };
        if let Some(e) = r.error {
            return Err(e);
        }
        if flat.attempt == Some(0) {
            return Err(f.missing(
                "attempt",
                &format!("must be an integer from 1 to {MAX_SAFE_INTEGER}, got 0"),
            ));
        }
        if flat.lease_ms.is_some_and(|l| l.get() <= 0.0) {
            return Err(f.missing("leaseMs", "must be a finite number > 0"));
        }
        flat.build(kind, at_ms)
            .ok_or_else(|| f.missing("type", "fields missing for this kind"))
    }
}

json::impl_deserialize!(Event, EventKind, DecisionKind);

//! The task types on the wire. Optional fields are left out when absent
//! (as `JSON.stringify` leaves out `undefined`), and so are the new
//! fields at their defaults, so a seed task keeps its exact shape.
//! Reading checks what the state machine guarantees of every task it
//! produces, so a foreign or corrupted task cannot start out impossible.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::{CreateTask, Decision, HistoryEntry, State, Task, TaskView};
use crate::json::{self, Fields, FromJson, Path, Value};
use crate::value::{self, is_blank, Millis, NonBlank};

/// f64 milliseconds, encoded as [`value::ms`] does.
struct Ms(f64);

impl Serialize for Ms {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        value::ms::serialize(&self.0, s)
    }
}

fn opt<S: SerializeStruct, T: Serialize>(
    s: &mut S,
    name: &'static str,
    value: Option<T>,
) -> Result<(), S::Error> {
    match value {
        Some(v) => s.serialize_field(name, &v),
        None => s.skip_field(name),
    }
}

impl TaskView {
    /// Writes the fields shared by [`TaskView`] and [`Task`].
    fn write_fields<S: SerializeStruct>(&self, s: &mut S) -> Result<(), S::Error> {
        s.serialize_field("id", &self.id)?;
        s.serialize_field("state", &self.state)?;
        s.serialize_field("expiresAtMs", &Ms(self.expires_at_ms))?;
        s.serialize_field("attempts", &self.attempts)?;
        s.serialize_field("maxAttempts", &self.max_attempts)?;
        s.serialize_field("progress", &self.progress)?;
        s.serialize_field("version", &self.version)?;
        opt(s, "resultRef", self.result_ref.as_ref())?;
        opt(s, "resultHash", self.result_hash.as_ref())?;
        opt(s, "error", self.error.as_ref())?;
        opt(s, "deadlineAtMs", self.deadline_at_ms.map(Ms))?;
        opt(s, "unknownGraceMs", self.unknown_grace_ms.map(Ms))?;
        opt(s, "autoRequeue", (!self.auto_requeue).then_some(false))?;
        opt(
            s,
            "continuations",
            Some(self.continuations).filter(|c| *c > 0),
        )?;
        opt(s, "unknownSinceMs", self.unknown_since_ms.map(Ms))?;
        opt(s, "artifactRef", self.artifact_ref.as_ref())?;
        opt(s, "artifactHash", self.artifact_hash.as_ref())?;
        opt(s, "question", self.question.as_ref())?;
        opt(s, "decision", self.decision.as_ref())
    }
}

impl Serialize for TaskView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("TaskView", 19)?;
        self.write_fields(&mut st)?;
        st.end()
    }
}

impl Serialize for Task {
    /// The view's fields, then `lease` (when one runs) and `history`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Task", 21)?;
        self.view.write_fields(&mut st)?;
        opt(&mut st, "lease", self.lease.as_ref())?;
        st.serialize_field("history", &self.history)?;
        st.end()
    }
}

impl Serialize for Decision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Decision", 3)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("version", &self.version)?;
        opt(&mut st, "reason", self.reason.as_ref())?;
        st.end()
    }
}

impl FromJson for Decision {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        Ok(Decision {
            kind: f.req("kind")?,
            version: f.req("version")?,
            reason: f.get("reason")?,
        })
    }
}

/// Reads fields and keeps the first error, so a reader has one exit and
/// drops its partial result in one place (an early return per field
/// repeats the drop code at every one: ~2 KB of the page's wasm here).
struct Gather<'f, 'v, 'a, 'p> {
    f: &'f Fields<'v, 'a, 'p>,
    error: Option<json::Error>,
}

impl Gather<'_, '_, '_, '_> {
    fn get<T: FromJson>(&mut self, key: &str) -> Option<T> {
        if self.error.is_some() {
            return None;
        }
        self.f.get(key).unwrap_or_else(|e| {
            self.error = Some(e);
            None
        })
    }

    fn req<T: FromJson>(&mut self, key: &str) -> Option<T> {
        let value = self.get(key);
        if value.is_none() && self.error.is_none() {
            self.error = Some(self.f.missing(key, "required"));
        }
        value
    }

    fn time(&mut self, key: &str) -> Option<f64> {
        self.get::<Millis>(key).map(Millis::get)
    }
}

impl FromJson for TaskView {
    /// Reads the fields and checks the invariants. A `history` field, if
    /// any, is ignored.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mut g = Gather { f: &f, error: None };
        let id: Option<NonBlank> = g.req("id");
        let state: Option<State> = g.req("state");
        let expires_at_ms: Option<f64> = g.req("expiresAtMs");
        let attempts: Option<u64> = g.req("attempts");
        let max_attempts: Option<u64> = g.req("maxAttempts");
        let progress: Option<value::Percent> = g.req("progress");
        let version: Option<u64> = g.req("version");
        let view = TaskView {
            id: id.map(NonBlank::into_string).unwrap_or_default(),
            state: state.unwrap_or(State::Queued),
            expires_at_ms: expires_at_ms.unwrap_or_default(),
            attempts: attempts.unwrap_or_default(),
            max_attempts: max_attempts.unwrap_or_default(),
            progress: progress.unwrap_or_default().get(),
            version: version.unwrap_or_default(),
            result_ref: g.get("resultRef"),
            result_hash: g.get("resultHash"),
            error: g.get("error"),
            deadline_at_ms: g.time("deadlineAtMs"),
            unknown_grace_ms: g.time("unknownGraceMs"),
            auto_requeue: g.get("autoRequeue").unwrap_or(true),
            continuations: g.get("continuations").unwrap_or(0),
            unknown_since_ms: g.time("unknownSinceMs"),
            artifact_ref: g.get("artifactRef"),
            artifact_hash: g.get("artifactHash"),
            question: g.get("question"),
            decision: g.get("decision"),
        };
        if let Some(e) = g.error {
            return Err(e);
        }
        check(&view).map_err(|(field, why)| f.missing(field, &why))?;
        Ok(view)
    }
}

/// What every task the state machine produces satisfies: the failing
/// field and why, otherwise.
fn check(view: &TaskView) -> Result<(), (&'static str, String)> {
    let has = |v: &Option<String>| v.as_deref().is_some_and(|s| !is_blank(s));
    if view.expires_at_ms < 0.0 {
        return Err(("expiresAtMs", "must be >= 0".into()));
    }
    if view.max_attempts == 0 {
        return Err(("maxAttempts", "must be >= 1".into()));
    }
    if view.attempts > view.allowed_attempts() {
        let mut why = format!(
            "{} exceeds maxAttempts {}",
            view.attempts, view.max_attempts
        );
        if view.continuations > 0 {
            why.push_str(&format!(" + continuations {}", view.continuations));
        }
        return Err(("attempts", why));
    }
    if view.state.holds_attempt() && view.attempts == 0 {
        return Err((
            "attempts",
            "must be >= 1 once a worker holds the task".into(),
        ));
    }
    match view.state {
        State::Succeeded => {
            if !has(&view.result_ref) || !has(&view.result_hash) {
                return Err((
                    "resultRef",
                    "a succeeded task needs resultRef and resultHash".into(),
                ));
            }
            if view.progress != 100 {
                return Err(("progress", "a succeeded task is at 100".into()));
            }
        }
        State::WaitingApproval if !has(&view.artifact_ref) || !has(&view.artifact_hash) => {
            return Err((
                "artifactRef",
                "a waiting_approval task needs artifactRef and artifactHash".into(),
            ));
        }
        State::Unknown if view.unknown_since_ms.is_none() => {
            return Err(("unknownSinceMs", "required for an unknown task".into()));
        }
        _ => {}
    }
    Ok(())
}

impl FromJson for HistoryEntry {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        Ok(HistoryEntry {
            version: f.req("version")?,
            event: f.req("event")?,
        })
    }
}

impl FromJson for Task {
    /// A view plus its history, which must be exactly versions
    /// `1..=version`, and its lease, if any.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let view = TaskView::from_json(value, at)?;
        let f = Fields::of(value, at)?;
        let history: Vec<HistoryEntry> = f
            .get("history")?
            .ok_or_else(|| f.missing("history", "required for a full task"))?;
        if history.len() as u64 != view.version {
            return Err(f.missing(
                "history",
                &format!(
                    "holds {} entries but version is {}",
                    history.len(),
                    view.version
                ),
            ));
        }
        if let Some((i, entry)) = history
            .iter()
            .enumerate()
            .find(|(i, entry)| entry.version != *i as u64 + 1)
        {
            let list = Path::Key(&at, "history");
            return Err(json::invalid(
                format!("expected {}, got {}", i + 1, entry.version),
                Path::Key(&Path::Index(&list, i), "version"),
            ));
        }
        Ok(Task {
            view,
            history,
            lease: f.get("lease")?,
        })
    }
}

impl FromJson for CreateTask {
    /// Only the types are checked here; [`super::create_task`] checks the
    /// values.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        Ok(CreateTask {
            id: f.req("id")?,
            now_ms: f.req("nowMs")?,
            ttl_ms: f.req("ttlMs")?,
            max_attempts: f.req("maxAttempts")?,
            deadline_ms: f.get("deadlineMs")?,
            unknown_grace_ms: f.get("unknownGraceMs")?,
            auto_requeue: f.get("autoRequeue")?.unwrap_or(true),
        })
    }
}

json::impl_deserialize!(TaskView, HistoryEntry, Task, CreateTask, Decision);

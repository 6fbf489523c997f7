//! The task types on the wire. Optional fields are left out when absent
//! (as `JSON.stringify` leaves out `undefined`), and so are the new
//! fields at their defaults, so a seed task keeps its exact shape.
//! Reading checks what the state machine guarantees of every task it
//! produces, so a foreign or corrupted task cannot start out impossible.

use alloc::borrow::Cow;
use alloc::{string::String, vec::Vec};

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::{CreateTask, Decision, HistoryEntry, State, Task, TaskView};
use crate::event::DecisionKind;
use crate::json::{self, Fields, FromJson, Gather, Path, Placeholder, Value};
use crate::text::decimal;
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
        opt(
            s,
            "continuations",
            Some(self.continuations).filter(|c| *c > 0),
        )?;
        opt(s, "artifactRef", self.artifact_ref.as_ref())?;
        opt(s, "artifactHash", self.artifact_hash.as_ref())?;
        opt(s, "question", self.question.as_ref())?;
        // The decision is flat on the wire (a nested object's reader and
        // writer cost ~0.4 KB of the page's wasm).
        let d = self.decision.as_ref();
        opt(s, "decision", d.map(|d| d.kind))?;
        opt(s, "decisionVersion", d.map(|d| d.version))?;
        opt(s, "decisionReason", d.and_then(|d| d.reason.as_ref()))?;
        #[cfg(feature = "steps")]
        crate::steps::write_task_plan(s, self.plan.as_deref())?;
        #[cfg(feature = "steps")]
        crate::ledger::write_task_ledger(s, self.ledger.as_deref())?;
        Ok(())
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

impl Placeholder for State {
    fn placeholder() -> Self {
        State::Queued
    }
}

/// An optional time: finite and ≥ 0 when present.
fn time(g: &mut Gather<'_, '_, '_, '_>, key: &str) -> Option<f64> {
    g.opt::<Millis>(key).map(Millis::get)
}

impl FromJson for TaskView {
    /// Reads the fields and checks the invariants. A `history` field, if
    /// any, is ignored.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mut g = Gather::new(&f, None);
        let id: NonBlank = g.req("id");
        let progress: value::Percent = g.req("progress");
        let view = TaskView {
            id: id.into_string(),
            state: g.req("state"),
            expires_at_ms: g.req("expiresAtMs"),
            attempts: g.req("attempts"),
            max_attempts: g.req("maxAttempts"),
            progress: progress.get(),
            version: g.req("version"),
            result_ref: g.opt("resultRef"),
            result_hash: g.opt("resultHash"),
            error: g.opt("error"),
            deadline_at_ms: time(&mut g, "deadlineAtMs"),
            unknown_grace_ms: time(&mut g, "unknownGraceMs"),
            continuations: g.opt("continuations").unwrap_or(0),
            artifact_ref: g.opt("artifactRef"),
            artifact_hash: g.opt("artifactHash"),
            question: g.opt("question"),
            // The decision is flat on the wire (a nested object's reader
            // and writer cost ~0.4 KB of the page's wasm).
            decision: {
                let kind: Option<DecisionKind> = g.opt("decision");
                let version: Option<u64> = g.opt("decisionVersion");
                let reason: Option<String> = g.opt("decisionReason");
                kind.map(|kind| Decision {
                    kind,
                    version: version.unwrap_or_default(),
                    reason,
                })
            },
            #[cfg(feature = "steps")]
            plan: crate::steps::read_task_plan(&mut g).map(Into::into),
            #[cfg(feature = "steps")]
            ledger: crate::ledger::read_task_ledger(&mut g).map(Into::into),
        };
        let view = g.finish(view)?;
        check(&view).map_err(|(field, why)| f.missing(field, &why))?;
        Ok(view)
    }
}

/// What every task the state machine produces satisfies: the failing
/// field and why, otherwise.
fn check(view: &TaskView) -> Result<(), (&'static str, Cow<'static, str>)> {
    let has = |v: &Option<String>| v.as_deref().is_some_and(|s| !is_blank(s));
    let fail = |field, why: &'static str| Err((field, Cow::Borrowed(why)));
    if view.expires_at_ms < 0.0 {
        return fail("expiresAtMs", "must be >= 0");
    }
    if view.max_attempts == 0 {
        return fail("maxAttempts", "must be >= 1");
    }
    if view.attempts > view.allowed_attempts() {
        let mut why = decimal(view.attempts);
        why.push_str(" exceeds maxAttempts ");
        why.push_str(&decimal(view.max_attempts));
        if view.continuations > 0 {
            why.push_str(" + continuations");
        }
        return Err(("attempts", Cow::Owned(why)));
    }
    match view.state {
        State::Succeeded if !has(&view.result_ref) || !has(&view.result_hash) => fail(
            "resultRef",
            "a succeeded task needs resultRef and resultHash",
        ),
        State::Succeeded if view.progress != 100 => fail("progress", "a succeeded task is at 100"),
        _ => Ok(()),
    }
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
                &crate::error::join(&[
                    "holds ",
                    &decimal(history.len() as u64),
                    " entries but version is ",
                    &decimal(view.version),
                ]),
            ));
        }
        if let Some((i, entry)) = history
            .iter()
            .enumerate()
            .find(|(i, entry)| entry.version != *i as u64 + 1)
        {
            let list = Path::Key(&at, "history");
            return Err(json::invalid(
                crate::error::join(&[
                    "expected ",
                    &decimal(i as u64 + 1),
                    ", got ",
                    &decimal(entry.version),
                ]),
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
            #[cfg(feature = "steps")]
            workflow_version: f.get("workflowVersion")?,
            #[cfg(feature = "steps")]
            steps: f.get("steps")?,
            #[cfg(feature = "steps")]
            budget: f.get("budget")?,
        })
    }
}

json::impl_deserialize!(TaskView, HistoryEntry, Task, CreateTask);

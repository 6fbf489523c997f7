//! Hand-written JSON writers for what a client sends to its page.
//!
//! The serde writers (`ser.rs`) serve everything; these serve the few
//! types the browser client emits (task views, history entries, merge
//! outcomes, the follow's events, the persisted mirror) without serde's
//! generic machinery, which costs the page ~3 KB gzip. Their output is
//! byte for byte the serde writers' (the follow simulation checks every
//! event it sees both ways).

#[cfg(feature = "steps")]
mod ledger;
#[cfg(feature = "steps")]
mod steps;
#[cfg(feature = "steps")]
mod timeline;
#[cfg(feature = "steps")]
pub use timeline::timeline_answer;

use crate::event::Event;
use crate::js::write_f64;
use crate::mirror::{MergeOutcome, Mirror, Next, Rejection};
use crate::task::{HistoryEntry, TaskView};
use alloc::{string::String, vec::Vec};

/// Appends `s` as a JSON string literal, with JavaScript's escapes.
pub fn write_string(out: &mut String, s: &str) {
    write_str(out, s);
}

/// [`write_string`], for this crate's writers (kept `pub(crate)`: see
/// [`crate::text`]).
pub(crate) fn write_str(out: &mut String, s: &str) {
    out.push_str("\"");
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(s.get(start..i).unwrap_or_default());
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            crate::text::push_ascii(out, &[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(s.get(start..).unwrap_or_default());
    out.push_str("\"");
}

/// A value that writes itself as JSON.
pub trait ToJson {
    /// Appends the JSON of `self` to `w`.
    fn write_json(&self, w: &mut Writer);
}

/// A JSON text being written.
#[derive(Debug, Default)]
pub struct Writer {
    out: String,
}

impl Writer {
    /// The text written.
    pub fn finish(self) -> String {
        self.out
    }

    fn open(&mut self) {
        self.out.push_str("{");
    }

    fn close(&mut self) {
        self.out.push_str("}");
    }

    /// `"key":` after a `,` unless it is the first of its object.
    fn key(&mut self, key: &str) {
        if !self.out.ends_with("{") {
            self.out.push_str(",");
        }
        self.out.push_str("\"");
        self.out.push_str(key);
        self.out.push_str("\":");
    }

    fn field<T: ToJson + ?Sized>(&mut self, key: &str, value: &T) {
        self.key(key);
        value.write_json(self);
    }

    fn some<T: ToJson>(&mut self, key: &str, value: &Option<T>) {
        if let Some(v) = value {
            self.field(key, v);
        }
    }

    fn str(&mut self, s: &str) {
        write_str(&mut self.out, s);
    }
}

impl ToJson for str {
    fn write_json(&self, w: &mut Writer) {
        w.str(self);
    }
}

impl ToJson for String {
    fn write_json(&self, w: &mut Writer) {
        w.str(self);
    }
}

impl ToJson for f64 {
    fn write_json(&self, w: &mut Writer) {
        write_f64(&mut w.out, *self);
    }
}

impl ToJson for u64 {
    fn write_json(&self, w: &mut Writer) {
        crate::text::push_u64(&mut w.out, *self);
    }
}

impl ToJson for u32 {
    fn write_json(&self, w: &mut Writer) {
        u64::from(*self).write_json(w);
    }
}

impl ToJson for bool {
    fn write_json(&self, w: &mut Writer) {
        w.out.push_str(if *self { "true" } else { "false" });
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn write_json(&self, w: &mut Writer) {
        match self {
            Some(v) => v.write_json(w),
            None => w.out.push_str("null"),
        }
    }
}

impl<T: ToJson> ToJson for [T] {
    fn write_json(&self, w: &mut Writer) {
        w.out.push_str("[");
        for (i, item) in self.iter().enumerate() {
            if i > 0 {
                w.out.push_str(",");
            }
            item.write_json(w);
        }
        w.out.push_str("]");
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn write_json(&self, w: &mut Writer) {
        self.as_slice().write_json(w);
    }
}

impl<T: ToJson + ?Sized> ToJson for &T {
    fn write_json(&self, w: &mut Writer) {
        (**self).write_json(w);
    }
}

impl ToJson for TaskView {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("id", &self.id);
        w.field("state", self.state.as_str());
        w.field("expiresAtMs", &self.expires_at_ms);
        w.field("attempts", &self.attempts);
        w.field("maxAttempts", &self.max_attempts);
        w.field("progress", &u64::from(self.progress));
        w.field("version", &self.version);
        w.some("resultRef", &self.result_ref);
        w.some("resultHash", &self.result_hash);
        w.some("error", &self.error);
        // The lifecycle fields, in the serde writer's order (task/json.rs),
        // each left out at its default so a seed task keeps its shape.
        w.some("deadlineAtMs", &self.deadline_at_ms);
        w.some("unknownGraceMs", &self.unknown_grace_ms);
        if self.continuations > 0 {
            w.field("continuations", &self.continuations);
        }
        w.some("artifactRef", &self.artifact_ref);
        w.some("artifactHash", &self.artifact_hash);
        w.some("question", &self.question);
        if let Some(d) = &self.decision {
            w.field("decision", d.kind.as_str());
            w.field("decisionVersion", &d.version);
            w.some("decisionReason", &d.reason);
        }
        #[cfg(feature = "steps")]
        steps::task_plan(w, self.plan.as_deref());
        #[cfg(feature = "steps")]
        ledger::task_ledger(w, self.ledger.as_deref());
        w.close();
    }
}

impl ToJson for Event {
    /// The serde writer's output exactly (event/json.rs): `type`, `atMs`,
    /// the kind's fields, `attempt` last (before `leaseMs` on `start` and
    /// `heartbeat`).
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("type", self.kind().as_str());
        w.field("atMs", &self.at_ms().get());
        let attempt = self.attempt();
        match self {
            Event::Start {
                worker, lease_ms, ..
            } => {
                w.field("worker", worker);
                w.some("attempt", &attempt);
                w.some("leaseMs", &lease_ms.map(|l| l.get()));
                #[cfg(feature = "steps")]
                if let Event::Start { plan, .. } = self {
                    steps::start_plan(w, plan.as_ref());
                }
            }
            #[cfg(feature = "steps")]
            Event::Step { report, .. } => steps::report(w, report),
            #[cfg(feature = "steps")]
            Event::Reserve { .. }
            | Event::Settle { .. }
            | Event::Effect { .. }
            | Event::Exhaust { .. } => {
                ledger::event(w, self);
            }
            Event::Progress {
                progress, cursor, ..
            } => {
                w.field("progress", &u64::from(progress.get()));
                w.field("cursor", cursor);
            }
            Event::Succeed {
                result_ref,
                result_hash,
                ..
            } => {
                w.field("resultRef", result_ref.as_str());
                w.field("resultHash", result_hash.as_str());
            }
            Event::Fail {
                error, retryable, ..
            } => {
                w.field("error", error);
                w.field("retryable", retryable);
            }
            Event::Heartbeat { lease_ms, .. } => {
                w.some("attempt", &attempt);
                w.some("leaseMs", &lease_ms.map(|l| l.get()));
            }
            Event::Hold {
                artifact_ref,
                artifact_hash,
                question,
                ..
            } => {
                w.field("artifactRef", artifact_ref.as_str());
                w.field("artifactHash", artifact_hash.as_str());
                w.some("question", question);
            }
            Event::CannotCancel { reason, .. } => w.some("reason", reason),
            Event::Cancel { reason, actor, .. } => {
                w.some("reason", reason);
                w.some("actor", &actor.as_ref().map(|a| a.as_str()));
            }
            Event::Decide {
                decision,
                artifact_hash,
                version,
                reason,
                actor,
                ..
            } => {
                w.field("decision", decision.as_str());
                w.field("artifactHash", artifact_hash.as_str());
                w.field("version", version);
                w.some("reason", reason);
                w.some("actor", &actor.as_ref().map(|a| a.as_str()));
            }
            Event::Expire { .. }
            | Event::AckCancel { .. }
            | Event::Lapse { .. }
            | Event::Abandon { .. }
            | Event::Timeout { .. } => {}
        }
        if !matches!(self, Event::Start { .. } | Event::Heartbeat { .. }) {
            w.some("attempt", &attempt);
        }
        w.close();
    }
}

impl ToJson for HistoryEntry {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("version", &self.version);
        w.field("event", &self.event);
        w.close();
    }
}

impl ToJson for Rejection {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("version", &self.version);
        w.field("reason", self.reason.as_str());
        w.close();
    }
}

impl ToJson for MergeOutcome {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("mode", self.mode.as_str());
        w.field("changed", &self.changed);
        w.field("applied", &self.applied);
        w.field("rejected", &self.rejected);
        let next = match self.next {
            Next::None => "none",
            Next::Snapshot => "snapshot",
        };
        w.field("next", next);
        if let Some(reason) = self.reason {
            w.field("reason", reason.as_str());
        }
        w.close();
    }
}

impl ToJson for Mirror {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("taskId", self.task_id());
        w.field("task", &self.task());
        if let Some(epoch) = self.epoch() {
            w.field("epoch", epoch);
        }
        w.close();
    }
}

/// `{"<key>":<value>}`, `{"<key>":<value>,"<more>":<value>}`: the small
/// envelopes a binding wraps values in.
pub fn object(fields: &[(&str, &dyn ToJsonDyn)]) -> String {
    let mut w = Writer::default();
    w.open();
    for (key, value) in fields {
        w.key(key);
        value.write_dyn(&mut w);
    }
    w.close();
    w.finish()
}

/// [`ToJson`] as a trait object, for [`object`].
pub trait ToJsonDyn {
    /// Appends the JSON of `self` to `w`.
    fn write_dyn(&self, w: &mut Writer);
}

impl<T: ToJson + ?Sized> ToJsonDyn for T {
    fn write_dyn(&self, w: &mut Writer) {
        self.write_json(w);
    }
}

/// Writes `value` as compact JSON.
pub fn write<T: ToJson + ?Sized>(value: &T) -> String {
    let mut w = Writer::default();
    value.write_json(&mut w);
    w.finish()
}

mod follow;

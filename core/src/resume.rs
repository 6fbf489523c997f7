//! Cursor resume: what a reconnecting client receives.
//!
//! A client sends the last version it saw (the cursor). The answer is one
//! of three modes:
//! - `caught-up`: nothing new;
//! - `delta`: the missing history entries, when the gap fits the
//!   retention window (a gap exactly equal to the window is still a delta);
//! - `snapshot`: the current task, to be swapped in whole.
//!
//! ```json
//! {"mode":"delta","events":[{"version":4,"event":{…}},{"version":5,"event":{…}}],"task":{…}}
//! ```

use alloc::{string::String, vec::Vec};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::json::{self, Fields, FromJson, Path, Value};
use crate::task::{HistoryEntry, TaskView};
use crate::value::NonBlank;

/// The default retention window, in versions (the seed's 8).
pub const DEFAULT_RETENTION_VERSIONS: u64 = 8;

/// Whether a long-poll is held (PROTOCOL.md §Resume, §Epoch) rather than
/// answered at once: it asked to wait (`wait_ms` > 0), its answer is
/// `caught-up`, what it follows is still live (a terminal task, or a batch
/// whose tasks all are, never changes again), and it was asked within the
/// store's epoch ([`same_epoch`]).
///
/// A client from another history is answered at once, so that the
/// answer's epoch tells it the history changed within one round trip:
/// after a restore to the very version it holds, its cursor alone would
/// be held as `caught-up` until something happened to the task.
pub fn worth_holding(wait_ms: u64, mode: ResumeMode, live: bool, same_epoch: bool) -> bool {
    wait_ms > 0 && mode == ResumeMode::CaughtUp && live && same_epoch
}

/// Whether a request that sent `asked` (its `epoch` parameter: the epoch
/// the client holds) was asked within the store's `epoch`. A request
/// without one (an older client, or one that knows no epoch yet) is.
pub fn same_epoch(asked: Option<&str>, epoch: &str) -> bool {
    asked.map_or(true, |asked| asked == epoch)
}

/// The three answer modes, spelled `caught-up`, `delta`, `snapshot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResumeMode {
    /// Nothing new since the cursor.
    CaughtUp,
    /// The entries after the cursor.
    Delta,
    /// The whole current task.
    Snapshot,
}

impl ResumeMode {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ResumeMode::CaughtUp => "caught-up",
            ResumeMode::Delta => "delta",
            ResumeMode::Snapshot => "snapshot",
        }
    }
}

/// Which answer a cursor gets, decided from versions alone, so that a
/// store can fetch exactly the rows it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumePlan {
    /// Answer `caught-up`.
    CaughtUp,
    /// Answer `delta` with the entries whose version is above the cursor.
    Delta,
    /// Answer `snapshot`.
    Snapshot,
}

impl ResumePlan {
    /// The answer this plan gives for a task now at `view`, the one place
    /// an answer is built from a plan (the book, both server stores and the
    /// server's hub). `delta` runs for [`ResumePlan::Delta`] only and
    /// fetches the entries above the cursor, oldest first: a store reads
    /// them, the hub takes them from memory and fails when memory lacks
    /// some. Its error is the answer's.
    ///
    /// A task with a plan (PROTOCOL.md §Steps), a ledger or an `exhaust`
    /// (§Budgets and side effects) gets a snapshot instead of a delta:
    /// the browser page's build does not know the `step` event, nor
    /// `reserve`, `settle`, `effect` or `exhaust`
    /// (its 40 KB gate has no room for the rules), and a delta it cannot
    /// read would stop it, while a snapshot's `steps` it ignores. A
    /// snapshot of a task is small (its view, O(steps)), so a client that
    /// knows steps loses only the entries' list.
    pub fn answer<E>(
        self,
        view: TaskView,
        delta: impl FnOnce() -> Result<Vec<HistoryEntry>, E>,
    ) -> Result<ResumeAnswer, E> {
        #[cfg(feature = "steps")]
        let self_ = match self {
            ResumePlan::Delta if view.followed_by_snapshots() => ResumePlan::Snapshot,
            other => other,
        };
        #[cfg(not(feature = "steps"))]
        let self_ = self;
        Ok(match self_ {
            ResumePlan::CaughtUp => ResumeAnswer::CaughtUp { task: Some(view) },
            ResumePlan::Delta => ResumeAnswer::Delta {
                events: delta()?,
                task: Some(view),
            },
            ResumePlan::Snapshot => ResumeAnswer::Snapshot { task: view },
        })
    }
}

/// Answers a client at `cursor` from the latest entries a server keeps in
/// memory (`recent`, oldest first, ending at `view`'s version), exactly
/// as from its store ([`plan_resume`]): `None` when they do not reach back
/// to the cursor, and the store must answer. The reference server's hub
/// wakes a held request with the task's latest state and answers it
/// from here, without a read.
pub fn answer_from_recent<'a>(
    view: &TaskView,
    recent: impl IntoIterator<Item = &'a HistoryEntry>,
    cursor: u64,
    retention: u64,
) -> Option<ResumeAnswer> {
    let mut recent = recent.into_iter().peekable();
    let from_memory = move || {
        // A gap between the cursor and the oldest entry held: not enough.
        let first = recent.peek().ok_or(())?.version;
        if first > cursor.saturating_add(1) {
            return Err(());
        }
        Ok(recent.filter(|e| e.version > cursor).cloned().collect())
    };
    plan_resume(view.version, cursor, retention)
        .answer(view.clone(), from_memory)
        .ok()
}

/// Decides the answer for a client at `cursor` when the task is at
/// `version`.
///
/// A cursor ahead of the task gets a snapshot, not `caught-up` (fix 8): the
/// client holds a view the server never had (a reset store, another
/// server's task), and only a snapshot can correct it.
pub fn plan_resume(version: u64, cursor: u64, retention: u64) -> ResumePlan {
    if cursor > version {
        ResumePlan::Snapshot
    } else if cursor == version {
        ResumePlan::CaughtUp
    } else if version - cursor > retention {
        ResumePlan::Snapshot
    } else {
        ResumePlan::Delta
    }
}

/// A resume answer. The server always sends `task` (without history); a
/// minimal backend may leave it out of `caught-up` and `delta` answers.
#[derive(Debug, Clone, PartialEq)]
pub enum ResumeAnswer {
    /// Nothing new.
    CaughtUp {
        /// The task as the server has it.
        task: Option<TaskView>,
    },
    /// The entries after the cursor, oldest first.
    Delta {
        /// The missing entries.
        events: Vec<HistoryEntry>,
        /// The task after the last entry.
        task: Option<TaskView>,
    },
    /// The whole current task.
    Snapshot {
        /// The task as the server has it.
        task: TaskView,
    },
}

impl ResumeAnswer {
    /// The answer's mode.
    pub fn mode(&self) -> ResumeMode {
        match self {
            ResumeAnswer::CaughtUp { .. } => ResumeMode::CaughtUp,
            ResumeAnswer::Delta { .. } => ResumeMode::Delta,
            ResumeAnswer::Snapshot { .. } => ResumeMode::Snapshot,
        }
    }

    /// The server's task, when the answer carries it.
    pub fn task(&self) -> Option<&TaskView> {
        match self {
            ResumeAnswer::CaughtUp { task } | ResumeAnswer::Delta { task, .. } => task.as_ref(),
            ResumeAnswer::Snapshot { task } => Some(task),
        }
    }

    /// The entries of a delta; empty for the other modes.
    pub fn events(&self) -> &[HistoryEntry] {
        match self {
            ResumeAnswer::Delta { events, .. } => events,
            _ => &[],
        }
    }

    /// The entries of a delta, moved out; empty for the other modes.
    pub fn into_events(self) -> Vec<HistoryEntry> {
        match self {
            ResumeAnswer::Delta { events, .. } => events,
            _ => Vec::new(),
        }
    }
}

impl Serialize for ResumeAnswer {
    /// Always writes `mode`, `events` (empty unless a delta) and, when
    /// known, `task`: one shape for every mode keeps clients simple.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ResumeAnswer", 3)?;
        st.serialize_field("mode", &self.mode())?;
        st.serialize_field("events", self.events())?;
        match self.task() {
            Some(task) => st.serialize_field("task", task)?,
            None => st.skip_field("task")?,
        }
        st.end()
    }
}

impl FromJson for ResumeMode {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        use ResumeMode::*;
        json::variant(
            value,
            at,
            &[
                ("caught-up", CaughtUp),
                ("delta", Delta),
                ("snapshot", Snapshot),
            ],
        )
    }
}

impl FromJson for ResumeAnswer {
    /// An unknown `mode` is an error, never a silent default; `events`
    /// must be empty unless the answer is a delta; a snapshot needs `task`.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mode: ResumeMode = f.req("mode")?;
        let events: Vec<HistoryEntry> = f.get("events")?.unwrap_or_default();
        let task: Option<TaskView> = f.get("task")?;
        if mode != ResumeMode::Delta && !events.is_empty() {
            return Err(f.missing(
                "events",
                &crate::error::join(&["must be empty for mode ", mode.as_str()]),
            ));
        }
        Ok(match mode {
            ResumeMode::CaughtUp => ResumeAnswer::CaughtUp { task },
            ResumeMode::Delta => ResumeAnswer::Delta { events, task },
            ResumeMode::Snapshot => ResumeAnswer::Snapshot {
                task: task.ok_or_else(|| f.missing("task", "required for mode snapshot"))?,
            },
        })
    }
}

/// A resume answer with the epoch of the history it was read from
/// (PROTOCOL.md §Epoch): `{"mode":…,"events":[…],"task":{…},"epoch":"…"}`.
///
/// A store's history has an identity: a new database, or one restored
/// from a backup, starts another one, and its versions may be lower than
/// those a client holds. The epoch lets [`crate::Mirror`] tell "stale"
/// (same epoch, lower version: refused) from "another history" (take the
/// snapshot). `None`: a backend that sends no epoch, judged as before.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochAnswer {
    /// The epoch, when the backend sends one.
    pub epoch: Option<String>,
    /// The answer.
    pub answer: ResumeAnswer,
}

impl Serialize for EpochAnswer {
    /// The answer's own fields ([`ResumeAnswer`]'s serialization), then
    /// `epoch` when known.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("EpochAnswer", 4)?;
        st.serialize_field("mode", &self.answer.mode())?;
        st.serialize_field("events", self.answer.events())?;
        match self.answer.task() {
            Some(task) => st.serialize_field("task", task)?,
            None => st.skip_field("task")?,
        }
        match &self.epoch {
            Some(epoch) => st.serialize_field("epoch", epoch)?,
            None => st.skip_field("epoch")?,
        }
        st.end()
    }
}

impl FromJson for EpochAnswer {
    /// A [`ResumeAnswer`] plus an optional, non-blank `epoch`.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let epoch: Option<NonBlank> = f.get("epoch")?;
        Ok(EpochAnswer {
            epoch: epoch.map(NonBlank::into_string),
            answer: ResumeAnswer::from_json(value, at)?,
        })
    }
}

json::impl_deserialize!(ResumeMode, ResumeAnswer, EpochAnswer);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::testing::{from_json, to_json};

    #[test]
    fn answers_from_recent_entries_only_when_they_reach_back_to_the_cursor() {
        use crate::value::Millis;
        let mut view = crate::create_task(&crate::CreateTask::new("t", 0.0, 1e9, 1))
            .unwrap()
            .view()
            .clone();
        view.version = 5;
        let entry = |version| HistoryEntry {
            version,
            event: crate::Event::Expire {
                at_ms: Millis::new(1.0, "atMs").unwrap(),
            },
        };
        let recent = [entry(3), entry(4), entry(5)];
        let delta = answer_from_recent(&view, &recent, 2, 8).unwrap();
        assert_eq!(delta.mode(), ResumeMode::Delta);
        assert_eq!(
            delta.events().iter().map(|e| e.version).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert_eq!(
            answer_from_recent(&view, &recent, 4, 8)
                .unwrap()
                .events()
                .len(),
            1
        );
        // Entry 2 is not held: the store must answer.
        assert!(answer_from_recent(&view, &recent, 1, 8).is_none());
        assert!(answer_from_recent(&view, &[], 4, 8).is_none());
        // Modes that need no entries, as plan_resume says.
        assert_eq!(
            answer_from_recent(&view, &recent, 5, 8).unwrap().mode(),
            ResumeMode::CaughtUp
        );
        assert_eq!(
            answer_from_recent(&view, &recent, 6, 8).unwrap().mode(),
            ResumeMode::Snapshot
        );
        assert_eq!(
            answer_from_recent(&view, &recent, 3, 1).unwrap().mode(),
            ResumeMode::Snapshot
        );
    }

    #[test]
    fn holds_only_a_caught_up_live_long_poll_of_the_same_epoch() {
        use ResumeMode::*;
        assert!(worth_holding(1, CaughtUp, true, true));
        assert!(!worth_holding(1, CaughtUp, true, false));
        assert!(!worth_holding(0, CaughtUp, true, true));
        assert!(!worth_holding(1, CaughtUp, false, true));
        assert!(!worth_holding(1, Delta, true, true));
        assert!(!worth_holding(1, Snapshot, true, true));
        assert!(same_epoch(None, "e1") && same_epoch(Some("e1"), "e1"));
        // Another history, or one that differs only in case: compared
        // for equality, never ordered or folded.
        assert!(!same_epoch(Some("e0"), "e1") && !same_epoch(Some("E1"), "e1"));
    }

    #[test]
    fn plans_every_mode() {
        use ResumePlan::*;
        assert_eq!(plan_resume(5, 5, 8), CaughtUp);
        assert_eq!(plan_resume(5, 3, 8), Delta);
        assert_eq!(plan_resume(20, 0, 8), Snapshot);
        // A gap exactly equal to the window is still a delta.
        assert_eq!(plan_resume(8, 0, 8), Delta);
        assert_eq!(plan_resume(9, 0, 8), Snapshot);
        // A cursor ahead of the task gets a snapshot (fix 8).
        assert_eq!(plan_resume(5, 6, 8), Snapshot);
        // Retention 0: every gap is a snapshot.
        assert_eq!(plan_resume(1, 0, 0), Snapshot);
    }

    #[test]
    fn a_plan_builds_its_answer_and_fetches_entries_for_a_delta_only() {
        let task = crate::create_task(&crate::CreateTask::new("t", 0.0, 1e9, 1)).unwrap();
        let view = task.view().clone();
        let untouched = || -> Result<Vec<HistoryEntry>, ()> { panic!("fetched for no delta") };
        assert_eq!(
            ResumePlan::CaughtUp.answer(view.clone(), untouched),
            Ok(ResumeAnswer::CaughtUp {
                task: Some(view.clone())
            })
        );
        assert_eq!(
            ResumePlan::Snapshot.answer(view.clone(), untouched),
            Ok(ResumeAnswer::Snapshot { task: view.clone() })
        );
        let entry = HistoryEntry {
            version: 1,
            event: from_json(r#"{"type":"expire","atMs":1}"#, "event").unwrap(),
        };
        assert_eq!(
            ResumePlan::Delta.answer(view.clone(), || Ok::<_, ()>(vec![entry.clone()])),
            Ok(ResumeAnswer::Delta {
                events: vec![entry],
                task: Some(view.clone())
            })
        );
        // The fetch's error is the answer's (the hub's memory lacks entries).
        assert_eq!(ResumePlan::Delta.answer(view, || Err("gap")), Err("gap"));
    }

    #[test]
    fn answers_parse_strictly() {
        let err =
            from_json::<ResumeAnswer>(r#"{"mode":"later","events":[]}"#, "answer").unwrap_err();
        assert!(
            err.message.starts_with(
                "answer.mode: unknown value \"later\", expected one of caught-up, delta, snapshot"
            ),
            "{}",
            err.message
        );
        let err =
            from_json::<ResumeAnswer>(r#"{"mode":"snapshot","events":[]}"#, "answer").unwrap_err();
        assert_eq!(err.message, "answer.task: required for mode snapshot");
        let err = from_json::<ResumeAnswer>(
            r#"{"mode":"caught-up","events":[{"version":1,"event":{"type":"expire","atMs":1}}]}"#,
            "answer",
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "answer.events: must be empty for mode caught-up"
        );
        let ok: ResumeAnswer = from_json(r#"{"mode":"caught-up"}"#, "answer").unwrap();
        assert_eq!(to_json(&ok), r#"{"mode":"caught-up","events":[]}"#);
    }
}

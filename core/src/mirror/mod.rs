//! The client mirror: one task as a client knows it, never moving backwards.
//!
//! A client cannot trust the order or freshness of what reaches it: a
//! cache replays an old answer, a lagging replica answers late, two
//! overlapping requests finish in the wrong order. The mirror merges every
//! resume answer through the same reducer the server ran, so a delta is
//! checked entry by entry, and it refuses anything that would move its
//! version, attempts or progress backwards, nor a terminal task back to
//! life.
//!
//! It holds a [`TaskView`] (no history), so its memory is O(1) however long
//! the task runs.
//!
//! Use: `merge` each answer; when [`MergeOutcome::next`] is
//! [`Next::Snapshot`], ask the server for a snapshot and merge that.
//!
//! ## Epochs
//! Versions are only comparable within one history of the server's
//! store, its *epoch* (PROTOCOL.md §Epoch): a store wiped or restored
//! from a backup starts another one, and may answer with versions lower
//! than the mirror's. [`Mirror::merge_from`] takes the answer's epoch:
//! - another epoch than the mirror's: a snapshot is taken whatever its
//!   version (the local task is no evidence against another history) and
//!   reported with [`UpdateReason::EpochChanged`]; anything else is
//!   refused ([`RejectReason::OtherEpoch`]) and a snapshot asked for, so
//!   that no entry of one history is replayed on a task of another;
//! - the same epoch, or an answer without one (a backend that sends
//!   none): judged exactly as before, stale answers refused;
//! - a mirror that knows no epoch yet learns the answer's once it
//!   accepts that answer.

mod outcome;

use alloc::{string::String, string::ToString, vec::Vec};
pub use outcome::{MergeOutcome, Next, RejectReason, Rejection, UpdateReason};
use serde::Serialize;

use crate::json::{self, Fields, FromJson, Path, Value};

use crate::event::Event;
use crate::resume::ResumeAnswer;
use crate::task::{HistoryEntry, State, TaskView};
use crate::transition::Recorded;
use crate::value::{is_blank, NonBlank};
use crate::Error;

/// One task as a client knows it. See the module docs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    task_id: String,
    task: Option<TaskView>,
    /// The epoch `task` belongs to, once an answer told it.
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch: Option<String>,
}

impl FromJson for Mirror {
    /// The persisted shape: `{"taskId":"t1","task":{…}|null,"epoch"?:"…"}`.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let task_id: NonBlank = f.req("taskId")?;
        let task: Option<TaskView> = f.get("task")?;
        let epoch: Option<NonBlank> = f.get("epoch")?;
        if task.as_ref().is_some_and(|t| t.id != task_id.as_str()) {
            let at_task = Path::Key(&at, "task");
            return Err(json::invalid(
                "does not match taskId",
                Path::Key(&at_task, "id"),
            ));
        }
        Ok(Mirror {
            task_id: task_id.into_string(),
            task,
            epoch: epoch.map(NonBlank::into_string),
        })
    }
}

json::impl_deserialize!(Mirror);

impl Mirror {
    /// A mirror that knows nothing yet about task `task_id` (version 0).
    pub fn new(task_id: &str) -> Result<Self, Error> {
        if is_blank(task_id) {
            return Err(Error::invalid("taskId: must not be blank"));
        }
        Ok(Mirror {
            task_id: task_id.to_string(),
            task: None,
            epoch: None,
        })
    }

    /// A mirror that starts from a known task, of an unknown epoch.
    pub fn from_snapshot(task: TaskView) -> Self {
        Mirror {
            task_id: task.id.clone(),
            task: Some(task),
            epoch: None,
        }
    }

    /// The epoch the known task belongs to, once an answer told it.
    pub fn epoch(&self) -> Option<&str> {
        self.epoch.as_deref()
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task as known, if anything is known.
    pub fn task(&self) -> Option<&TaskView> {
        self.task.as_ref()
    }

    /// The version known: the cursor to resume from (0 when nothing is).
    pub fn version(&self) -> u64 {
        self.task.as_ref().map_or(0, |t| t.version)
    }

    /// The state known.
    pub fn state(&self) -> Option<State> {
        self.task.as_ref().map(|t| t.state)
    }

    /// The progress known (0 when nothing is).
    pub fn progress(&self) -> u8 {
        self.task.as_ref().map_or(0, |t| t.progress)
    }

    /// Merges one resume answer of a backend that sends no epoch. Never
    /// moves the version, the attempts or the progress of an attempt
    /// backwards; see [`MergeOutcome`].
    pub fn merge(&mut self, answer: &ResumeAnswer) -> MergeOutcome {
        self.merge_from(None, answer)
    }

    /// Merges one resume answer read from history `epoch` (`None`: the
    /// backend sends none). Within one epoch, as [`Mirror::merge`];
    /// across epochs, see the module docs.
    pub fn merge_from(&mut self, epoch: Option<&str>, answer: &ResumeAnswer) -> MergeOutcome {
        let mut out = MergeOutcome {
            mode: answer.mode(),
            changed: false,
            applied: Vec::new(),
            rejected: Vec::new(),
            next: Next::None,
            reason: None,
        };
        if let Some(task) = answer.task() {
            if task.id != self.task_id {
                out.reject(task.version, RejectReason::WrongTask);
                out.next = Next::Snapshot;
                return out;
            }
        }
        if let Some(epoch) = epoch {
            if self.epoch.as_deref().is_some_and(|known| known != epoch) {
                self.start_over(epoch, answer, &mut out);
                return out;
            }
        }
        self.merge_within(answer, &mut out);
        if self.epoch.is_none() && out.rejected.is_empty() && out.next == Next::None {
            // The answer agreed with the task (or taught it): the task is
            // of the answer's history.
            self.epoch = epoch.map(String::from);
        }
        out
    }

    /// An answer from another epoch: only its snapshot is taken, whole.
    fn start_over(&mut self, epoch: &str, answer: &ResumeAnswer, out: &mut MergeOutcome) {
        match answer {
            ResumeAnswer::Snapshot { task } => {
                self.task = Some(task.clone());
                self.epoch = Some(String::from(epoch));
                out.changed = true;
                out.applied.push(task.version);
                out.reason = Some(UpdateReason::EpochChanged);
            }
            _ => {
                let version = answer
                    .task()
                    .map(|t| t.version)
                    .or_else(|| answer.events().first().map(|e| e.version));
                out.reject(version.unwrap_or(0), RejectReason::OtherEpoch);
                out.next = Next::Snapshot;
            }
        }
    }

    fn merge_within(&mut self, answer: &ResumeAnswer, out: &mut MergeOutcome) {
        match answer {
            ResumeAnswer::CaughtUp { task } => self.merge_caught_up(task.as_ref(), out),
            ResumeAnswer::Snapshot { task } => self.merge_snapshot(task, out),
            ResumeAnswer::Delta { events, task } => self.merge_delta(events, task.as_ref(), out),
        }
    }

    fn merge_caught_up(&mut self, server: Option<&TaskView>, out: &mut MergeOutcome) {
        let Some(server) = server else { return };
        match &self.task {
            // A fresh mirror learns the task it will follow.
            None if server.version == 0 => {
                self.task = Some(server.clone());
                out.changed = true;
            }
            None => {
                out.reject(server.version, RejectReason::Diverged);
                out.next = Next::Snapshot;
            }
            Some(local) if server.version < local.version => {
                out.reject(server.version, RejectReason::StaleAnswer);
            }
            Some(local) if server.version == local.version && server != local => {
                out.reject(server.version, RejectReason::Diverged);
                out.next = Next::Snapshot;
            }
            // Equal, or ahead (the next resume brings the entries).
            Some(_) => {}
        }
    }

    fn merge_snapshot(&mut self, server: &TaskView, out: &mut MergeOutcome) {
        if let Some(local) = &self.task {
            if server.version < local.version {
                out.reject(server.version, RejectReason::StaleSnapshot);
                return;
            }
            if regresses(local, server) {
                out.reject(server.version, RejectReason::Regressed);
                return;
            }
            if local == server {
                return;
            }
        }
        self.task = Some(server.clone());
        out.changed = true;
        out.applied.push(server.version);
    }

    fn merge_delta(
        &mut self,
        events: &[HistoryEntry],
        server: Option<&TaskView>,
        out: &mut MergeOutcome,
    ) {
        let starts_history = events.first().is_some_and(|e| e.version == 1);
        let mut work = match (&self.task, server) {
            (Some(local), _) => local.clone(),
            // The immutable fields (id, expiry, attempt limit) come from
            // the server's task; the rest starts as every task starts.
            (None, Some(server)) if starts_history => server.initial(),
            // No base to replay on: the server's task is all there is.
            (None, Some(server)) => return self.merge_snapshot(server, out),
            (None, None) => {
                out.reject(
                    events.first().map_or(0, |e| e.version),
                    RejectReason::NoBase,
                );
                out.next = Next::Snapshot;
                return;
            }
        };
        let before = self.version();
        let mut complete = true;
        for entry in events {
            if entry.version <= work.version {
                out.reject(entry.version, RejectReason::Duplicate);
                continue;
            }
            if entry.version != work.version + 1 {
                out.reject(entry.version, RejectReason::Gap);
                complete = false;
                break;
            }
            if !replays_identically(&mut work, entry) {
                out.reject(entry.version, RejectReason::Diverged);
                complete = false;
                break;
            }
            out.applied.push(entry.version);
        }
        if complete {
            if let Some(server) = server {
                let disagrees = server.version < work.version
                    || (server.version == work.version && server != &work);
                if disagrees && server.version >= before {
                    // The answer contradicts itself: keep nothing of it.
                    out.applied.clear();
                    out.reject(server.version, RejectReason::Diverged);
                    out.next = Next::Snapshot;
                    return;
                }
            }
        } else {
            out.next = Next::Snapshot;
        }
        if !out.applied.is_empty() || (self.task.is_none() && starts_history) {
            out.changed = true;
            self.task = Some(work);
        }
    }
}

/// True when swapping `local` for `server` would move attempts backwards,
/// the progress of an open attempt backwards (`running`, `unknown`,
/// `cancelling`, `cancel_ineffective` are all the same attempt at work),
/// or a terminal task back to a live state: none of these can happen on
/// a server, so such an answer is stale or foreign.
fn regresses(local: &TaskView, server: &TaskView) -> bool {
    server.attempts < local.attempts
        || (server.attempts == local.attempts
            && local.state.holds_attempt()
            && server.state.holds_attempt()
            && server.progress < local.progress)
        || (local.state.is_terminal() && !server.state.is_terminal())
}

/// Applies `entry` to `view` when the local reducer produces exactly that
/// entry (same version, same recorded event); otherwise leaves `view`
/// untouched and returns false.
fn replays_identically(view: &mut TaskView, entry: &HistoryEntry) -> bool {
    // Decide what this step would record before running it, so that a
    // mismatch never has to be undone: an expiry or a timeout is recorded
    // at its own time, whatever triggered it.
    let recorded_at = |at_ms: f64| entry.event.at_ms().get() == at_ms;
    let as_recorded = match view.would_record(&entry.event) {
        Recorded::Incoming => true,
        Recorded::Expiry => {
            matches!(entry.event, Event::Expire { .. }) && recorded_at(view.expires_at_ms)
        }
        Recorded::Timeout => {
            matches!(entry.event, Event::Timeout { .. })
                && view.deadline_at_ms.is_some_and(recorded_at)
        }
    };
    if !as_recorded {
        return false;
    }
    let (outcome, _) = view.judge_versioned(&entry.event, true);
    outcome.changed && view.version == entry.version
}

#[cfg(test)]
mod tests;

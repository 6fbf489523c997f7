//! [`BatchMirror`]: a batch as a client knows it, never moving backwards.
//!
//! It holds the batch cursor and one [`Mirror`] per task, in item order,
//! and nothing else. Each per-task answer goes through its task's mirror,
//! so the single-task rules hold per task; the batch adds its own:
//! - another batch's answer is refused (`wrong-batch`);
//! - within one epoch, an answer whose cursor is behind the mirror's is
//!   refused whole (`stale-answer`, `stale-snapshot`): a replay, or a
//!   lagging replica; a `caught-up` ahead of it cannot be trusted
//!   (`diverged`);
//! - an answer of another epoch is taken only as a snapshot, whole, every
//!   task starting over from it (reason `epoch-changed`); anything else of
//!   another epoch is refused (`other-epoch`);
//! - a task left behind the view its answer carries (entries missing
//!   from its delta) did not apply: within a batch, no later delta would
//!   bring them;
//! - the cursor moves only when every per-task answer applied; otherwise,
//!   and whenever the mirror does not know every task of the batch, or
//!   the server says none is open while a mirror is not terminal, the
//!   merge asks for a snapshot of the whole batch ([`Next::Snapshot`]).
//!
//! Tasks are matched to mirrors by id with a scan that resumes where the
//! previous match was: answers list tasks in item order, so a whole
//! answer is matched in one pass, without an index.

use alloc::{string::String, vec, vec::Vec};
use serde::{Serialize, Serializer};

use super::BatchAnswer;
use crate::mirror::{MergeOutcome, Mirror, Next, RejectReason, Rejection, UpdateReason};
use crate::resume::{ResumeAnswer, ResumeMode};
use crate::task::TaskView;
use crate::value::is_blank;
use crate::Error;

/// A batch as a client knows it. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchMirror {
    batch_id: String,
    cursor: u64,
    /// The batch's size, as the last accepted answer gave it.
    size: u64,
    /// How many tasks the server counted open in the last accepted answer.
    open: u64,
    epoch: Option<String>,
    tasks: Vec<Mirror>,
}

/// What one element of an answer's `tasks` did.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskOutcome {
    /// Where the task is in [`BatchMirror::tasks`]; `None` when the answer
    /// named no task of the batch.
    pub index: Option<usize>,
    /// What its mirror made of it.
    pub outcome: MergeOutcome,
}

/// What merging one [`BatchAnswer`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchOutcome {
    /// The answer's mode.
    pub mode: ResumeMode,
    /// One per element of the answer's `tasks`, in order; empty when the
    /// answer was refused whole.
    pub tasks: Vec<TaskOutcome>,
    /// Refusals of the answer as a whole (each with the answer's cursor).
    pub rejected: Vec<Rejection>,
    /// The cursor moved.
    pub advanced: bool,
    /// What to do next.
    pub next: Next,
    /// Set when the batch started over on another epoch.
    pub reason: Option<UpdateReason>,
}

impl BatchOutcome {
    fn refuse(&mut self, version: u64, reason: RejectReason) {
        self.rejected.push(Rejection { version, reason });
    }

    /// Some task's version rose (or it became known).
    pub fn changed(&self) -> bool {
        self.tasks.iter().any(|t| t.outcome.changed)
    }
}

impl BatchMirror {
    /// A mirror that knows nothing yet about batch `batch_id` (cursor 0:
    /// its first answer is a snapshot).
    pub fn new(batch_id: &str) -> Result<BatchMirror, Error> {
        if is_blank(batch_id) {
            return Err(Error::invalid("batchId: must not be blank"));
        }
        Ok(BatchMirror {
            batch_id: String::from(batch_id),
            cursor: 0,
            size: 0,
            open: 0,
            epoch: None,
            tasks: Vec::new(),
        })
    }

    /// A mirror that starts from every task of the batch as known at
    /// `cursor` (a create's answer), in item order, of the epoch `epoch`
    /// when known.
    pub fn from_tasks(
        batch_id: &str,
        cursor: u64,
        epoch: Option<String>,
        tasks: Vec<TaskView>,
    ) -> Result<BatchMirror, Error> {
        let mut mirror = BatchMirror::new(batch_id)?;
        mirror.cursor = cursor;
        mirror.epoch = epoch.filter(|e| !is_blank(e));
        mirror.tasks = tasks.into_iter().map(Mirror::from_snapshot).collect();
        mirror.size = mirror.tasks.len() as u64;
        mirror.open = mirror.tasks.iter().filter(|m| !terminal(m)).count() as u64;
        Ok(mirror)
    }

    /// The batch id.
    pub fn batch_id(&self) -> &str {
        &self.batch_id
    }

    /// The cursor to resume from (0 when nothing is known).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The batch's size, once an answer told it.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many tasks the server counted open in the last answer taken.
    pub fn open(&self) -> u64 {
        self.open
    }

    /// The epoch the batch's tasks belong to, once an answer told it.
    pub fn epoch(&self) -> Option<&str> {
        self.epoch.as_deref()
    }

    /// The tasks known, in item order.
    pub fn tasks(&self) -> &[Mirror] {
        &self.tasks
    }

    /// Every task of the batch is known.
    pub fn is_complete(&self) -> bool {
        self.cursor > 0 && self.tasks.len() as u64 == self.size
    }

    /// Nothing will change any more: every task is known and terminal, and
    /// the server counted none open.
    pub fn is_done(&self) -> bool {
        self.is_complete() && self.open == 0 && self.tasks.iter().all(terminal)
    }

    /// Merges one answer; see the module docs and [`BatchOutcome`].
    pub fn merge(&mut self, answer: &BatchAnswer) -> BatchOutcome {
        let mut out = BatchOutcome {
            mode: answer.mode,
            tasks: Vec::new(),
            rejected: Vec::new(),
            advanced: false,
            next: Next::None,
            reason: None,
        };
        let at = answer.cursor;
        if answer.batch_id != self.batch_id {
            out.refuse(at, RejectReason::WrongBatch);
            out.next = Next::Snapshot;
            return out;
        }
        let other_epoch = matches!((&self.epoch, &answer.epoch), (Some(a), Some(b)) if a != b);
        match answer.mode {
            _ if other_epoch && answer.mode != ResumeMode::Snapshot => {
                out.refuse(at, RejectReason::OtherEpoch);
                out.next = Next::Snapshot;
            }
            ResumeMode::Snapshot if other_epoch => {
                // Another history: no local task is evidence against it.
                self.tasks.clear();
                out.reason = Some(UpdateReason::EpochChanged);
                self.merge_snapshot(answer, &mut out);
                for task in out.tasks.iter_mut().filter(|t| t.outcome.changed) {
                    task.outcome.reason = Some(UpdateReason::EpochChanged);
                }
            }
            ResumeMode::CaughtUp if at < self.cursor => out.refuse(at, RejectReason::StaleAnswer),
            ResumeMode::CaughtUp if at > self.cursor => {
                out.refuse(at, RejectReason::Diverged);
                out.next = Next::Snapshot;
            }
            ResumeMode::CaughtUp => {}
            ResumeMode::Delta if at <= self.cursor => out.refuse(at, RejectReason::StaleAnswer),
            ResumeMode::Delta => self.merge_delta(answer, &mut out),
            ResumeMode::Snapshot if at < self.cursor => out.refuse(at, RejectReason::StaleSnapshot),
            ResumeMode::Snapshot => self.merge_snapshot(answer, &mut out),
        }
        if out.tasks.iter().any(|t| t.outcome.next == Next::Snapshot) {
            out.next = Next::Snapshot;
        }
        if out.rejected.is_empty() && out.next == Next::None {
            out.advanced = at != self.cursor;
            self.cursor = at;
            self.size = answer.size;
            self.open = answer.open;
            if answer.epoch.is_some() {
                self.epoch.clone_from(&answer.epoch);
            }
            let stuck = self.open == 0 && !self.tasks.iter().all(terminal);
            if !self.is_complete() || stuck {
                out.next = Next::Snapshot;
            }
        }
        out
    }

    fn merge_delta(&mut self, answer: &BatchAnswer, out: &mut BatchOutcome) {
        let mut from = 0;
        for element in &answer.tasks {
            let found = element
                .task()
                .and_then(|task| find(&self.tasks, &task.id, &mut from));
            let task = match found.and_then(|i| self.tasks.get_mut(i).map(|m| (i, m))) {
                Some((index, mirror)) => {
                    let mut outcome = mirror.merge(element);
                    // Left behind the task the answer carries: the next
                    // delta, from the new cursor, would not bring the
                    // entries between (a single task's next resume would).
                    let behind = element.task().filter(|t| t.version > mirror.version());
                    if let Some(task) = behind.filter(|_| outcome.next == Next::None) {
                        outcome.rejected.push(Rejection {
                            version: task.version,
                            reason: RejectReason::Gap,
                        });
                        outcome.next = Next::Snapshot;
                    }
                    TaskOutcome {
                        index: Some(index),
                        outcome,
                    }
                }
                None => unmatched(element),
            };
            out.tasks.push(task);
        }
    }

    /// Takes every task from the snapshot: each through its own mirror
    /// when the snapshot lists the tasks known, in their order (a replay,
    /// a repair); otherwise (the first answer, another epoch, a batch
    /// known in part) into new mirrors, in the snapshot's order.
    fn merge_snapshot(&mut self, answer: &BatchAnswer, out: &mut BatchOutcome) {
        let same = self.tasks.len() == answer.tasks.len()
            && self
                .tasks
                .iter()
                .zip(&answer.tasks)
                .all(|(m, t)| t.task().is_some_and(|t| t.id == m.task_id()));
        if !same {
            self.tasks.clear();
        }
        for (index, element) in answer.tasks.iter().enumerate() {
            if !same {
                let fresh = element.task().and_then(|t| Mirror::new(&t.id).ok());
                match fresh {
                    Some(mirror) => self.tasks.push(mirror),
                    None => {
                        out.tasks.push(unmatched(element));
                        continue;
                    }
                }
            }
            let at = if same { index } else { self.tasks.len() - 1 };
            if let Some(mirror) = self.tasks.get_mut(at) {
                out.tasks.push(TaskOutcome {
                    index: Some(at),
                    outcome: mirror.merge(element),
                });
            }
        }
    }
}

fn terminal(mirror: &Mirror) -> bool {
    mirror.state().is_some_and(|s| s.is_terminal())
}

/// An element that names no task of the batch: refused, and the whole
/// batch asked for again.
fn unmatched(element: &ResumeAnswer) -> TaskOutcome {
    let version = element
        .task()
        .map(|t| t.version)
        .or_else(|| element.events().first().map(|e| e.version))
        .unwrap_or(0);
    TaskOutcome {
        index: None,
        outcome: MergeOutcome {
            mode: element.mode(),
            changed: false,
            applied: Vec::new(),
            rejected: vec![Rejection {
                version,
                reason: RejectReason::WrongTask,
            }],
            next: Next::Snapshot,
            reason: None,
        },
    }
}

/// The index of the mirror of `id`, searching from `from` on, then from
/// the start; `from` moves past it.
fn find(mirrors: &[Mirror], id: &str, from: &mut usize) -> Option<usize> {
    let n = mirrors.len();
    // `checked_rem`, not `%`: n is never 0 here, but a `%` would bring
    // its divide-by-zero panic (and message) into the page.
    let found = (0..n)
        .filter_map(|k| (*from + k).checked_rem(n))
        .find(|&i| mirrors.get(i).is_some_and(|m| m.task_id() == id))?;
    *from = found + 1;
    Some(found)
}

impl BatchMirror {
    /// The batch as a snapshot answer: its persisted form (and what
    /// restores it: merged into [`BatchMirror::new`], one reader serves
    /// the server's answers and the stored batch).
    pub fn to_snapshot(&self) -> BatchAnswer {
        BatchAnswer {
            batch_id: self.batch_id.clone(),
            mode: ResumeMode::Snapshot,
            cursor: self.cursor,
            size: self.size,
            open: self.open,
            tasks: self
                .tasks
                .iter()
                .filter_map(|m| m.task().cloned())
                .map(|task| ResumeAnswer::Snapshot { task })
                .collect(),
            epoch: self.epoch.clone(),
        }
    }
}

impl Serialize for BatchMirror {
    /// [`BatchMirror::to_snapshot`]'s answer.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_snapshot().serialize(s)
    }
}

#[cfg(test)]
mod tests;

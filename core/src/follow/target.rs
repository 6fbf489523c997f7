//! What a [`Follow`](super::Follow) follows: one task, or a batch. The
//! loop (requests, statuses, backoff, SSE and its fallback, the network,
//! stop) is the same for both and decides on a [`Merged`] alone; what
//! differs is here: the cursor, how an answer is read and merged, which
//! events the page hears about it, and when it is all over.

use super::batch::BatchTarget;
use super::output::{FollowEvent, Reject, Update};
use super::FollowConfig;
use crate::mirror::{MergeOutcome, Mirror, Next, Rejection};
use crate::resume::ResumeAnswer;
use crate::task::TaskView;
use crate::Error;
use alloc::{string::String, vec::Vec};

/// What one answer did, as the loop needs to know it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Merged {
    /// Something the page sees changed (a version rose, the cursor moved).
    pub changed: bool,
    /// Something was refused.
    pub rejected: bool,
    /// What to ask next.
    pub next: Next,
    /// Nothing will change any more.
    pub done: bool,
}

/// The followed thing.
#[derive(Debug)]
pub(super) enum Target {
    Task(TaskTarget),
    Batch(BatchTarget),
}

/// One task: its mirror.
#[derive(Debug)]
pub(super) struct TaskTarget {
    pub mirror: Mirror,
    /// The cursor to send while the mirror knows nothing
    /// (`watch(…, {cursor})`), until the first answer.
    pub hint: u64,
    /// Rejections not yet reported in an update.
    pub unreported: Vec<Rejection>,
}

impl Target {
    /// The cursor of the next request.
    pub fn cursor(&self) -> u64 {
        match self {
            Target::Task(t) if t.mirror.version() == 0 && t.mirror.task().is_none() => t.hint,
            Target::Task(t) => t.mirror.version(),
            Target::Batch(b) => b.mirror.cursor(),
        }
    }

    /// The epoch the mirror holds, sent with each long-poll so that a
    /// server from another history answers it at once (PROTOCOL.md
    /// §Epoch) instead of holding a cursor that happens to match.
    pub fn epoch(&self) -> Option<&str> {
        match self {
            Target::Task(t) => t.mirror.epoch(),
            Target::Batch(b) => b.mirror.epoch(),
        }
    }

    /// What a 404 or a 403 is about, for messages.
    pub fn noun(&self) -> &'static str {
        match self {
            Target::Task(_) => "task",
            Target::Batch(_) => "batch",
        }
    }

    /// The SSE event that carries answers (PROTOCOL.md: `resume` for a
    /// task, `batch` for a batch; an unnamed `message` is read too).
    pub fn answers_in(&self, event: &str) -> bool {
        event == "message"
            || match self {
                Target::Task(_) => event == "resume",
                Target::Batch(_) => event == "batch",
            }
    }

    /// Nothing will change any more.
    pub fn is_done(&self) -> bool {
        match self {
            Target::Task(t) => t.mirror.state().is_some_and(|s| s.is_terminal()),
            Target::Batch(b) => b.mirror.is_done(),
        }
    }

    /// The page's last word: the terminal task (a batch's tasks came in
    /// its updates).
    pub fn done_event(&self) -> FollowEvent {
        match self {
            Target::Task(t) => FollowEvent::Done(t.mirror.task().cloned()),
            Target::Batch(_) => FollowEvent::Done(None),
        }
    }

    /// Reads one answer and merges it; the page's events go to `events`.
    pub fn merge(
        &mut self,
        text: &str,
        config: &FollowConfig,
        events: &mut Vec<FollowEvent>,
    ) -> Result<Merged, Error> {
        match self {
            Target::Task(t) => t.merge(text, config, events),
            Target::Batch(b) => b.merge(text, config, events),
        }
    }
}

impl TaskTarget {
    fn merge(
        &mut self,
        text: &str,
        config: &FollowConfig,
        events: &mut Vec<FollowEvent>,
    ) -> Result<Merged, Error> {
        let crate::resume::EpochAnswer { epoch, answer } = (config.read_answer)(text)?;
        let outcome = self.mirror.merge_from(epoch.as_deref(), &answer);
        self.hint = 0;
        self.unreported.extend_from_slice(&outcome.rejected);
        let task = self.mirror.task();
        report(events, answer, &outcome, task, &mut self.unreported, None);
        let terminal = self.mirror.state().is_some_and(|s| s.is_terminal());
        Ok(Merged {
            changed: outcome.changed,
            rejected: !outcome.rejected.is_empty(),
            next: outcome.next,
            done: terminal,
        })
    }
}

/// The page's event about one task's merged answer: an update when its
/// version rose (with the entries applied, and what `unreported` held),
/// else a rejection when something was refused.
pub(super) fn report(
    events: &mut Vec<FollowEvent>,
    answer: ResumeAnswer,
    outcome: &MergeOutcome,
    task: Option<&TaskView>,
    unreported: &mut Vec<Rejection>,
    task_id: Option<String>,
) {
    if outcome.changed {
        // Moved out of the answer, not cloned: the page then carries no
        // copy of `Event::clone` (~1.2 KB of wasm for its fourteen kinds);
        // kept in place (`retain`), not collected anew (0.1 KB gzip; a
        // hand-written compaction measured 25 bytes more than `retain`).
        let mut entries = answer.into_events();
        entries.retain(|e| outcome.applied.contains(&e.version));
        events.push(FollowEvent::Update(Update {
            task: task.cloned(),
            mode: outcome.mode,
            applied: outcome.applied.clone(),
            events: entries,
            rejected: core::mem::take(unreported),
            reason: outcome.reason,
        }));
    } else if !outcome.rejected.is_empty() {
        events.push(FollowEvent::Reject(Reject {
            task_id,
            mode: outcome.mode,
            rejected: outcome.rejected.clone(),
            version: task.map_or(0, |t| t.version),
        }));
    }
}

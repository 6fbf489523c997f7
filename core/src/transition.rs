//! The pure state machine: one event in, one outcome out.
//!
//! ```text
//! queued ──start──▶ running ──succeed──▶ succeeded
//!   ▲                  │ ──fail (final)──▶ failed
//!   └──fail(retryable)─┘
//! any live state ──expire, or any event at/after expiresAtMs──▶ expired
//! ```
//!
//! Rules, in the order they are judged:
//! 1. A terminal task absorbs everything (`duplicate-result`,
//!    `result-conflict`, `duplicate-expire`, `terminal-conflict`).
//! 2. Expiry comes before anything else: an `expire` event, or any event
//!    with `atMs >= expiresAtMs`, expires the task, recorded at
//!    `expiresAtMs` so that a replay reproduces it.
//! 3. Then the event's own rule.
//!
//! Each change adds exactly one to `version` and one entry to the history;
//! an unchanged outcome changes nothing at all.

use serde::Serialize;

use crate::event::Event;
use crate::task::{HistoryEntry, State, Task, TaskView};
use crate::value::Millis;

/// Why an event did or did not change a task. Spelled in kebab-case on
/// the wire (`duplicate-result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// `start` on a queued task: running, attempts + 1, progress 0.
    Started,
    /// `start` on a running task (a duplicate).
    AlreadyRunning,
    /// `start` when out of attempts.
    NotStartable,
    /// `progress` above the current progress.
    Progress,
    /// `progress` below the current progress (dropped: progress is monotonic).
    StaleProgress,
    /// `progress` equal to the current progress (a duplicate).
    DuplicateProgress,
    /// `progress`, `succeed` or `fail` while not running.
    NotRunning,
    /// `succeed` on a running task.
    Succeeded,
    /// Retryable `fail` with attempts left: back to queued.
    Requeued,
    /// Final `fail`.
    Failed,
    /// The task expired.
    Expired,
    /// `expire` on an expired task (a duplicate).
    DuplicateExpire,
    /// `succeed` with the same `resultHash` on a succeeded task (a duplicate).
    DuplicateResult,
    /// `succeed` with a different `resultHash` on a succeeded task: two
    /// executions produced different content; for a human or an upper
    /// layer to resolve (fix 6).
    ResultConflict,
    /// Any other event on a terminal task.
    TerminalConflict,
    /// A callback id already applied to this task, with the same event.
    DuplicateCallback,
    /// A callback id already applied to this task, with a different event
    /// (fix 3).
    CallbackConflict,
}

impl Reason {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Started => "started",
            Reason::AlreadyRunning => "already-running",
            Reason::NotStartable => "not-startable",
            Reason::Progress => "progress",
            Reason::StaleProgress => "stale-progress",
            Reason::DuplicateProgress => "duplicate-progress",
            Reason::NotRunning => "not-running",
            Reason::Succeeded => "succeeded",
            Reason::Requeued => "requeued",
            Reason::Failed => "failed",
            Reason::Expired => "expired",
            Reason::DuplicateExpire => "duplicate-expire",
            Reason::DuplicateResult => "duplicate-result",
            Reason::ResultConflict => "result-conflict",
            Reason::TerminalConflict => "terminal-conflict",
            Reason::DuplicateCallback => "duplicate-callback",
            Reason::CallbackConflict => "callback-conflict",
        }
    }
}

/// What an event did, without the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The task changed (version + 1, one history entry).
    pub changed: bool,
    /// The event repeated something already known.
    pub duplicate: bool,
    /// The task just became terminal: one notification is due.
    pub notify: bool,
    /// Why.
    pub reason: Reason,
}

impl Outcome {
    pub(crate) const fn unchanged(reason: Reason, duplicate: bool) -> Self {
        Outcome {
            changed: false,
            duplicate,
            notify: false,
            reason,
        }
    }

    const fn changed(reason: Reason, notify: bool) -> Self {
        Outcome {
            changed: true,
            duplicate: false,
            notify,
            reason,
        }
    }
}

/// The seed's transition shape: the task after the event, and what
/// happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    /// The task after the event (the same task when unchanged).
    pub task: Task,
    /// The task changed.
    pub changed: bool,
    /// The event repeated something already known.
    pub duplicate: bool,
    /// The task just became terminal.
    pub notify: bool,
    /// Why.
    pub reason: Reason,
}

/// Which event the history records for a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The event as it came in.
    Incoming,
    /// `expire` at `expiresAtMs`, whatever triggered the expiry.
    Expiry,
}

/// Applies `event` to `task`. Takes the task by value and hands it back in
/// the transition, so nothing is copied: O(1) amortized, however long the
/// history (the seed copies the whole history on every event).
///
/// `event` is valid by construction (see [`Event`]), so this cannot fail.
pub fn apply_event(mut task: Task, event: Event) -> Transition {
    let outcome = task.apply(event);
    Transition::new(task, outcome)
}

/// Expires `task` now (a system action, recorded at `expiresAtMs` so that
/// a replay gives the same history): `expired`, or `duplicate-expire` /
/// `terminal-conflict` on a terminal task.
pub fn expire_task(mut task: Task) -> Transition {
    let outcome = task.expire();
    Transition::new(task, outcome)
}

impl Transition {
    fn new(task: Task, o: Outcome) -> Self {
        Transition {
            task,
            changed: o.changed,
            duplicate: o.duplicate,
            notify: o.notify,
            reason: o.reason,
        }
    }
}

/// What one event did to a [`TaskView`], with the history entry a store
/// must append when the task changed. A store that keeps the view in one
/// row and the history in another table uses this instead of [`Task`].
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What happened.
    pub outcome: Outcome,
    /// The entry to append (exactly when `outcome.changed`).
    pub entry: Option<HistoryEntry>,
}

impl Task {
    /// Applies `event` in place; see [`apply_event`].
    pub fn apply(&mut self, event: Event) -> Outcome {
        let (outcome, recorded) = self.view_mut().decide(&event);
        if outcome.changed {
            self.record(match recorded {
                Recorded::Incoming => event,
                Recorded::Expiry => self.expiry_event(),
            });
        }
        outcome
    }

    /// Expires the task in place; see [`expire_task`].
    pub fn expire(&mut self) -> Outcome {
        let outcome = self.view_mut().expire();
        if outcome.changed {
            self.record(self.expiry_event());
        }
        outcome
    }
}

impl TaskView {
    /// Applies `event` to the fields alone, with no history: what a client
    /// mirror does. Same rules as [`apply_event`].
    pub fn apply(&mut self, event: &Event) -> Outcome {
        self.decide(event).0
    }

    /// Applies `event` and returns the history entry to append, if any.
    pub fn step(&mut self, event: &Event) -> Step {
        let (outcome, recorded) = self.decide(event);
        let entry = outcome.changed.then(|| HistoryEntry {
            version: self.version,
            event: match recorded {
                Recorded::Incoming => event.clone(),
                Recorded::Expiry => self.expiry_event(),
            },
        });
        Step { outcome, entry }
    }

    /// Expires the view now and returns the history entry to append, if
    /// any; see [`expire_task`].
    pub fn expire_step(&mut self) -> Step {
        let outcome = self.expire();
        let entry = outcome.changed.then(|| HistoryEntry {
            version: self.version,
            event: self.expiry_event(),
        });
        Step { outcome, entry }
    }

    /// The event the history records for an expiry.
    pub fn expiry_event(&self) -> Event {
        Event::Expire {
            // expiresAtMs is finite and ≥ 0 for every task that passed
            // create_task or parsing; a hand-built view gets 0 instead of
            // a panic.
            at_ms: Millis::new(self.expires_at_ms, "expiresAtMs").unwrap_or_default(),
        }
    }

    pub(crate) fn decide(&mut self, event: &Event) -> (Outcome, Recorded) {
        use Reason::*;
        if self.state.is_terminal() {
            let outcome = match (event, self.state) {
                (Event::Succeed { result_hash, .. }, State::Succeeded) => {
                    if self.result_hash.as_deref() == Some(result_hash.as_str()) {
                        Outcome::unchanged(DuplicateResult, true)
                    } else {
                        Outcome::unchanged(ResultConflict, false)
                    }
                }
                (Event::Expire { .. }, State::Expired) => Outcome::unchanged(DuplicateExpire, true),
                _ => Outcome::unchanged(TerminalConflict, false),
            };
            return (outcome, Recorded::Incoming);
        }
        let outcome = match event {
            Event::Expire { .. } => return (self.expire(), Recorded::Expiry),
            _ if event.at_ms().get() >= self.expires_at_ms => {
                return (self.expire(), Recorded::Expiry)
            }
            Event::Start { .. } => {
                if self.state == State::Running {
                    return (Outcome::unchanged(AlreadyRunning, true), Recorded::Incoming);
                }
                if self.state != State::Queued || self.attempts >= self.max_attempts {
                    return (Outcome::unchanged(NotStartable, false), Recorded::Incoming);
                }
                self.state = State::Running;
                self.attempts += 1;
                self.progress = 0;
                Outcome::changed(Started, false)
            }
            _ if self.state != State::Running => Outcome::unchanged(NotRunning, false),
            Event::Progress { progress, .. } => {
                let progress = progress.get();
                if progress < self.progress {
                    Outcome::unchanged(StaleProgress, false)
                } else if progress == self.progress {
                    Outcome::unchanged(DuplicateProgress, true)
                } else {
                    self.progress = progress;
                    Outcome::changed(Progress, false)
                }
            }
            Event::Succeed {
                result_ref,
                result_hash,
                ..
            } => {
                self.state = State::Succeeded;
                self.progress = 100;
                self.result_ref = Some(result_ref.to_string());
                self.result_hash = Some(result_hash.to_string());
                // A success supersedes an error left by a retried failure (fix 5).
                self.error = None;
                Outcome::changed(Succeeded, true)
            }
            Event::Fail {
                error, retryable, ..
            } => {
                self.error = Some(error.clone());
                if *retryable && self.attempts < self.max_attempts {
                    self.state = State::Queued;
                    self.progress = 0;
                    Outcome::changed(Requeued, false)
                } else {
                    self.state = State::Failed;
                    Outcome::changed(Failed, true)
                }
            }
        };
        if outcome.changed {
            self.version = self.version.saturating_add(1);
        }
        (outcome, Recorded::Incoming)
    }

    pub(crate) fn expire(&mut self) -> Outcome {
        match self.state {
            State::Expired => Outcome::unchanged(Reason::DuplicateExpire, true),
            s if s.is_terminal() => Outcome::unchanged(Reason::TerminalConflict, false),
            _ => {
                self.state = State::Expired;
                self.version = self.version.saturating_add(1);
                Outcome::changed(Reason::Expired, true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{create_task, CreateTask};
    use crate::value::{Millis, Percent};

    fn view() -> TaskView {
        let input = CreateTask {
            id: "t".into(),
            now_ms: 0.0,
            ttl_ms: 100.0,
            max_attempts: 1,
        };
        create_task(&input).unwrap().view().clone()
    }

    fn at(ms: f64) -> Millis {
        Millis::new(ms, "atMs").unwrap()
    }

    #[test]
    fn step_returns_the_entry_a_store_appends() {
        let mut v = view();
        let start = Event::Start {
            at_ms: at(1.0),
            worker: "w".into(),
        };
        let step = v.step(&start);
        assert_eq!(step.outcome.reason, Reason::Started);
        assert_eq!(
            step.entry,
            Some(HistoryEntry {
                version: 1,
                event: start.clone()
            })
        );
        // Unchanged: no entry, nothing touched.
        let before = v.clone();
        let step = v.step(&start);
        assert_eq!(
            (step.outcome.reason, step.entry),
            (Reason::AlreadyRunning, None)
        );
        assert_eq!(v, before);
        // A late event records the expiry at expiresAtMs, not the event.
        let late = Event::Progress {
            at_ms: at(500.0),
            progress: Percent::new(5.0, "p").unwrap(),
            cursor: String::new(),
        };
        let step = v.step(&late);
        assert_eq!(step.outcome.reason, Reason::Expired);
        assert_eq!(
            step.entry.map(|e| (e.version, e.event)),
            Some((2, Event::Expire { at_ms: at(100.0) }))
        );
        assert_eq!(v.expire_step().outcome.reason, Reason::DuplicateExpire);
    }

    #[test]
    fn expire_step_on_a_live_view() {
        let mut v = view();
        let step = v.expire_step();
        assert!(step.outcome.notify);
        assert_eq!(step.entry.map(|e| e.version), Some(1));
        assert_eq!(v.state, State::Expired);
    }
}

//! The executor's work reports: `start`, `progress`, `heartbeat`,
//! `succeed`, `fail`.
//!
//! On `queued` and `running` these are the seed's rules, unchanged. The
//! new states extend them:
//! - `unknown`: the attempt may still be alive. A `progress` or
//!   `heartbeat` brings it back to `running` (`recovered`); a `succeed`,
//!   `fail` or `hold` ends it as from `running`.
//! - `cancelling` / `cancel_ineffective`: the work goes on until it ends,
//!   and any end is `cancelled` (a result is kept for compensation).
//! - Every `heartbeat` and `progress` of the current attempt extends its
//!   lease to at least `atMs + leaseMs` (judged after the versioned
//!   outcome, in `lease_change`).

use super::{Outcome, Reason};
use crate::task::{State, TaskView};
use alloc::string::ToString;

impl TaskView {
    pub(super) fn start(&mut self) -> Outcome {
        if self.state.holds_attempt() {
            return Outcome::unchanged(Reason::AlreadyRunning, true);
        }
        if self.state != State::Queued || self.attempts >= self.allowed_attempts() {
            return Outcome::unchanged(Reason::NotStartable, false);
        }
        // Progress is kept, not reset: every way back to `queued` that
        // starts the work over (a retried failure, an abandoned attempt)
        // has already set it to 0, as the seed's start did; only a
        // continuation after a decision keeps it, and then the next
        // attempt goes on from the artifact (PROTOCOL.md §Continuations).
        self.state = State::Running;
        self.attempts += 1;
        Outcome::changed(Reason::Started, false)
    }

    /// `progress` (with a percentage) or `heartbeat`: the attempt is
    /// alive (its lease is extended after, see `lease_change`).
    ///
    /// `current`: the report names its attempt (it carries `attempt`, and
    /// fencing let it through, so it is the current one). Such a report
    /// that changes the task shows the current attempt working, so an
    /// `error` left by an earlier failure or lapse is cleared with it: a
    /// page must not say "lease lapsed" over an attempt that runs fine.
    /// A report without `attempt` may be a late one from the attempt that
    /// failed, so it proves nothing and keeps the seed's rule (the error
    /// stays until a success).
    pub(super) fn report(&mut self, progress: Option<u8>, current: bool) -> Outcome {
        use Reason::*;
        let outcome = match (self.state, progress) {
            (State::Unknown, _) => {
                self.state = State::Running;
                self.progress = self.progress.max(progress.unwrap_or(0));
                Outcome::changed(Recovered, false)
            }
            (s, _) if !s.is_leased() => Outcome::unchanged(NotRunning, false),
            (_, None) => Outcome::unchanged(Heartbeat, false),
            (_, Some(p)) if p < self.progress => Outcome::unchanged(StaleProgress, false),
            (_, Some(p)) if p == self.progress => Outcome::unchanged(DuplicateProgress, true),
            (_, Some(p)) => {
                self.progress = p;
                Outcome::changed(Progress, false)
            }
        };
        // One place for both changes (recovered, progress): the page's
        // wasm has a few bytes of room.
        self.clear_error_if(outcome.changed && current);
        outcome
    }

    /// Clears `error` when `clear`. Not inlined: the rules that clear it
    /// share one copy of the code that frees it (the page's wasm has a
    /// few bytes of room).
    #[inline(never)]
    pub(super) fn clear_error_if(&mut self, clear: bool) {
        if clear {
            self.error = None;
        }
    }

    pub(super) fn succeed(&mut self, result_ref: &str, result_hash: &str) -> Outcome {
        let (state, reason) = match self.state {
            State::Running | State::Unknown => (State::Succeeded, Reason::Succeeded),
            State::Cancelling | State::CancelIneffective => {
                (State::Cancelled, Reason::SucceededAfterCancel)
            }
            _ => return Outcome::unchanged(Reason::NotRunning, false),
        };
        self.state = state;
        self.progress = 100;
        self.result_ref = Some(result_ref.to_string());
        self.result_hash = Some(result_hash.to_string());
        // A success supersedes an error left by a retried failure (fix 5).
        self.clear_error_if(true);
        Outcome::changed(reason, true)
    }

    pub(super) fn fail(&mut self, error: &str, retryable: bool) -> Outcome {
        match self.state {
            State::Running | State::Unknown => {}
            State::Cancelling | State::CancelIneffective => {
                // The worker stopped, with an error: never retried, since
                // a person asked to stop.
                self.error = Some(error.to_string());
                self.state = State::Cancelled;
                return Outcome::changed(Reason::Cancelled, true);
            }
            _ => return Outcome::unchanged(Reason::NotRunning, false),
        }
        self.error = Some(error.to_string());
        if retryable && self.attempts < self.allowed_attempts() {
            self.state = State::Queued;
            self.progress = 0;
            #[cfg(feature = "steps")]
            self.keep_steps_progress();
            Outcome::changed(Reason::Requeued, false)
        } else {
            self.state = State::Failed;
            Outcome::changed(Reason::Failed, true)
        }
    }
}

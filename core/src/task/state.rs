//! Where a task is in its life: the eleven states and the sets they form.
//!
//! ```text
//! live, no attempt open:   queued, waiting_approval
//! live, an attempt open:   running, unknown, cancelling, cancel_ineffective
//! terminal (one notification each, then absorbing):
//!                          succeeded, failed, expired, cancelled, timed_out
//! ```
//!
//! The first five are the seed's, spelled as before; the others come from
//! the source documents 001 to 004 (see [`crate::transition`]).

use serde::{Serialize, Serializer};

use crate::json::{self, FromJson, Path, Value};

/// Where a task is in its life. Terminal states absorb every later event
/// as a duplicate or a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Created, or requeued (after a retryable failure, a decision, or a
    /// lease that lapsed for good); waiting for a worker.
    Queued,
    /// A worker is on it and may report progress.
    Running,
    /// Done with a result (`resultRef`, `resultHash`).
    Succeeded,
    /// Failed for good: not retryable, out of attempts, rejected by a
    /// person, or lost with its lease and no attempt left.
    Failed,
    /// The time to live ran out before a result arrived.
    Expired,
    /// A person asked to cancel while a worker holds the task: the worker
    /// must stop and acknowledge. Still live. (Seed 002's
    /// `cancel_requested`.)
    Cancelling,
    /// The worker said the cancel cannot take effect: the work goes on and
    /// may still finish, but its result will not be delivered. Still live,
    /// so that the page never shows a stop that did not happen (002 §八).
    CancelIneffective,
    /// Cancelled: the system stopped following the task on a person's
    /// request. Terminal. A result that arrived anyway is kept in
    /// `resultRef`/`resultHash` for compensation and never delivered.
    Cancelled,
    /// Paused for a person's decision on an artifact; no worker and no
    /// lease while it waits. Still live; the TTL still runs.
    WaitingApproval,
    /// The worker's lease lapsed: the work may still be running, so the
    /// task is neither failed nor retried blindly (002 §九, 004
    /// `SUBMIT_UNKNOWN`).
    Unknown,
    /// The execution deadline passed. Terminal. The remote work may still
    /// be running (002 `timed_out`, 004 `TRACKING_TIMED_OUT`).
    TimedOut,
}

impl State {
    /// True for `succeeded`, `failed`, `expired`, `cancelled` and
    /// `timed_out`.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Succeeded | State::Failed | State::Expired | State::Cancelled | State::TimedOut
        )
    }

    /// True while an attempt is open: a worker holds (or held, for
    /// `unknown`) the task and may still report. Progress never goes back
    /// while the same attempt stays in these states.
    pub const fn holds_attempt(self) -> bool {
        matches!(
            self,
            State::Running | State::Unknown | State::Cancelling | State::CancelIneffective
        )
    }

    /// True in the states where the worker's lease runs (and can lapse).
    pub const fn is_leased(self) -> bool {
        matches!(
            self,
            State::Running | State::Cancelling | State::CancelIneffective
        )
    }

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::Expired => "expired",
            State::Cancelling => "cancelling",
            State::CancelIneffective => "cancel_ineffective",
            State::Cancelled => "cancelled",
            State::WaitingApproval => "waiting_approval",
            State::Unknown => "unknown",
            State::TimedOut => "timed_out",
        }
    }

    /// Every state, in declaration order.
    pub const ALL: [State; 11] = [
        State::Queued,
        State::Running,
        State::Succeeded,
        State::Failed,
        State::Expired,
        State::Cancelling,
        State::CancelIneffective,
        State::Cancelled,
        State::WaitingApproval,
        State::Unknown,
        State::TimedOut,
    ];
}

impl Serialize for State {
    /// The wire spelling (by hand: serde's derive costs a match per
    /// variant in the page's wasm).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl FromJson for State {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        const NAMES: [(&str, State); 11] = {
            let mut names = [("", State::Queued); 11];
            let mut i = 0;
            while i < State::ALL.len() {
                names[i] = (State::ALL[i].as_str(), State::ALL[i]);
                i += 1;
            }
            names
        };
        json::variant(value, at, &NAMES)
    }
}

json::impl_deserialize!(State);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_match_serde_and_parse_back() {
        for state in State::ALL {
            let text = crate::json::testing::to_json(&state);
            assert_eq!(text, format!("\"{}\"", state.as_str()));
            assert_eq!(
                crate::json::testing::from_json::<State>(&text, "s").unwrap(),
                state
            );
        }
    }

    #[test]
    fn the_sets_partition_the_states() {
        for state in State::ALL {
            let live_without_attempt = matches!(state, State::Queued | State::WaitingApproval);
            let count = [
                state.is_terminal(),
                state.holds_attempt(),
                live_without_attempt,
            ]
            .iter()
            .filter(|b| **b)
            .count();
            assert_eq!(count, 1, "{state:?}");
            assert!(!state.is_leased() || state.holds_attempt());
        }
    }
}

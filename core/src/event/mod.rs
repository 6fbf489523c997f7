//! What can happen to a task: reports from its executor, requests from
//! people, and the system's own timers.
//!
//! | from | events |
//! |---|---|
//! | executor (seed) | `start`, `progress`, `succeed`, `fail` |
//! | executor (new) | `heartbeat`, `hold`, `ack_cancel`, `cannot_cancel`; `step`, `reserve`, `settle`, `effect`, `exhaust` (feature `steps`) |
//! | people | `cancel`, `decide` (`approve`, `request_changes`, `reject`) |
//! | system (sweeper) | `expire` (seed), `lapse`, `abandon`, `timeout` |
//!
//! Every executor event may carry `attempt`, the fencing token: the
//! attempt it belongs to. Events without it are judged as in the seed, so
//! seed-000 executors keep working. People's events carry `actor`, filled
//! in by the caller (the server takes it from the credential).

mod json;
mod kind;
#[cfg(test)]
mod tests;

pub use kind::EventKind;

use crate::value::{Millis, NonBlank, Percent};
use alloc::string::String;

/// One report about a task, tagged by `type` on the wire:
///
/// ```json
/// {"type":"progress","atMs":6400,"progress":25,"cursor":"chunk-3","attempt":2}
/// ```
///
/// Every field holds a validated value ([`Millis`], [`Percent`],
/// [`NonBlank`]), so an `Event` that exists is valid. Parsing checks the
/// whole event before any state logic runs (fix 4 to the seed). Optional
/// fields are left out of the JSON when absent, so seed events keep their
/// exact shape. (Written by hand in `json.rs`: the derived serializer of
/// fourteen tagged variants cost ~6 KB of the page's wasm.)
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A worker picked the task up, opening attempt `attempt`.
    Start {
        /// When it happened.
        at_ms: Millis,
        /// Who picked it up (free text).
        worker: String,
        /// The attempt this start opens: the task's `attempts + 1`.
        attempt: Option<u64>,
        /// Opens a lease of this length (none without it, as in the seed).
        lease_ms: Option<Millis>,
        /// The task's plan, from the first attempt's start (PROTOCOL.md
        /// §Steps).
        #[cfg(feature = "steps")]
        plan: Option<crate::steps::PlanInput>,
    },
    /// The running attempt reports progress (and so renews its lease).
    Progress {
        /// When it happened.
        at_ms: Millis,
        /// Percent done, 0 to 100.
        progress: Percent,
        /// The executor's own resume point (free text, opaque here).
        cursor: String,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The running attempt produced its result.
    Succeed {
        /// When it happened.
        at_ms: Millis,
        /// Where the result is stored (notifications carry no result).
        result_ref: NonBlank,
        /// Content hash of the result: same hash = same result.
        result_hash: NonBlank,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The running attempt failed.
    Fail {
        /// When it happened.
        at_ms: Millis,
        /// What went wrong (free text).
        error: String,
        /// Whether another attempt may help.
        retryable: bool,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The time to live ran out.
    Expire {
        /// When it happened.
        at_ms: Millis,
    },
    /// The attempt is alive: renews its lease. Never a new version unless
    /// it brings an `unknown` task back to `running`.
    Heartbeat {
        /// When it happened.
        at_ms: Millis,
        /// The attempt reporting.
        attempt: Option<u64>,
        /// The new lease length (else the current one's).
        lease_ms: Option<Millis>,
    },
    /// The attempt paused for a person's decision on an artifact (001 §9).
    Hold {
        /// When it happened.
        at_ms: Millis,
        /// Where the artifact to decide on is.
        artifact_ref: NonBlank,
        /// The artifact's content hash: a decision must name it.
        artifact_hash: NonBlank,
        /// What the person is asked (free text).
        question: Option<String>,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The executor stopped after a cancel request.
    AckCancel {
        /// When it happened.
        at_ms: Millis,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The executor cannot stop the work (a remote job that cannot be
    /// aborted, a side effect already under way).
    CannotCancel {
        /// When it happened.
        at_ms: Millis,
        /// Why, for the person who asked (free text).
        reason: Option<String>,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The attempt's lease ran out (the sweeper records it at the lease's
    /// `expiresAtMs`).
    Lapse {
        /// When the lease ran out.
        at_ms: Millis,
        /// The attempt whose lease it was.
        attempt: Option<u64>,
    },
    /// An `unknown` task's grace period ran out with no word from its
    /// attempt: the attempt is given up (the sweeper records it at
    /// the lapsed lease's end + `unknownGraceMs`).
    Abandon {
        /// When the grace period ran out.
        at_ms: Millis,
    },
    /// The execution deadline passed (recorded at `deadlineAtMs`).
    Timeout {
        /// When it happened.
        at_ms: Millis,
    },
    /// A person asks to stop the task.
    Cancel {
        /// When it happened.
        at_ms: Millis,
        /// Why (free text).
        reason: Option<String>,
        /// Who asked, as the caller authenticated them.
        actor: Option<NonBlank>,
    },
    /// The running attempt moved one step of the task's plan
    /// (PROTOCOL.md §Steps).
    #[cfg(feature = "steps")]
    Step {
        /// When it happened.
        at_ms: Millis,
        /// Which step, and where it is now.
        report: crate::steps::StepReport,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The running attempt reserves budget before a call (PROTOCOL.md
    /// §Budgets and side effects).
    #[cfg(feature = "steps")]
    Reserve {
        /// When it happened.
        at_ms: Millis,
        /// The reservation: its id, step and amount.
        reservation: crate::ledger::ReserveInput,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The call a reservation was for finished (or failed): what it used.
    #[cfg(feature = "steps")]
    Settle {
        /// When it happened.
        at_ms: Millis,
        /// The reservation's id.
        reservation: NonBlank,
        /// What the call used.
        usage: crate::steps::Usage,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The running attempt made an external write, recorded once under
    /// `(step, action)`.
    #[cfg(feature = "steps")]
    Effect {
        /// When it happened.
        at_ms: Millis,
        /// The step, the action and what was written.
        effect: crate::ledger::EffectInput,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// The budget ran out: the task ends, `failed` with the error
    /// `budget-exhausted`, keeping the partial result named here.
    #[cfg(feature = "steps")]
    Exhaust {
        /// When it happened.
        at_ms: Millis,
        /// The partial result, if any: where it is and its hash.
        partial: Option<crate::steps::Checkpoint>,
        /// The attempt reporting.
        attempt: Option<u64>,
    },
    /// A person's decision on a held artifact.
    Decide {
        /// When it happened.
        at_ms: Millis,
        /// `approve`, `request_changes` or `reject`.
        decision: DecisionKind,
        /// The artifact decided on: must be the held one.
        artifact_hash: NonBlank,
        /// The task version the decision was made on: must be current.
        version: u64,
        /// Why (free text; what to change, for `request_changes`).
        reason: Option<String>,
        /// Who decided, as the caller authenticated them.
        actor: Option<NonBlank>,
    },
}

/// A person's decision on a held artifact (001 §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// Go on with this artifact: the task is re-queued.
    Approve,
    /// Revise it: the task is re-queued, the reason says what to change.
    RequestChanges,
    /// Stop: the task fails.
    Reject,
}

impl DecisionKind {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Approve => "approve",
            DecisionKind::RequestChanges => "request_changes",
            DecisionKind::Reject => "reject",
        }
    }
}

impl Event {
    /// When the event happened.
    pub fn at_ms(&self) -> Millis {
        match self {
            Event::Start { at_ms, .. }
            | Event::Progress { at_ms, .. }
            | Event::Succeed { at_ms, .. }
            | Event::Fail { at_ms, .. }
            | Event::Expire { at_ms }
            | Event::Heartbeat { at_ms, .. }
            | Event::Hold { at_ms, .. }
            | Event::AckCancel { at_ms, .. }
            | Event::CannotCancel { at_ms, .. }
            | Event::Lapse { at_ms, .. }
            | Event::Abandon { at_ms }
            | Event::Timeout { at_ms }
            | Event::Cancel { at_ms, .. }
            | Event::Decide { at_ms, .. } => *at_ms,
            #[cfg(feature = "steps")]
            Event::Step { at_ms, .. }
            | Event::Reserve { at_ms, .. }
            | Event::Settle { at_ms, .. }
            | Event::Effect { at_ms, .. }
            | Event::Exhaust { at_ms, .. } => *at_ms,
        }
    }

    /// The attempt the event says it belongs to (the fencing token), if
    /// it says.
    pub fn attempt(&self) -> Option<u64> {
        match self {
            Event::Start { attempt, .. }
            | Event::Progress { attempt, .. }
            | Event::Succeed { attempt, .. }
            | Event::Fail { attempt, .. }
            | Event::Heartbeat { attempt, .. }
            | Event::Hold { attempt, .. }
            | Event::AckCancel { attempt, .. }
            | Event::CannotCancel { attempt, .. }
            | Event::Lapse { attempt, .. } => *attempt,
            #[cfg(feature = "steps")]
            Event::Step { attempt, .. }
            | Event::Reserve { attempt, .. }
            | Event::Settle { attempt, .. }
            | Event::Effect { attempt, .. }
            | Event::Exhaust { attempt, .. } => *attempt,
            Event::Expire { .. }
            | Event::Abandon { .. }
            | Event::Timeout { .. }
            | Event::Cancel { .. }
            | Event::Decide { .. } => None,
        }
    }

    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Start { .. } => EventKind::Start,
            Event::Progress { .. } => EventKind::Progress,
            Event::Succeed { .. } => EventKind::Succeed,
            Event::Fail { .. } => EventKind::Fail,
            Event::Expire { .. } => EventKind::Expire,
            Event::Heartbeat { .. } => EventKind::Heartbeat,
            Event::Hold { .. } => EventKind::Hold,
            Event::AckCancel { .. } => EventKind::AckCancel,
            Event::CannotCancel { .. } => EventKind::CannotCancel,
            Event::Lapse { .. } => EventKind::Lapse,
            Event::Abandon { .. } => EventKind::Abandon,
            Event::Timeout { .. } => EventKind::Timeout,
            Event::Cancel { .. } => EventKind::Cancel,
            Event::Decide { .. } => EventKind::Decide,
            #[cfg(feature = "steps")]
            Event::Step { .. } => EventKind::Step,
            #[cfg(feature = "steps")]
            Event::Reserve { .. } => EventKind::Reserve,
            #[cfg(feature = "steps")]
            Event::Settle { .. } => EventKind::Settle,
            #[cfg(feature = "steps")]
            Event::Effect { .. } => EventKind::Effect,
            #[cfg(feature = "steps")]
            Event::Exhaust { .. } => EventKind::Exhaust,
        }
    }
}

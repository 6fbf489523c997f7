//! Why an event did or did not change a task.

use serde::Serialize;

/// Why an event did or did not change a task. Spelled in kebab-case on
/// the wire (`duplicate-result`). The first seventeen are the seed's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// `start` on a queued task: running, attempts + 1, progress 0.
    Started,
    /// `start` while an attempt is open (a duplicate).
    AlreadyRunning,
    /// `start` when out of attempts, or while waiting for approval.
    NotStartable,
    /// `progress` above the current progress.
    Progress,
    /// `progress` below the current progress (dropped: progress is monotonic).
    StaleProgress,
    /// `progress` equal to the current progress (a duplicate).
    DuplicateProgress,
    /// An executor report while no attempt runs.
    NotRunning,
    /// `succeed` on a running task.
    Succeeded,
    /// Back to queued: a retryable `fail` with attempts left, or an
    /// `abandon` of an `unknown` task with attempts left.
    Requeued,
    /// Failed for good: a final `fail`, or an `abandon` with no attempt
    /// left.
    Failed,
    /// The task expired.
    Expired,
    /// `expire` on an expired task (a duplicate).
    DuplicateExpire,
    /// `succeed` with the same `resultHash` as the result the task holds
    /// (a duplicate).
    DuplicateResult,
    /// `succeed` with a different `resultHash` than the result the task
    /// holds: two executions produced different content; for a human or
    /// an upper layer to resolve (fix 6).
    ResultConflict,
    /// Any other event on a terminal task.
    TerminalConflict,
    /// A callback id already applied to this task, with the same event.
    DuplicateCallback,
    /// A callback id already applied to this task, with a different event
    /// (fix 3).
    CallbackConflict,
    /// An executor event whose `attempt` is not the task's current one: a
    /// fenced-off worker (a zombie). Nothing changes, nothing is recorded,
    /// and it is not a duplicate.
    StaleAttempt,
    /// A `heartbeat` of the running attempt: its lease is renewed, nothing
    /// is versioned.
    Heartbeat,
    /// `unknown` → `running`: the current attempt reported again.
    Recovered,
    /// `running` → `unknown`: the attempt's lease ran out.
    LeaseLapsed,
    /// A system event before its time or for a task it does not concern:
    /// a `lapse` before the lease ran out, an `abandon` before the grace
    /// period ran out (or for a task that opted out), a `timeout` before
    /// the deadline.
    NotDue,
    /// The execution deadline passed.
    TimedOut,
    /// `timeout` on a timed-out task (a duplicate).
    DuplicateTimeout,
    /// `hold`: the task waits for a person's decision.
    Held,
    /// The same `hold` again while waiting (a duplicate).
    DuplicateHold,
    /// `cancel` while a worker holds the task: `cancelling`.
    CancelRequested,
    /// The task is cancelled: a `cancel` with no worker on it, or the
    /// worker's end (a `fail`, a `hold`, a lapsed lease) after a cancel.
    Cancelled,
    /// A cancel already requested, acknowledged or judged ineffective (a
    /// duplicate).
    DuplicateCancel,
    /// `ack_cancel`: the worker stopped; `cancelled`.
    CancelAcknowledged,
    /// `cannot_cancel`: the work goes on; `cancel_ineffective`.
    CancelIneffective,
    /// `ack_cancel` or `cannot_cancel` with no cancel requested.
    NotCancelling,
    /// `succeed` after a cancel: `cancelled`, the result kept for
    /// compensation and never delivered.
    SucceededAfterCancel,
    /// `approve`: back to queued, to continue from the artifact.
    Approved,
    /// `request_changes`: back to queued, to revise the artifact.
    ChangesRequested,
    /// `reject`: the task fails.
    Rejected,
    /// A decision on another artifact, on another version of the task, or
    /// on a task that is not waiting for one: nothing changes.
    StaleDecision,
    /// The decision already taken, again (a duplicate).
    DuplicateDecision,
    /// An executor report of the attempt after the current one, other than
    /// its `start`, on a queued task: the worker is early (its attempt
    /// was never opened), not replaced. Nothing changes, as for
    /// [`Reason::StaleAttempt`].
    NotStarted,
    /// `step`: a step of the plan moved (PROTOCOL.md §Steps).
    #[cfg(feature = "steps")]
    StepRecorded,
    /// `step` saying what the step already says (a duplicate).
    #[cfg(feature = "steps")]
    DuplicateStep,
    /// `step` that would move a succeeded or skipped step, or give a
    /// succeeded step another checkpoint: steps never go back.
    #[cfg(feature = "steps")]
    StepConflict,
    /// `step` naming a step the plan does not have.
    #[cfg(feature = "steps")]
    UnknownStep,
    /// `step` on a task that has no plan.
    #[cfg(feature = "steps")]
    NoPlan,
    /// `start` with another plan than the task's, or with one after the
    /// task started without: the plan is fixed for the task's life, and
    /// the start is refused.
    #[cfg(feature = "steps")]
    PlanConflict,
    /// `reserve` that would take spent + reserved past a limit: refused, nothing changes.
    #[cfg(feature = "steps")]
    OverBudget,
    /// `reserve` granted.
    #[cfg(feature = "steps")]
    BudgetReserved,
    /// `reserve` of a reservation already made, the same (a duplicate: still granted).
    #[cfg(feature = "steps")]
    DuplicateReservation,
    /// `reserve` reusing a reservation id with another amount or step, or `settle` of a settled reservation with other usage.
    #[cfg(feature = "steps")]
    ReservationConflict,
    /// `settle` of a reservation the task never granted.
    #[cfg(feature = "steps")]
    UnknownReservation,
    /// `settle`: the call's usage recorded, the rest of its reservation released.
    #[cfg(feature = "steps")]
    BudgetSettled,
    /// `settle` above its reservation that took what was spent past a limit: recorded, because it happened.
    #[cfg(feature = "steps")]
    BudgetOverrun,
    /// `settle` saying what the reservation's settlement already says (a duplicate).
    #[cfg(feature = "steps")]
    DuplicateSettlement,
    /// `effect`: an external write recorded under its key.
    #[cfg(feature = "steps")]
    EffectRecorded,
    /// `effect` under a key already recorded: the first record stands (a duplicate; the answer names the first resource id).
    #[cfg(feature = "steps")]
    DuplicateEffect,
    /// `reserve` or `effect` past the most a task keeps (`MAX_RESERVATIONS`, `MAX_EFFECTS`).
    #[cfg(feature = "steps")]
    LedgerFull,
    /// `exhaust`: the task failed for want of budget, keeping its partial result.
    #[cfg(feature = "steps")]
    BudgetExhausted,
}

/// How many reasons this build knows (eighteen are the `steps`
/// feature's).
const REASONS: usize = if cfg!(feature = "steps") { 57 } else { 39 };

impl Reason {
    /// Every reason, in declaration order.
    pub const ALL: [Reason; REASONS] = {
        use Reason::*;
        [
            Started,
            AlreadyRunning,
            NotStartable,
            Progress,
            StaleProgress,
            DuplicateProgress,
            NotRunning,
            Succeeded,
            Requeued,
            Failed,
            Expired,
            DuplicateExpire,
            DuplicateResult,
            ResultConflict,
            TerminalConflict,
            DuplicateCallback,
            CallbackConflict,
            StaleAttempt,
            Heartbeat,
            Recovered,
            LeaseLapsed,
            NotDue,
            TimedOut,
            DuplicateTimeout,
            Held,
            DuplicateHold,
            CancelRequested,
            Cancelled,
            DuplicateCancel,
            CancelAcknowledged,
            CancelIneffective,
            NotCancelling,
            SucceededAfterCancel,
            Approved,
            ChangesRequested,
            Rejected,
            StaleDecision,
            DuplicateDecision,
            NotStarted,
            #[cfg(feature = "steps")]
            StepRecorded,
            #[cfg(feature = "steps")]
            DuplicateStep,
            #[cfg(feature = "steps")]
            StepConflict,
            #[cfg(feature = "steps")]
            UnknownStep,
            #[cfg(feature = "steps")]
            NoPlan,
            #[cfg(feature = "steps")]
            PlanConflict,
            #[cfg(feature = "steps")]
            OverBudget,
            #[cfg(feature = "steps")]
            BudgetReserved,
            #[cfg(feature = "steps")]
            DuplicateReservation,
            #[cfg(feature = "steps")]
            ReservationConflict,
            #[cfg(feature = "steps")]
            UnknownReservation,
            #[cfg(feature = "steps")]
            BudgetSettled,
            #[cfg(feature = "steps")]
            BudgetOverrun,
            #[cfg(feature = "steps")]
            DuplicateSettlement,
            #[cfg(feature = "steps")]
            EffectRecorded,
            #[cfg(feature = "steps")]
            DuplicateEffect,
            #[cfg(feature = "steps")]
            LedgerFull,
            #[cfg(feature = "steps")]
            BudgetExhausted,
        ]
    };

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
            Reason::StaleAttempt => "stale-attempt",
            Reason::Heartbeat => "heartbeat",
            Reason::Recovered => "recovered",
            Reason::LeaseLapsed => "lease-lapsed",
            Reason::NotDue => "not-due",
            Reason::TimedOut => "timed-out",
            Reason::DuplicateTimeout => "duplicate-timeout",
            Reason::Held => "held",
            Reason::DuplicateHold => "duplicate-hold",
            Reason::CancelRequested => "cancel-requested",
            Reason::Cancelled => "cancelled",
            Reason::DuplicateCancel => "duplicate-cancel",
            Reason::CancelAcknowledged => "cancel-acknowledged",
            Reason::CancelIneffective => "cancel-ineffective",
            Reason::NotCancelling => "not-cancelling",
            Reason::SucceededAfterCancel => "succeeded-after-cancel",
            Reason::Approved => "approved",
            Reason::ChangesRequested => "changes-requested",
            Reason::Rejected => "rejected",
            Reason::StaleDecision => "stale-decision",
            Reason::DuplicateDecision => "duplicate-decision",
            Reason::NotStarted => "not-started",
            #[cfg(feature = "steps")]
            Reason::StepRecorded => "step-recorded",
            #[cfg(feature = "steps")]
            Reason::DuplicateStep => "duplicate-step",
            #[cfg(feature = "steps")]
            Reason::StepConflict => "step-conflict",
            #[cfg(feature = "steps")]
            Reason::UnknownStep => "unknown-step",
            #[cfg(feature = "steps")]
            Reason::NoPlan => "no-plan",
            #[cfg(feature = "steps")]
            Reason::PlanConflict => "plan-conflict",
            #[cfg(feature = "steps")]
            Reason::OverBudget => "over-budget",
            #[cfg(feature = "steps")]
            Reason::BudgetReserved => "budget-reserved",
            #[cfg(feature = "steps")]
            Reason::DuplicateReservation => "duplicate-reservation",
            #[cfg(feature = "steps")]
            Reason::ReservationConflict => "reservation-conflict",
            #[cfg(feature = "steps")]
            Reason::UnknownReservation => "unknown-reservation",
            #[cfg(feature = "steps")]
            Reason::BudgetSettled => "budget-settled",
            #[cfg(feature = "steps")]
            Reason::BudgetOverrun => "budget-overrun",
            #[cfg(feature = "steps")]
            Reason::DuplicateSettlement => "duplicate-settlement",
            #[cfg(feature = "steps")]
            Reason::EffectRecorded => "effect-recorded",
            #[cfg(feature = "steps")]
            Reason::DuplicateEffect => "duplicate-effect",
            #[cfg(feature = "steps")]
            Reason::LedgerFull => "ledger-full",
            #[cfg(feature = "steps")]
            Reason::BudgetExhausted => "budget-exhausted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_match_serde_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for reason in Reason::ALL {
            assert_eq!(
                crate::json::testing::to_json(&reason),
                format!("\"{}\"", reason.as_str())
            );
            assert!(seen.insert(reason.as_str()), "{reason:?}");
        }
    }
}

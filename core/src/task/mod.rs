//! The task record: its current fields ([`TaskView`]), its history, and
//! next to them its lease ([`crate::Lease`], not versioned).

mod json;
mod state;
#[cfg(test)]
mod tests;

pub use state::State;

use crate::event::{DecisionKind, Event};
use crate::lease::Lease;
use crate::value::{is_blank, Millis, MAX_SAFE_INTEGER};
use crate::Error;
use alloc::{format, string::String, vec::Vec};

/// A task's current fields, without its history: what a client holds, and
/// what resume answers carry. It stays O(1) in size however long the task
/// runs. Every field is versioned: two views at the same version are
/// equal (the lease, which is not, lives outside, in [`Task`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    /// Unique id, never blank.
    pub id: String,
    /// Current state.
    pub state: State,
    /// Results are accepted strictly before this time; an event at or
    /// after it expires the task. Fixed at creation.
    pub expires_at_ms: f64,
    /// How many times a worker started the task; also the number of the
    /// current (or last) attempt, the fencing token.
    pub attempts: u64,
    /// How many starts are allowed. Fixed at creation.
    pub max_attempts: u64,
    /// Percent done since the work last started over (100 once
    /// succeeded): a retry or an abandoned attempt resets it, a
    /// continuation after a decision keeps it.
    pub progress: u8,
    /// Number of changes so far; every change adds exactly one.
    pub version: u64,
    /// Where the result is, once succeeded (or kept for compensation on a
    /// cancelled task whose work finished anyway).
    pub result_ref: Option<String>,
    /// Content hash of the result, with `result_ref`.
    pub result_hash: Option<String>,
    /// The last failure's message, while it still describes the task:
    /// cleared by a success, a decision to continue, or a report that
    /// names the current attempt (PROTOCOL.md §Continuations).
    pub error: Option<String>,
    /// The execution deadline: the task times out at this time, whatever
    /// its TTL (kept apart from `expires_at_ms`). Fixed at creation.
    pub deadline_at_ms: Option<f64>,
    /// How long an `unknown` task waits for its attempt, from the end of
    /// its lapsed lease, before it is given up. `None` when it opted out
    /// of automatic re-queueing (or was given no grace period): it then
    /// waits in `unknown` for its executor, a person or the TTL (004: 「不
    /// 会盲目自动重提」). Fixed at creation.
    pub unknown_grace_ms: Option<f64>,
    /// Starts granted by `approve` and `request_changes`: they do not
    /// count against `max_attempts`, which budgets failures.
    pub continuations: u64,
    /// The artifact of the last `hold`.
    pub artifact_ref: Option<String>,
    /// Its content hash: a decision must name it.
    pub artifact_hash: Option<String>,
    /// What the person was asked, if anything.
    pub question: Option<String>,
    /// The last decision on that artifact.
    pub decision: Option<Decision>,
    /// The task's plan and its steps, once given (at creation or by the
    /// first attempt's start), fixed for the task's life (PROTOCOL.md
    /// §Steps). Boxed: a server holds a view in every held long-poll,
    /// and a plan inline would add 40 bytes to each of them.
    #[cfg(feature = "steps")]
    pub plan: Option<alloc::boxed::Box<crate::steps::Plan>>,
    /// The task's budget, what it reserved and spent, and its side
    /// effects (PROTOCOL.md §Budgets and side effects): from creation
    /// when given a budget, else from the first `reserve` or `effect`.
    /// Boxed, as the plan.
    #[cfg(feature = "steps")]
    pub ledger: Option<alloc::boxed::Box<crate::ledger::Ledger>>,
}

/// A person's decision as the task keeps it: what the next attempt
/// continues from.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// What was decided.
    pub kind: DecisionKind,
    /// The task version it was made on.
    pub version: u64,
    /// Why (what to change, for `request_changes`).
    pub reason: Option<String>,
}

/// One change in a task's life: the version it produced and the event that
/// produced it. Expiry is recorded as `expire` at `expiresAtMs`, and a
/// passed deadline as `timeout` at `deadlineAtMs`, whatever event
/// triggered them, so a replay reproduces them exactly.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HistoryEntry {
    /// The version after this change.
    pub version: u64,
    /// What happened.
    pub event: Event,
}

/// A task with its full history and its lease, as the server (or a
/// [`crate::Book`]) keeps it. `history[i].version == i + 1` and
/// `history.len() == version` always hold, which is what makes a resume
/// delta a plain slice.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    view: TaskView,
    history: Vec<HistoryEntry>,
    lease: Option<Lease>,
}

/// What [`create_task`] needs. On the wire:
/// `{"id":"t1","nowMs":0,"ttlMs":3600000,"maxAttempts":3}`, plus
/// optionally `"deadlineMs":60000,"unknownGraceMs":30000,"autoRequeue":false`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTask {
    /// Task id, not blank.
    pub id: String,
    /// Creation time, finite and ≥ 0.
    pub now_ms: f64,
    /// Time to live, finite and > 0.
    pub ttl_ms: f64,
    /// Allowed starts, an integer ≥ 1.
    pub max_attempts: u64,
    /// Execution deadline, counted from `now_ms`: finite and > 0.
    pub deadline_ms: Option<f64>,
    /// Grace period of an `unknown` task, finite and ≥ 0 (a server fills
    /// in its default).
    pub unknown_grace_ms: Option<f64>,
    /// Re-queue automatically after the grace period (default true).
    /// False opts out: the task keeps no grace period.
    pub auto_requeue: bool,
    /// The plan's workflow version (with `steps`), checked by
    /// [`create_task`].
    #[cfg(feature = "steps")]
    pub workflow_version: Option<String>,
    /// The plan's step names, in order (with `workflow_version`).
    #[cfg(feature = "steps")]
    pub steps: Option<Vec<String>>,
    /// What the task may spend (PROTOCOL.md §Budgets and side effects).
    #[cfg(feature = "steps")]
    pub budget: Option<crate::ledger::Budget>,
}

impl CreateTask {
    /// The seed's four inputs; no deadline, no grace period.
    pub fn new(id: impl Into<String>, now_ms: f64, ttl_ms: f64, max_attempts: u64) -> Self {
        CreateTask {
            id: id.into(),
            now_ms,
            ttl_ms,
            max_attempts,
            deadline_ms: None,
            unknown_grace_ms: None,
            auto_requeue: true,
            #[cfg(feature = "steps")]
            workflow_version: None,
            #[cfg(feature = "steps")]
            steps: None,
            #[cfg(feature = "steps")]
            budget: None,
        }
    }
}

/// `field: must be a finite number > 0, got …`, unless it is one.
fn positive(v: f64, field: &str) -> Result<(), Error> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(crate::error::join(&[
            field,
            ": must be a finite number > 0, got ",
            &crate::value::number(v),
        ])))
    }
}

/// Creates a queued task at version 0 that expires at `nowMs + ttlMs`
/// (and times out at `nowMs + deadlineMs`, when given).
///
/// Unlike the seed, a sum that is not finite (`1e308 + 1e308`) is rejected
/// (fix 11): such a task could never expire.
pub fn create_task(input: &CreateTask) -> Result<Task, Error> {
    if is_blank(&input.id) {
        return Err(Error::invalid("id: must not be blank"));
    }
    Millis::new(input.now_ms, "nowMs")?;
    positive(input.ttl_ms, "ttlMs")?;
    if !(1..=MAX_SAFE_INTEGER).contains(&input.max_attempts) {
        return Err(Error::invalid(format!(
            "maxAttempts: must be an integer from 1 to {MAX_SAFE_INTEGER}, got {}",
            input.max_attempts
        )));
    }
    let expires_at_ms = input.now_ms + input.ttl_ms;
    if !expires_at_ms.is_finite() {
        return Err(Error::invalid(
            "ttlMs: nowMs + ttlMs must be a finite number",
        ));
    }
    let deadline_at_ms = match input.deadline_ms {
        Some(ms) => {
            positive(ms, "deadlineMs")?;
            let at = input.now_ms + ms;
            if !at.is_finite() {
                return Err(Error::invalid(
                    "deadlineMs: nowMs + deadlineMs must be a finite number",
                ));
            }
            Some(at)
        }
        None => None,
    };
    if let Some(grace) = input.unknown_grace_ms {
        Millis::new(grace, "unknownGraceMs")?;
    }
    #[cfg(feature = "steps")]
    let plan = crate::steps::PlanInput::from_input(
        input.workflow_version.as_deref(),
        input.steps.as_deref(),
    )?;
    Ok(Task {
        view: TaskView {
            id: input.id.clone(),
            state: State::Queued,
            expires_at_ms,
            attempts: 0,
            max_attempts: input.max_attempts,
            progress: 0,
            version: 0,
            result_ref: None,
            result_hash: None,
            error: None,
            deadline_at_ms,
            unknown_grace_ms: input.unknown_grace_ms.filter(|_| input.auto_requeue),
            continuations: 0,
            artifact_ref: None,
            artifact_hash: None,
            question: None,
            decision: None,
            #[cfg(feature = "steps")]
            plan: plan.as_ref().map(|p| p.to_plan().into()),
            #[cfg(feature = "steps")]
            ledger: input
                .budget
                .map(|b| crate::ledger::Ledger::with_budget(b).into()),
        },
        history: Vec::new(),
        lease: None,
    })
}

impl Task {
    /// The current fields.
    pub fn view(&self) -> &TaskView {
        &self.view
    }

    /// Every change so far, oldest first.
    pub fn history(&self) -> &[HistoryEntry] {
        &self.history
    }

    /// The current attempt's lease, if one runs (or lapsed while
    /// `unknown`).
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The changes after version `cursor`, as a slice: O(1) to find, O(k)
    /// to copy.
    pub fn history_after(&self, cursor: u64) -> &[HistoryEntry] {
        let start = usize::try_from(cursor).unwrap_or(usize::MAX);
        self.history.get(start..).unwrap_or(&[])
    }

    /// Splits the task into its fields and its history.
    pub fn into_parts(self) -> (TaskView, Vec<HistoryEntry>) {
        (self.view, self.history)
    }

    /// The view, the lease and the history, for a transition to update
    /// together.
    pub(crate) fn parts_mut(
        &mut self,
    ) -> (&mut TaskView, &mut Option<Lease>, &mut Vec<HistoryEntry>) {
        (&mut self.view, &mut self.lease, &mut self.history)
    }
}

impl core::ops::Deref for Task {
    type Target = TaskView;
    fn deref(&self) -> &TaskView {
        &self.view
    }
}

impl TaskView {
    /// How many starts the task may have in all: `max_attempts` plus the
    /// continuations people granted.
    pub fn allowed_attempts(&self) -> u64 {
        self.max_attempts.saturating_add(self.continuations)
    }

    /// The task as it was at version 0: the fields fixed at creation from
    /// this one, the rest as every task starts. What a client replays a
    /// whole history onto.
    pub fn initial(&self) -> TaskView {
        TaskView {
            id: self.id.clone(),
            state: State::Queued,
            expires_at_ms: self.expires_at_ms,
            attempts: 0,
            max_attempts: self.max_attempts,
            progress: 0,
            version: 0,
            result_ref: None,
            result_hash: None,
            error: None,
            deadline_at_ms: self.deadline_at_ms,
            unknown_grace_ms: self.unknown_grace_ms,
            continuations: 0,
            artifact_ref: None,
            artifact_hash: None,
            question: None,
            decision: None,
            // The plan is fixed for the task's life, so a replay starts
            // from it, every step pending (one a start gave is then
            // known a version early: the same plan, never another).
            #[cfg(feature = "steps")]
            plan: self.plan.as_ref().map(|p| p.restarted().into()),
            #[cfg(feature = "steps")]
            ledger: self
                .ledger
                .as_ref()
                .and_then(|l| l.restarted())
                .map(Into::into),
        }
    }
}

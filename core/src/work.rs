//! The worker's side of the protocol (PROTOCOL.md §Workers): what a claim
//! asks for and records, what an executor does after each answer, and
//! how far a report's clock may be from the server's.
//!
//! Every server and worker library calls these, so that no worker
//! matches `reason` strings to learn whether it was replaced, and no
//! backend decides differently which task a claim may take.

use alloc::string::String;
use alloc::vec::Vec;

use serde::Serialize;

use crate::error::{join, Error, ErrorCode};
use crate::event::Event;
use crate::json::{self, Fields, FromJson, Path, Value};
use crate::task::{State, TaskView};
use crate::transition::{Outcome, Reason};
use crate::value::{Millis, NonBlank};

/// What an executor does after a callback answer: its `next` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Directive {
    /// The attempt is the current one and alive: go on.
    Continue,
    /// A person asked to cancel: stop the work, answer `ack_cancel` (or
    /// `cannot_cancel`).
    Cancel,
    /// Stop at once and report nothing more for this attempt: it was
    /// fenced off, never started, or ended (held, re-queued, finished).
    Stop,
}

impl Directive {
    /// The directive after an event of `attempt` (its `attempt` field,
    /// if it has one) was judged `outcome`, given the task as it is now
    /// (after the event).
    pub fn after(attempt: Option<u64>, outcome: &Outcome, task: &TaskView) -> Self {
        let fenced = matches!(outcome.reason, Reason::StaleAttempt | Reason::NotStarted);
        let other_attempt = attempt.is_some_and(|a| a != task.attempts);
        if fenced || other_attempt {
            return Directive::Stop;
        }
        match task.state {
            State::Cancelling => Directive::Cancel,
            State::Running | State::Unknown | State::CancelIneffective => Directive::Continue,
            _ => Directive::Stop,
        }
    }

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Directive::Continue => "continue",
            Directive::Cancel => "cancel",
            Directive::Stop => "stop",
        }
    }
}

/// Whether a report was taken (PROTOCOL.md §Steps): it changed the task,
/// or it says what the task says already (`duplicate`: a repeat, or the
/// same callback sent again). One that is neither was refused, and its
/// `reason` says why. `next` speaks of the attempt, not of the report: a
/// step report about a step the plan lacks (`unknown-step`), a finished
/// step moved (`step-conflict`) or a task without a plan (`no-plan`) is
/// answered `continue`, and a worker that read only `next` would run the
/// step and believe it recorded.
pub const fn report_taken(changed: bool, duplicate: bool) -> bool {
    changed || duplicate
}

/// How far an executor event that carries `attempt` may be from the
/// server's clock: the same 5 minutes Standard Webhooks gives the
/// signature's timestamp.
pub const MAX_CLOCK_SKEW_MS: f64 = 300_000.0;

/// Refuses an executor event that carries `attempt` and whose `atMs` is
/// more than [`MAX_CLOCK_SKEW_MS`] from `now` (`clock-skew`, naming
/// `atMs`): the TTL and the deadline are judged on `atMs`, so a clock in
/// seconds, or ten minutes off, would end the task silently. Events
/// without `attempt` (seed 000's executors) are not checked.
pub fn check_report_clock(event: &Event, now: Millis) -> Result<(), Error> {
    if event.attempt().is_none() || event.kind().is_system() {
        return Ok(());
    }
    let off = event.at_ms().get() - now.get();
    if off.abs() <= MAX_CLOCK_SKEW_MS {
        return Ok(());
    }
    let way = if off > 0.0 { " ahead of" } else { " behind" };
    Err(Error {
        code: ErrorCode::ClockSkew,
        message: join(&[
            "atMs: ",
            &crate::js::number(crate::js::round(off.abs())),
            " ms",
            way,
            " the server's clock (",
            &crate::js::number(now.get()),
            "); at most 300000 ms apart: send the server's time (a claim's nowMs, the Date header)",
        ]),
    })
}

/// Whether a claim may take `task` at `now`: queued, before its TTL and
/// its deadline.
pub fn claimable(task: &TaskView, now: Millis) -> bool {
    let now = now.get();
    task.state == State::Queued
        && now < task.expires_at_ms
        && task.deadline_at_ms.map_or(true, |deadline| now < deadline)
}

/// The event a claim records for `task`: the `start` of its next attempt,
/// at the server's clock, with the claim's worker and lease.
pub fn claim_start(task: &TaskView, worker: &NonBlank, lease_ms: Millis, now: Millis) -> Event {
    Event::Start {
        at_ms: now,
        worker: String::from(worker.as_str()),
        attempt: task.attempts.checked_add(1),
        lease_ms: Some(lease_ms),
        // A claim names no plan: a worker gives its plan at creation or
        // in its own `start` callback (PROTOCOL.md §Steps).
        #[cfg(feature = "steps")]
        plan: None,
    }
}

/// A claim's body (`POST /v1/work/claim`), validated field by field.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimRequest {
    /// The worker's name, recorded as the `start`'s `worker`.
    pub worker: NonBlank,
    /// The kinds it runs (`""` is a task created without a kind).
    pub kinds: Vec<String>,
    /// How many tasks it takes at most.
    pub max: u64,
    /// How long to hold the request while there is no work.
    pub wait_ms: u64,
    /// The lease of each attempt it opens.
    pub lease_ms: Millis,
    /// The workflow versions it runs (`workflowVersions`); empty: any. A
    /// task whose plan names another is not claimed by it (see
    /// [`runs_workflow`]).
    pub workflow_versions: Vec<String>,
}

impl ClaimRequest {
    /// At most this many kinds in one claim.
    pub const MAX_KINDS: usize = 32;
    /// A kind is at most this many bytes, as at create.
    pub const MAX_KIND_BYTES: usize = 64;
    /// At most this many tasks per claim.
    pub const MAX_TASKS: u64 = 100;
    /// The longest hold, as for a long-poll.
    pub const MAX_WAIT_MS: u64 = 30_000;
    /// The lease when none is asked for.
    pub const DEFAULT_LEASE_MS: u64 = 30_000;
    /// Leases from 1 s to 1 h.
    pub const LEASE_RANGE_MS: (u64, u64) = (1_000, 3_600_000);
    /// A worker name is at most this many bytes, as an id.
    pub const MAX_WORKER_BYTES: usize = 255;
    /// At most this many workflow versions in one claim.
    pub const MAX_WORKFLOW_VERSIONS: usize = 16;
}

/// Whether a worker running `versions` (empty: any) may take `task`: the
/// task has no plan yet, or its plan's workflow version is one of them.
/// A plan is fixed for the task's life (PROTOCOL.md §Steps), so a worker
/// running newer code must not take over an older task: its claim names
/// the versions it runs, and tasks of others wait for their workers
/// (001 §3: 「部署新代码不能悄悄改变正在运行的旧任务」).
pub fn runs_workflow(task: &TaskView, versions: &[String]) -> bool {
    #[cfg(feature = "steps")]
    if let Some(plan) = task.plan.as_deref() {
        return versions.is_empty() || versions.contains(&plan.workflow_version);
    }
    let _ = (task, versions);
    true
}

fn in_range(
    f: &Fields<'_, '_, '_>,
    key: &str,
    default: u64,
    low: u64,
    high: u64,
) -> Result<u64, json::Error> {
    let value: u64 = f.get(key)?.unwrap_or(default);
    if (low..=high).contains(&value) {
        return Ok(value);
    }
    let why = join(&[
        "must be an integer from ",
        &crate::text::decimal(low),
        " to ",
        &crate::text::decimal(high),
        ", got ",
        &crate::text::decimal(value),
    ]);
    Err(f.missing(key, &why))
}

impl FromJson for ClaimRequest {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let worker: NonBlank = f.req("worker")?;
        if worker.as_str().len() > Self::MAX_WORKER_BYTES {
            return Err(f.missing("worker", "must be at most 255 bytes"));
        }
        let kinds: Vec<String> = f.req("kinds")?;
        if kinds.is_empty() || kinds.len() > Self::MAX_KINDS {
            return Err(f.missing("kinds", "must list 1 to 32 kinds"));
        }
        if kinds.iter().any(|k| k.len() > Self::MAX_KIND_BYTES) {
            return Err(f.missing("kinds", "each kind must be at most 64 bytes"));
        }
        let workflow_versions: Vec<NonBlank> = f.get("workflowVersions")?.unwrap_or_default();
        if workflow_versions.len() > Self::MAX_WORKFLOW_VERSIONS {
            return Err(f.missing("workflowVersions", "must list at most 16 versions"));
        }
        if workflow_versions
            .iter()
            .any(|v| v.as_str().len() > Self::MAX_WORKER_BYTES)
        {
            return Err(f.missing("workflowVersions", "each version must be at most 255 bytes"));
        }
        let (low, high) = Self::LEASE_RANGE_MS;
        let lease_ms = in_range(&f, "leaseMs", Self::DEFAULT_LEASE_MS, low, high)?;
        Ok(ClaimRequest {
            worker,
            kinds,
            max: in_range(&f, "max", 1, 1, Self::MAX_TASKS)?,
            wait_ms: in_range(&f, "waitMs", 0, 0, Self::MAX_WAIT_MS)?,
            // An integer of at most 3.6e6 is always a valid duration.
            lease_ms: Millis::new(lease_ms as f64, "leaseMs").unwrap_or_default(),
            workflow_versions: workflow_versions
                .into_iter()
                .map(NonBlank::into_string)
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests;

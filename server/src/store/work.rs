//! The work queue both stores keep (PROTOCOL.md §Workers): what a claim
//! asks the store for, the limits per kind, and the pure decisions around
//! core's rules, so that each store only fetches rows and writes what
//! comes back.
//!
//! **The queue is a column.** `tasks.queued_at_ms` holds, on the
//! server's clock, when a task was last queued (created, or re-queued by a
//! retryable `fail`, an abandoned lease or a decision), and is NULL in
//! every other state; a partial index on it is the queue. The one
//! statement that writes a task row in each store sets it from the state
//! core left (kept while queued, the clock when it became queued, NULL
//! otherwise), so no path can forget it.
//!
//! **A claim is core's `start`.** For each task taken the store builds
//! [`claim_start`] at the server's clock and judges it like any callback
//! (one version, one history entry, published to the hub), so followers
//! see `running` and nothing about a claim is a second rule.

use std::collections::BTreeMap;

use taskwire_core::{claim_start, claimable, runs_workflow, Millis, NonBlank, Reason};

use super::lifecycle::{judge_event, Judged};
use super::{SignedRequest, StoreError, TaskRecord};

/// A claim as the store runs it.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The tenants whose queues it takes from: one, or every tenant that
    /// uses the shared secret (then fairly: each one's first task before
    /// anyone's second).
    pub tenants: Vec<String>,
    /// The kinds it runs (`""` matches tasks created without a kind).
    pub kinds: Vec<String>,
    /// How many tasks at most.
    pub max: u64,
    /// Recorded as the `start`'s worker.
    pub worker: NonBlank,
    /// The lease of each attempt opened.
    pub lease_ms: Millis,
    /// The server's clock.
    pub now_ms: f64,
    /// The signed request, on the first try of a held claim only: it is
    /// used once (`callback_replays.rs`, under the tenant [`CLAIM_SCOPE`]
    /// prefix), so the same bytes sent again claim nothing.
    pub signed: Option<(String, SignedRequest)>,
    /// Limits per kind.
    pub limits: KindLimits,
    /// The workflow versions the worker runs (empty: any): a task whose
    /// plan names another is left for its own workers (core's
    /// `runs_workflow`; the stores' candidate queries skip them too, so
    /// they never stand in the way of the claim's own tasks).
    pub workflow_versions: Vec<String>,
}

/// The `callback_replays.tenant` of a claim's signed request: a claim is
/// never confused with a callback of the same id.
pub const CLAIM_SCOPE: &str = "claim:";

impl Claim {
    /// Under which `callback_replays.tenant` its signed request is
    /// remembered ([`CLAIM_SCOPE`] and the tenants it claims for).
    pub fn replay_scope(&self) -> String {
        format!("{CLAIM_SCOPE}{}", self.tenants.join(","))
    }
}

/// What one claim may still start, kind by kind, and what it started:
/// the loop both stores run over their candidates. Kinds run out of
/// budget one by one; the store looks again without them
/// ([`Spending::look_again`]) until the claim is full or no kind is left.
#[derive(Debug)]
pub(crate) struct Spending {
    budgets: BTreeMap<String, Budget>,
    started: BTreeMap<String, u64>,
    /// A candidate was passed over because its kind's budget ran out.
    exhausted: bool,
}

impl Spending {
    /// The limited kinds' budgets, as the store read them.
    pub(crate) fn new(budgets: BTreeMap<String, Budget>) -> Self {
        Spending {
            budgets,
            started: BTreeMap::new(),
            exhausted: false,
        }
    }

    /// When a rate limit lets the next start through, if one held a kind
    /// back.
    pub(crate) fn retry_at_ms(&self) -> Option<f64> {
        self.budgets
            .values()
            .filter_map(|b| b.retry_at_ms)
            .reduce(f64::min)
    }

    /// The kinds of `claim` with budget left, for the next look at the
    /// queue.
    pub(crate) fn open_kinds(&mut self, claim: &Claim) -> Vec<String> {
        self.exhausted = false;
        claim
            .kinds
            .iter()
            .filter(|k| self.budgets.get(*k).map_or(true, |b| b.left > 0))
            .cloned()
            .collect()
    }

    /// Whether a task of `kind` may start; a kind out of budget is noted,
    /// so that the store looks again without it.
    pub(crate) fn may_start(&mut self, kind: &str) -> bool {
        let spent = self.budgets.get(kind).is_some_and(|b| b.left == 0);
        self.exhausted |= spent;
        !spent
    }

    /// A task of `kind` was claimed.
    pub(crate) fn started(&mut self, kind: &str) {
        if let Some(budget) = self.budgets.get_mut(kind) {
            budget.left -= 1;
        }
        *self.started.entry(kind.to_string()).or_default() += 1;
    }

    /// After a look that found `found` candidates of `wanted`: look again
    /// only when some were passed over for a spent budget and the queue
    /// may hold more.
    pub(crate) fn look_again(&self, found: usize, wanted: u64) -> bool {
        self.exhausted && found as u64 >= wanted
    }

    /// The starts per kind, for the rate buckets.
    pub(crate) fn starts(&self) -> &BTreeMap<String, u64> {
        &self.started
    }
}

/// Limits per kind (`--kind-limit`), for a vendor account's concurrency
/// and QPS.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KindLimits(pub BTreeMap<String, KindLimit>);

/// One kind's limits.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct KindLimit {
    /// Attempts of this kind running at once (claimed, not ended), across
    /// every tenant and instance.
    pub max_running: Option<u64>,
    /// Attempts of this kind started per second, across every tenant and
    /// instance (a burst of one second's worth).
    pub per_second: Option<f64>,
}

impl KindLimits {
    /// The limit of `kind`, if any.
    pub fn of(&self, kind: &str) -> Option<&KindLimit> {
        self.0.get(kind)
    }
}

/// One kind's queue, for `/metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueDepth {
    /// The kind (`""` for tasks created without one).
    pub kind: String,
    /// Queued tasks, every tenant together.
    pub queued: u64,
    /// How long the oldest of them has waited, in seconds.
    pub oldest_age_secs: f64,
}

/// What a claim took, and when a rate limit lets the next one through.
#[derive(Debug, Clone, Default)]
pub struct Claimed {
    /// The tasks, each after its `start` (running, with its lease).
    pub tasks: Vec<TaskRecord>,
    /// The earliest time a kind held back by its rate may start again,
    /// when one was: a held claim looks again then.
    pub retry_at_ms: Option<f64>,
}

/// A kind's budget for one claim, from its limits and what the store read
/// (`running`, and the rate's theoretical arrival time `tat_ms`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// How many more may start now.
    pub left: u64,
    /// When the rate lets the next one through, if the rate held it back.
    pub retry_at_ms: Option<f64>,
}

impl KindLimit {
    /// The budget now: the concurrency left, and the starts the rate
    /// allows (GCRA with a burst of one second: `tat_ms` is when the
    /// bucket is empty again).
    pub fn budget(&self, running: u64, tat_ms: Option<f64>, now_ms: f64) -> Budget {
        let by_running = self
            .max_running
            .map_or(u64::MAX, |max| max.saturating_sub(running));
        let Some(rate) = self.per_second.filter(|r| *r > 0.0) else {
            return Budget {
                left: by_running,
                retry_at_ms: None,
            };
        };
        let interval = 1000.0 / rate;
        let burst_ms = 1000.0_f64.max(interval);
        let tat = tat_ms.unwrap_or(now_ms).max(now_ms);
        let room = (now_ms + burst_ms - tat) / interval;
        let by_rate = room.floor().max(0.0) as u64;
        Budget {
            left: by_running.min(by_rate),
            retry_at_ms: (by_rate == 0).then_some(tat - burst_ms + interval),
        }
    }

    /// The rate's theoretical arrival time after `started` more starts.
    pub fn tat_after(&self, tat_ms: Option<f64>, now_ms: f64, started: u64) -> Option<f64> {
        let rate = self.per_second.filter(|r| *r > 0.0)?;
        let tat = tat_ms.unwrap_or(now_ms).max(now_ms);
        Some(tat + started as f64 * 1000.0 / rate)
    }
}

/// Claims `record` for the worker: core's `start` of its next attempt at
/// the server's clock, judged like a callback. `None` when it cannot be
/// claimed now (past its TTL or deadline: the sweeper ends it), so the
/// store skips it and writes nothing.
pub(crate) fn judge_claim(
    record: &mut TaskRecord,
    claim: &Claim,
) -> Result<Option<Judged>, StoreError> {
    let now = Millis::new(claim.now_ms, "nowMs").map_err(StoreError::Invalid)?;
    if !claimable(&record.view, now) || !runs_workflow(&record.view, &claim.workflow_versions) {
        return Ok(None);
    }
    let start = claim_start(&record.view, &claim.worker, claim.lease_ms, now);
    let judged = judge_event(record, &start, Some(now));
    match judged.outcome.reason {
        Reason::Started => Ok(Some(judged)),
        // A queued task before its TTL always starts; anything else is a
        // row that disagrees with itself.
        other => Err(StoreError::Internal(format!(
            "claim of task {}: start answered {}",
            record.view.id,
            other.as_str()
        ))),
    }
}

#[cfg(test)]
mod tests;

//! Counters of what callbacks did, by core reason: how many duplicates the
//! server absorbed; and of what the sweeps did (expiries, quarantined
//! rows). The server keeps one set for all tenants (for tests and
//! operators; never served to a tenant), and `--demo` one per tenant
//! for its workloads, served by `GET /v1/demo/stats` (see
//! `demo::limits`). Cheap enough (one relaxed atomic add per callback) to
//! keep on always.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use taskwire_core::Reason;

use crate::store::Quarantined;

/// Every reason core gives, so that the lifecycle's (`stale-attempt`,
/// `cancel-acknowledged`, …) are counted like the seed's.
const REASONS: [Reason; Reason::ALL.len()] = Reason::ALL;

/// Callback counters.
#[derive(Debug)]
pub struct Stats {
    by_reason: [AtomicU64; REASONS.len()],
    callbacks: AtomicU64,
    rejected_signatures: AtomicU64,
    expired_by_sweeper: AtomicU64,
    quarantined_rows: AtomicU64,
}

impl Default for Stats {
    // By hand: `Default` for arrays stops at 32 elements.
    fn default() -> Self {
        Stats {
            by_reason: std::array::from_fn(|_| AtomicU64::new(0)),
            callbacks: AtomicU64::new(0),
            rejected_signatures: AtomicU64::new(0),
            expired_by_sweeper: AtomicU64::new(0),
            quarantined_rows: AtomicU64::new(0),
        }
    }
}

impl Stats {
    /// Counts one judged callback.
    pub fn callback(&self, reason: Reason) {
        self.callbacks.fetch_add(1, Ordering::Relaxed);
        if let Some(i) = REASONS.iter().position(|r| *r == reason) {
            if let Some(counter) = self.by_reason.get(i) {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts one judged callback by its reason's wire name (as in a
    /// callback answer); an unknown name counts as a callback only.
    pub fn callback_named(&self, reason: &str) {
        match REASONS.iter().find(|r| r.as_str() == reason) {
            Some(r) => self.callback(*r),
            None => {
                self.callbacks.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts a callback refused with 401.
    pub fn rejected_signature(&self) {
        self.rejected_signatures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts tasks the sweeper expired.
    pub fn swept(&self, n: usize) {
        self.expired_by_sweeper
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Reports rows a sweep set aside (`by` names the sweep): one stderr
    /// line each, naming the table, the key and the error, and the
    /// `quarantinedRows` counter. Each row is reported once: stores return
    /// a row only from the call that quarantined it.
    pub fn quarantined(&self, by: &str, rows: &[Quarantined]) {
        for row in rows {
            eprintln!(
                "taskwire-server: {by}: quarantined {} row {}: {} (left as it is; \
                 delete its quarantine row once repaired)",
                row.table, row.key, row.error
            );
        }
        self.quarantined_rows
            .fetch_add(rows.len() as u64, Ordering::Relaxed);
    }

    /// Judged callbacks by reason, every reason core gives (for
    /// `/metrics`, which reads these instead of counting again).
    pub fn by_reason(&self) -> impl Iterator<Item = (Reason, u64)> + '_ {
        REASONS
            .iter()
            .zip(&self.by_reason)
            .map(|(r, n)| (*r, n.load(Ordering::Relaxed)))
    }

    /// Callbacks refused with 401 so far.
    pub fn rejected_signatures(&self) -> u64 {
        self.rejected_signatures.load(Ordering::Relaxed)
    }

    /// Rows set aside so far.
    pub fn quarantined_rows(&self) -> u64 {
        self.quarantined_rows.load(Ordering::Relaxed)
    }

    /// Every counter (the server-wide set).
    pub fn totals(&self) -> Totals {
        Totals {
            callbacks: self.callback_counts(),
            expired_by_sweeper: self.expired_by_sweeper.load(Ordering::Relaxed),
            quarantined_rows: self.quarantined_rows.load(Ordering::Relaxed),
            rejected_signatures: self.rejected_signatures.load(Ordering::Relaxed),
        }
    }

    /// The callback counters only (what `/v1/demo/stats` shows a tenant
    /// of its own).
    pub fn callback_counts(&self) -> CallbackCounts {
        let by_reason: BTreeMap<&'static str, u64> = self
            .by_reason()
            .map(|(reason, n)| (reason.as_str(), n))
            .collect();
        let get = |r: Reason| by_reason.get(r.as_str()).copied().unwrap_or(0);
        let deduplicated = [
            Reason::DuplicateCallback,
            Reason::DuplicateResult,
            Reason::DuplicateProgress,
            Reason::AlreadyRunning,
            Reason::DuplicateExpire,
        ]
        .into_iter()
        .map(get)
        .sum::<u64>();
        CallbackCounts {
            by_reason,
            callbacks: self.callbacks.load(Ordering::Relaxed),
            deduplicated,
        }
    }
}

/// Callback counters. Fields in name order, and `byReason` a sorted map:
/// the order these bodies have always had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallbackCounts {
    /// Judged callbacks by reason's wire name, every reason core gives.
    pub by_reason: BTreeMap<&'static str, u64>,
    /// Judged callbacks.
    pub callbacks: u64,
    /// Those a duplicate reason absorbed (`duplicate-callback`,
    /// `duplicate-result`, `duplicate-progress`, `already-running`,
    /// `duplicate-expire`).
    pub deduplicated: u64,
}

/// Every counter of the server-wide set (for tests and operators).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Totals {
    /// The callback counters.
    pub callbacks: CallbackCounts,
    /// Tasks the sweeper expired.
    pub expired_by_sweeper: u64,
    /// Rows a sweep set aside.
    pub quarantined_rows: u64,
    /// Callbacks refused with 401.
    pub rejected_signatures: u64,
}

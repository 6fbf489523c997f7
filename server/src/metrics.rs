//! Metrics for the people who run the server, in the Prometheus text
//! format, served by [`endpoint`] on `--metrics-listen` only (never on
//! the API's address).
//!
//! **Cost on hot paths.** What the server does anyway is counted where it
//! happens with one atomic add (a gauge, a counter) or one histogram
//! observe (a short lock inside prometheus-client), and nothing that
//! allocates: an SSE stream is a gauge inc/dec (held long-polls are read from
//! [`crate::limits::Watchers`] at scrape time), a group commit two
//! observes per batch, a woken watcher one observe. What is already
//! counted elsewhere is read at scrape time instead of counted twice:
//! callbacks by reason and quarantined rows come from [`crate::stats`],
//! the PostgreSQL pool from the pool itself, the outbox backlog from one
//! store query ([`endpoint`]).
//!
//! **Bounded labels.** Every label takes values from a fixed list
//! (reasons, quota codes, sweeps, outcomes) or from the configured
//! tenants (`--token`), never from request input; the per-tenant series
//! are made at start-up, so a refusal finds its counter without
//! allocating.

pub mod endpoint;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::error::ApiError;

/// The quota codes a tenant's 429 carries (`crate::quotas`).
pub const QUOTA_CODES: [&str; 3] = ["create-rate-limited", "watch-quota", "open-task-quota"];

/// A tenant's and a code's label set, for the per-tenant 429 counter.
type TenantCode = [(&'static str, String); 2];

/// The PostgreSQL pool as the pool reports it (read at scrape time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStatus {
    /// Its largest size (`--pool`).
    pub max_size: usize,
    /// Connections open now.
    pub size: usize,
    /// Open connections idle now.
    pub available: usize,
    /// Callers waiting for a connection now.
    pub waiting: usize,
}

type PoolProbe = Box<dyn Fn() -> PoolStatus + Send + Sync>;

/// The server's live metrics (one set per running server, so that tests
/// running several servers in one process each see their own).
pub struct Metrics {
    registry: Registry,
    /// Open SSE streams; the held long-polls are the rest of
    /// [`crate::limits::Watchers`]' count (read at scrape time, so that
    /// the held long-poll's future, 10,000 of them at once, stays as it was).
    held_sse: Gauge,
    commit_batch: Histogram,
    commit_seconds: Histogram,
    wake_seconds: Histogram,
    webhook_attempts: Family<[(&'static str, &'static str); 1], Counter>,
    webhook_lag_seconds: Histogram,
    sweeper_runs: Counter,
    sweeper_moved: Family<[(&'static str, &'static str); 1], Counter>,
    /// Tenant → one counter per [`QUOTA_CODES`] entry (same order).
    refusals: HashMap<String, [Counter; QUOTA_CODES.len()]>,
    listen_connected: Gauge,
    listen_reconnects: Counter,
    pool: OnceLock<PoolProbe>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// The metrics of a server whose tenants are `tenants` (each gets its
    /// 429 counters now, at zero).
    pub fn new<'a>(tenants: impl IntoIterator<Item = &'a str>) -> Arc<Self> {
        let mut registry = Registry::with_prefix("taskwire");
        let held_sse = Gauge::default();
        registry.register(
            "held_event_streams",
            "SSE event streams open now",
            held_sse.clone(),
        );
        // 1, 2, 4, … 512 writes: the writers commit at most --max-batch (256).
        let commit_batch = Histogram::new(exponential_buckets(1.0, 2.0, 10));
        registry.register(
            "commit_batch_writes",
            "Writes committed together in one group-commit transaction",
            commit_batch.clone(),
        );
        // 100 µs … 3.3 s.
        let commit_seconds = Histogram::new(exponential_buckets(0.0001, 2.0, 16));
        registry.register_with_unit(
            "commit_duration",
            "Time a group commit took, from taking its connection or transaction to COMMIT done",
            Unit::Seconds,
            commit_seconds.clone(),
        );
        // 10 µs … 0.33 s.
        let wake_seconds = Histogram::new(exponential_buckets(0.00001, 2.0, 16));
        registry.register_with_unit(
            "wake_latency",
            "Time from a commit's publish to a held watcher running with it",
            Unit::Seconds,
            wake_seconds.clone(),
        );
        let webhook_attempts = Family::default();
        registry.register(
            "webhook_attempts",
            "Notify webhook posts, by outcome (delivered: a 2xx in time; failed: retried with backoff)",
            webhook_attempts.clone(),
        );
        // 10 ms … ~43 min.
        let webhook_lag_seconds = Histogram::new(exponential_buckets(0.01, 4.0, 12));
        registry.register_with_unit(
            "webhook_delivery_lag",
            "Time from a notification's event to its receiver's 2xx",
            Unit::Seconds,
            webhook_lag_seconds.clone(),
        );
        let sweeper_runs = Counter::default();
        registry.register(
            "sweeper_runs",
            "Sweeper ticks that ran their sweeps",
            sweeper_runs.clone(),
        );
        let sweeper_moved = Family::default();
        registry.register(
            "sweeper_moved_tasks",
            "Tasks the sweeper moved, by sweep (ttl: expired; lifecycle: lapsed, abandoned, timed out)",
            sweeper_moved.clone(),
        );
        let refusals_family = Family::<TenantCode, Counter>::default();
        let refusals = tenants
            .into_iter()
            .map(|tenant| {
                let counters = QUOTA_CODES.map(|code| {
                    refusals_family
                        .get_or_create(&[("tenant", tenant.to_string()), ("code", code.into())])
                        .clone()
                });
                (tenant.to_string(), counters)
            })
            .collect();
        registry.register(
            "quota_refusals",
            "Requests a tenant's quota refused with 429, by tenant and code",
            refusals_family,
        );
        let listen_connected = Gauge::default();
        let listen_reconnects = Counter::default();
        Arc::new(Metrics {
            registry,
            held_sse,
            commit_batch,
            commit_seconds,
            wake_seconds,
            webhook_attempts,
            webhook_lag_seconds,
            sweeper_runs,
            sweeper_moved,
            refusals,
            listen_connected,
            listen_reconnects,
            pool: OnceLock::new(),
        })
    }

    /// Counts one open SSE stream until the guard drops.
    pub fn hold_stream(&self) -> Held {
        self.held_sse.inc();
        Held {
            gauge: self.held_sse.clone(),
        }
    }

    /// A group commit of `writes` writes that took `took`.
    pub fn committed(&self, writes: usize, took: Duration) {
        self.commit_batch.observe(writes as f64);
        self.commit_seconds.observe(took.as_secs_f64());
    }

    /// A held watcher runs with a change published at `published`.
    pub fn woke(&self, published: Instant) {
        self.wake_seconds.observe(published.elapsed().as_secs_f64());
    }

    /// A notify post ended: `lag_ms` from the notification's event to its
    /// 2xx when delivered.
    pub fn webhook_attempt(&self, delivered: bool, lag_ms: f64) {
        let outcome = if delivered { "delivered" } else { "failed" };
        self.webhook_attempts
            .get_or_create(&[("outcome", outcome)])
            .inc();
        if delivered {
            self.webhook_lag_seconds.observe(lag_ms.max(0.0) / 1000.0);
        }
    }

    /// One sweeper tick ran.
    pub fn sweeper_ran(&self) {
        self.sweeper_runs.inc();
    }

    /// A sweep (`ttl` or `lifecycle`) moved `tasks` tasks.
    pub fn swept(&self, sweep: &'static str, tasks: usize) {
        if tasks > 0 {
            self.sweeper_moved
                .get_or_create(&[("sweep", sweep)])
                .inc_by(tasks as u64);
        }
    }

    /// Counts `err` against `tenant` when it is a quota's 429; anything
    /// else (and a tenant not configured) is left alone.
    pub fn refused(&self, tenant: &str, err: &ApiError) {
        self.refused_code(tenant, err.code);
    }

    /// Counts a quota's 429 with `code` against `tenant` (any other code
    /// is left alone).
    pub fn refused_code(&self, tenant: &str, code: &str) {
        let Some(i) = QUOTA_CODES.iter().position(|c| *c == code) else {
            return;
        };
        if let Some(counter) = self.refusals.get(tenant).and_then(|c| c.get(i)) {
            counter.inc();
        }
    }

    /// The PostgreSQL LISTEN connection is (or stopped being) listening.
    pub fn listen_connected(&self, connected: bool) {
        self.listen_connected.set(i64::from(connected));
    }

    /// The PostgreSQL LISTEN connection was lost and is reconnecting.
    pub fn listen_reconnecting(&self) {
        self.listen_reconnects.inc();
    }

    /// Where the PostgreSQL pool's status is read at scrape time (set once,
    /// by the PostgreSQL store; its LISTEN metrics are shown from then on).
    pub fn watch_pool(&self, probe: impl Fn() -> PoolStatus + Send + Sync + 'static) {
        let _ = self.pool.set(Box::new(probe));
    }

    fn pool_status(&self) -> Option<PoolStatus> {
        self.pool.get().map(|probe| probe())
    }
}

/// One open SSE stream, counted while it lives ([`Metrics::hold_stream`]).
#[derive(Debug)]
#[must_use = "the stream stops being counted as soon as the guard drops"]
pub struct Held {
    gauge: Gauge,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// A counter holding a value read elsewhere (for the scrape-time set).
fn counter_at(value: u64) -> Counter {
    let counter = Counter::<u64, AtomicU64>::default();
    counter.inc_by(value);
    counter
}

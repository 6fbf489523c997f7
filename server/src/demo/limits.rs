//! What one tenant may do with `--demo`. Every tenant shares the server,
//! so the demo is scoped to the caller: its counters are its own (one
//! [`Stats`] per tenant, counted from the answers its workloads' callbacks
//! get), `drop-connections` cuts only its held requests (the hub keeps a
//! drop signal per tenant), and its workloads are bounded:
//!
//! - at most [`TENANT_RUNNING`] demo tasks playing at once per tenant and
//!   [`SERVER_RUNNING`] on the whole server (a batch is three tasks), each
//!   counted from admission until the demo is done with it (its plan
//!   ended, or it was forgotten: see `scripts`);
//! - at most [`START_BURST`] workload starts at once per tenant, refilled
//!   at [`STARTS_PER_SEC`];
//! - speed at least [`MIN_SPEED`], so a task holds its place for minutes,
//!   not hours.
//!
//! Past a bound the answer is 429 with `Retry-After` and a stable code
//! (`demo-rate-limited`, `demo-too-many-workloads`). Memory is then
//! bounded whatever a tenant sends: a script costs a few hundred bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::ApiError;
use crate::stats::Stats;

/// Slowest speed accepted (the longest plan, 24.8 s, then takes 248 s).
pub const MIN_SPEED: f64 = 0.1;
/// Fastest speed accepted.
pub const MAX_SPEED: f64 = 1000.0;
/// Demo tasks playing at once, per tenant.
pub const TENANT_RUNNING: usize = 24;
/// Demo tasks playing at once, for all tenants together.
pub const SERVER_RUNNING: usize = 256;
/// Workload starts a tenant may make at once.
pub const START_BURST: f64 = 10.0;
/// Workload starts per second a tenant may sustain.
pub const STARTS_PER_SEC: f64 = 2.0;

/// The demo's per-tenant state (one per server).
#[derive(Debug, Default)]
pub struct Demo {
    state: Mutex<DemoState>,
    /// The demo tasks in play (for kills) and the workers' notes.
    pub workers: Arc<super::workers::Workers>,
    /// What the workers play for each demo task.
    pub scripts: Arc<super::scripts::Scripts>,
    /// The workers themselves, per tenant.
    pub fleets: super::fleet::Fleets,
    /// The tasks and batches the demo made (the only ones it mints for).
    pub made: super::made::Made,
}

#[derive(Debug, Default)]
struct DemoState {
    next_id: u64,
    running: Vec<Running>,
    /// Tenants come from the configured tokens: these maps stay small.
    buckets: HashMap<String, Bucket>,
    stats: HashMap<String, Arc<Stats>>,
}

#[derive(Debug)]
struct Running {
    id: u64,
    tenant: String,
    /// When its plan is expected to end (for `Retry-After`).
    ends: Instant,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// One admitted demo task: its place is given back when dropped (its
/// script holds it until the demo is done with the task).
#[derive(Debug)]
#[must_use = "the place is given back when the slot is dropped"]
pub struct Slot {
    demo: Arc<Demo>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.demo.state().running.retain(|r| r.id != self.id);
    }
}

impl Demo {
    fn state(&self) -> MutexGuard<'_, DemoState> {
        // Plain counters: still consistent after a panic elsewhere.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits one workload of `tenant` whose tasks run for `runs` (one
    /// entry per task), or refuses it with a 429: all of its tasks or
    /// none.
    pub fn admit(self: &Arc<Self>, tenant: &str, runs: &[Duration]) -> Result<Vec<Slot>, ApiError> {
        self.admit_at(tenant, runs, Instant::now())
    }

    fn admit_at(
        self: &Arc<Self>,
        tenant: &str,
        runs: &[Duration],
        now: Instant,
    ) -> Result<Vec<Slot>, ApiError> {
        let mut st = self.state();
        let bucket = st.buckets.entry(tenant.to_string()).or_insert(Bucket {
            tokens: START_BURST,
            at: now,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * STARTS_PER_SEC;
        bucket.tokens = (bucket.tokens + refill).min(START_BURST);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            let wait = (1.0 - bucket.tokens) / STARTS_PER_SEC;
            return Err(ApiError::too_many(
                "demo-rate-limited",
                format!(
                    "tenant: at most {STARTS_PER_SEC} demo workloads per second \
                     (bursts of {START_BURST}); try again later"
                ),
                whole_seconds(wait),
            ));
        }
        let mine = st.running.iter().filter(|r| r.tenant == tenant).count();
        let full = if mine + runs.len() > TENANT_RUNNING {
            Some((
                format!("tenant: at most {TENANT_RUNNING} demo tasks may run at once per tenant"),
                true,
            ))
        } else if st.running.len() + runs.len() > SERVER_RUNNING {
            Some((
                format!("server: at most {SERVER_RUNNING} demo tasks may run at once"),
                false,
            ))
        } else {
            None
        };
        if let Some((message, own)) = full {
            let soonest = st
                .running
                .iter()
                .filter(|r| !own || r.tenant == tenant)
                .map(|r| r.ends.saturating_duration_since(now))
                .min()
                .unwrap_or_default();
            return Err(ApiError::too_many(
                "demo-too-many-workloads",
                message,
                whole_seconds(soonest.as_secs_f64()),
            ));
        }
        if let Some(bucket) = st.buckets.get_mut(tenant) {
            bucket.tokens -= 1.0;
        }
        let mut slots = Vec::with_capacity(runs.len());
        for run in runs {
            let id = st.next_id;
            st.next_id += 1;
            st.running.push(Running {
                id,
                tenant: tenant.to_string(),
                ends: now + *run,
            });
            slots.push(Slot {
                demo: Arc::clone(self),
                id,
            });
        }
        Ok(slots)
    }

    /// The tenant's callback counters.
    pub fn stats(&self, tenant: &str) -> Arc<Stats> {
        let mut st = self.state();
        Arc::clone(st.stats.entry(tenant.to_string()).or_default())
    }

    /// How many of the tenant's demo tasks are playing now.
    pub fn running(&self, tenant: &str) -> usize {
        self.state()
            .running
            .iter()
            .filter(|r| r.tenant == tenant)
            .count()
    }
}

/// Seconds for `Retry-After`: rounded up, at least 1.
fn whole_seconds(secs: f64) -> u32 {
    if secs.is_finite() && secs > 0.0 {
        (secs.ceil() as u32).max(1)
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: Duration = Duration::from_secs(30);

    #[test]
    fn starts_are_rate_limited_per_tenant() {
        let demo = Arc::new(Demo::default());
        let t0 = Instant::now();
        let mut kept = Vec::new();
        for _ in 0..START_BURST as usize {
            kept.extend(demo.admit_at("a", &[RUN], t0).unwrap());
        }
        let err = demo.admit_at("a", &[RUN], t0).unwrap_err();
        assert_eq!((err.status.as_u16(), err.code), (429, "demo-rate-limited"));
        assert_eq!(err.retry_after, Some(1));
        // Another tenant has its own bucket.
        kept.extend(demo.admit_at("b", &[RUN], t0).unwrap());
        // Half a second later one more start is allowed.
        let later = t0 + Duration::from_millis(500);
        kept.extend(demo.admit_at("a", &[RUN], later).unwrap());
        assert!(demo.admit_at("a", &[RUN], later).is_err());
        assert_eq!(demo.running("a"), START_BURST as usize + 1);
    }

    #[test]
    fn running_tasks_are_capped_per_tenant_and_given_back() {
        let demo = Arc::new(Demo::default());
        let mut t = Instant::now();
        let mut kept = Vec::new();
        while kept.len() + 3 <= TENANT_RUNNING {
            t += Duration::from_secs(1);
            kept.extend(demo.admit_at("a", &[RUN, RUN, RUN], t).unwrap());
        }
        t += Duration::from_secs(1);
        let err = demo.admit_at("a", &[RUN; 3], t).unwrap_err();
        assert_eq!(
            (err.status.as_u16(), err.code),
            (429, "demo-too-many-workloads")
        );
        // The soonest of a's tasks ends 30 s after the first admission.
        let first_ends = RUN.as_secs() as u32 - (kept.len() / 3) as u32;
        assert_eq!(err.retry_after, Some(first_ends));
        assert!(demo.admit_at("b", &[RUN; 3], t).is_ok(), "b is not a's");
        drop(kept.drain(..3));
        assert!(demo.admit_at("a", &[RUN; 3], t).is_ok());
    }

    #[test]
    fn the_server_wide_cap_holds_across_tenants() {
        let demo = Arc::new(Demo::default());
        let t = Instant::now();
        let mut kept = Vec::new();
        let mut tenant = 0;
        while kept.len() + TENANT_RUNNING <= SERVER_RUNNING {
            kept.extend(
                demo.admit_at(&format!("t{tenant}"), &[RUN; TENANT_RUNNING], t)
                    .unwrap(),
            );
            tenant += 1;
        }
        let rest = SERVER_RUNNING - kept.len();
        kept.extend(demo.admit_at("last", &vec![RUN; rest], t).unwrap());
        let err = demo.admit_at("new", &[RUN], t).unwrap_err();
        assert_eq!(err.code, "demo-too-many-workloads");
        assert!(err.message.starts_with("server: "), "{}", err.message);
    }
}

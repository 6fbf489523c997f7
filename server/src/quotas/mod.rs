//! Per-tenant quotas: admission control that keeps one tenant from
//! taking the server from the others (issue 12; seed 003's 「积压降级=拒绝/
//! 限速」, seed 004's 「准入策略控制 QPS、账号并发、租户配额」).
//!
//! Three limits, each off unless configured ([`flags`]), each answered
//! 429 with `Retry-After` and a code of its own:
//! - **Create rate** (`create-rate-limited`): a token bucket per tenant
//!   ([`bucket`]), checked in memory before the create reaches the store.
//!   Only a create that makes a task spends a token: an idempotent replay
//!   is answered as before (read back without the writer, when the bucket
//!   is empty) and a refused create gives its token back.
//! - **Held watches** (`watch-quota`): counted with the server-wide cap by
//!   [`crate::limits::Watchers`], which takes its per-tenant maxima from
//!   here.
//! - **Open tasks** (`open-task-quota`): the tenant's non-terminal tasks,
//!   counted by the store inside the create's own transaction (an index on
//!   the tenant's live tasks), so the count holds across restarts and
//!   instances and two racing creates cannot both take the last slot.
//!
//! The rate and the watch counts are per instance (memory); the open-task
//! count is the store's.

pub mod bucket;
pub mod flags;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use bucket::{retry_after_secs, TokenBucket};
pub use flags::{CreateRate, QuotaFlags, TenantLimits};

use crate::error::{quoted, ApiError};

/// `Retry-After` of a `watch-quota` refusal: held requests end within
/// 30 s (`waitMs`), so the tenant's slots free up continuously, as for
/// the server-wide `watch-limit`.
pub const WATCH_QUOTA_RETRY_AFTER_SECS: u32 = crate::limits::WATCH_RETRY_AFTER_SECS;

/// `Retry-After` of an `open-task-quota` refusal: a slot frees only when
/// one of the tenant's tasks ends, which takes as long as its work does;
/// polling faster than this only adds load.
pub const OPEN_TASK_RETRY_AFTER_SECS: u32 = 5;

/// How long a quota refusal is held before it is answered. A tenant that
/// ignores `Retry-After` and asks again at once would otherwise turn its
/// refusals into load on the cores every tenant shares (measured: 26,000
/// refusals a second from 116 connections took another tenant's p50 from
/// 1.0 to 4.3 ms); held, each of its connections gets two answers a
/// second. A client that honours `Retry-After` waits longer than this
/// anyway. The held refusal costs a timer, not a watch or a store read.
pub const REFUSAL_DELAY: std::time::Duration = std::time::Duration::from_millis(500);

/// `refusal`, answered after [`REFUSAL_DELAY`].
pub async fn answered_late(refusal: ApiError) -> ApiError {
    tokio::time::sleep(REFUSAL_DELAY).await;
    refusal
}

/// Every tenant's limits and create-rate bucket, built at start-up from
/// the flags. Tenants come from `--token`, so the map never grows; each
/// bucket has a lock of its own, so tenants never wait on one another.
#[derive(Debug, Default)]
pub struct Quotas {
    tenants: HashMap<String, TenantQuota>,
}

#[derive(Debug)]
struct TenantQuota {
    limits: TenantLimits,
    bucket: Option<Mutex<TokenBucket>>,
}

impl Quotas {
    /// The quotas of `limits` (see [`QuotaFlags::resolve`]), buckets full.
    pub fn new(limits: HashMap<String, TenantLimits>) -> Self {
        let now = Instant::now();
        let tenants = limits
            .into_iter()
            .map(|(tenant, limits)| {
                let bucket = limits
                    .create_rate
                    .map(|r| Mutex::new(TokenBucket::new(r.per_sec, r.burst, now)));
                (tenant, TenantQuota { limits, bucket })
            })
            .collect();
        Quotas { tenants }
    }

    /// The tenant's limits (all `None` for a tenant without any).
    pub fn limits(&self, tenant: &str) -> TenantLimits {
        self.tenants
            .get(tenant)
            .map(|q| q.limits)
            .unwrap_or_default()
    }

    /// Each tenant's held-watch maximum, for [`crate::limits::Watchers`].
    pub fn max_watches(&self) -> HashMap<String, usize> {
        self.tenants
            .iter()
            .filter_map(|(t, q)| q.limits.max_watches.map(|m| (t.clone(), m)))
            .collect()
    }

    /// The most open tasks `tenant` may have, if limited.
    pub fn max_open_tasks(&self, tenant: &str) -> Option<u64> {
        self.tenants.get(tenant)?.limits.max_open_tasks
    }

    /// Takes one of the tenant's create tokens, or refuses with 429
    /// `create-rate-limited` and the seconds until the next token. The
    /// token goes back unless [`CreateToken::spend`] is called, so a create
    /// that ends in a replay or an error costs nothing.
    pub fn take_create(&self, tenant: &str) -> Result<CreateToken<'_>, ApiError> {
        let Some(bucket) = self.tenants.get(tenant).and_then(|q| q.bucket.as_ref()) else {
            return Ok(CreateToken { bucket: None });
        };
        let mut b = lock(bucket);
        match b.take(Instant::now()) {
            Ok(()) => Ok(CreateToken {
                bucket: Some(bucket),
            }),
            Err(wait) => {
                let secs = retry_after_secs(wait);
                Err(ApiError::too_many(
                    "create-rate-limited",
                    format!(
                        "create-rate: tenant {} may create {} tasks per second (burst {}); \
                         the next create is allowed in {secs} s",
                        quoted(tenant),
                        b.rate(),
                        b.burst()
                    ),
                    secs,
                ))
            }
        }
    }
}

fn lock(bucket: &Mutex<TokenBucket>) -> MutexGuard<'_, TokenBucket> {
    // A bucket is two numbers; a panic elsewhere cannot leave it unusable.
    bucket.lock().unwrap_or_else(|p| p.into_inner())
}

/// A create token taken from a tenant's bucket: given back when dropped,
/// unless the create made a task ([`CreateToken::spend`]).
#[derive(Debug)]
#[must_use = "dropping the token gives it back"]
pub struct CreateToken<'a> {
    bucket: Option<&'a Mutex<TokenBucket>>,
}

impl CreateToken<'_> {
    /// The create made a task: the token stays spent.
    pub fn spend(mut self) {
        self.bucket = None;
    }
}

impl Drop for CreateToken<'_> {
    fn drop(&mut self) {
        if let Some(bucket) = self.bucket {
            lock(bucket).give_back();
        }
    }
}

/// 429 `watch-quota`: the tenant holds as many long-polls and streams as
/// its quota allows.
pub fn watch_quota(tenant: &str, max: usize) -> ApiError {
    ApiError::too_many(
        "watch-quota",
        format!(
            "max-watches: tenant {} already holds {max} long-polls and streams, its limit",
            quoted(tenant)
        ),
        WATCH_QUOTA_RETRY_AFTER_SECS,
    )
}

/// 429 `open-task-quota`: the tenant has as many open tasks as its quota
/// allows.
pub fn open_task_quota(tenant: &str, max: u64, wanted: u64) -> ApiError {
    let message = if wanted <= 1 {
        format!(
            "max-open-tasks: tenant {} already has {max} open tasks, its limit; \
             one must end (succeed, fail, be cancelled, time out or expire) first",
            quoted(tenant)
        )
    } else {
        format!(
            "max-open-tasks: a batch of {wanted} items would take tenant {} past its \
             limit of {max} open tasks; some must end (succeed, fail, be cancelled, \
             time out or expire) first",
            quoted(tenant)
        )
    };
    ApiError::too_many("open-task-quota", message, OPEN_TASK_RETRY_AFTER_SECS)
}

/// 422 `batch-over-quota`: a batch with more items than the tenant's
/// open-task quota can never be created; waiting would not help, so it is
/// not a 429.
pub fn batch_over_quota(tenant: &str, items: usize, max: u64) -> ApiError {
    ApiError::unprocessable(
        "batch-over-quota",
        format!(
            "body.items: {items} items can never fit tenant {}'s limit of {max} open tasks \
             (max-open-tasks); split the batch",
            quoted(tenant)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(rate: f64, burst: u32) -> Quotas {
        let limits = TenantLimits {
            create_rate: Some(CreateRate {
                per_sec: rate,
                burst,
            }),
            ..TenantLimits::default()
        };
        Quotas::new(HashMap::from([("a".to_string(), limits)]))
    }

    #[test]
    fn a_token_not_spent_goes_back() {
        let q = quotas(0.001, 1);
        drop(q.take_create("a").unwrap());
        q.take_create("a").unwrap().spend();
        let refused = q.take_create("a").unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (429, "create-rate-limited")
        );
        assert_eq!(refused.retry_after, Some(1000));
        assert!(refused.message.starts_with("create-rate: tenant \"a\""));
        // Another tenant has no bucket.
        q.take_create("b").unwrap().spend();
        q.take_create("b").unwrap().spend();
    }
}

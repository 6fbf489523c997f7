//! Held long-polls and SSE streams, counted for the whole server
//! (`--max-watchers`) and per tenant with a `max-watches` quota.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::ApiError;

/// Held long-polls and SSE streams, counted against `--max-watchers`
/// (all tenants) and against each tenant's `max-watches` quota
/// ([`crate::quotas`]). [`Watchers::admit`] hands out a [`WatchPermit`]
/// that gives both slots back when dropped, so the handlers only hold it.
#[derive(Debug)]
pub struct Watchers {
    server: Arc<Count>,
    /// Tenants with a quota: their own count. Built at start-up and never
    /// changed, so admitting takes no lock.
    tenants: HashMap<String, Arc<TenantWatches>>,
    /// The tenants without a quota share one unlimited count.
    unlimited: Arc<TenantWatches>,
}

/// Slots held out of `max`.
#[derive(Debug)]
struct Count {
    held: AtomicUsize,
    max: usize,
}

impl Count {
    fn new(max: usize) -> Self {
        Count {
            held: AtomicUsize::new(0),
            max,
        }
    }

    /// Takes a slot, if one is free.
    fn take(&self) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok()
    }

    fn give_back(&self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A tenant's count and the server's, so that a permit is one pointer
/// (10,000 held long-polls hold 10,000 permits).
#[derive(Debug)]
struct TenantWatches {
    own: Count,
    server: Arc<Count>,
}

/// Seconds a refused watcher is told to wait (`Retry-After`): held
/// requests end within 30 s, so slots free up continuously.
pub const WATCH_RETRY_AFTER_SECS: u32 = 2;

impl Watchers {
    /// A count allowing `max` held watches at once, and no tenant quota.
    pub fn new(max: usize) -> Arc<Self> {
        Watchers::with_quotas(max, HashMap::new())
    }

    /// A count allowing `max` held watches at once, and at most
    /// `per_tenant[t]` of them for tenant `t`.
    pub fn with_quotas(max: usize, per_tenant: HashMap<String, usize>) -> Arc<Self> {
        let server = Arc::new(Count::new(max));
        let count = |max| {
            Arc::new(TenantWatches {
                own: Count::new(max),
                server: Arc::clone(&server),
            })
        };
        let tenants = per_tenant
            .into_iter()
            .map(|(tenant, max)| (tenant, count(max)))
            .collect();
        let unlimited = count(usize::MAX);
        Arc::new(Watchers {
            server,
            tenants,
            unlimited,
        })
    }

    /// Takes a slot for one held long-poll or SSE stream of `tenant`, or
    /// refuses: 429 `watch-quota` when the tenant holds its quota (checked
    /// first: a tenant at its own limit is told so, whatever the others
    /// do), 503 `watch-limit` when every slot of the server is taken. A
    /// refusal keeps no slot.
    pub fn admit(&self, tenant: &str) -> Result<WatchPermit, ApiError> {
        let count = self.tenants.get(tenant).unwrap_or(&self.unlimited);
        if !count.own.take() {
            return Err(crate::quotas::watch_quota(tenant, count.own.max));
        }
        if !count.server.take() {
            count.own.give_back();
            return Err(ApiError::watch_limit(
                count.server.max,
                WATCH_RETRY_AFTER_SECS,
            ));
        }
        Ok(WatchPermit {
            count: Arc::clone(count),
        })
    }

    /// Refuses at once (429 `watch-quota`) when `tenant` already holds its
    /// quota: the watch routes ask before they read the task, so that a
    /// tenant flooding past its quota costs no store read. [`Self::admit`]
    /// still decides once the request is found worth holding.
    pub fn check_quota(&self, tenant: &str) -> Result<(), ApiError> {
        match self.tenants.get(tenant) {
            Some(count) if count.own.held.load(Ordering::Acquire) >= count.own.max => {
                Err(crate::quotas::watch_quota(tenant, count.own.max))
            }
            _ => Ok(()),
        }
    }

    /// Watches held now.
    pub fn held(&self) -> usize {
        self.server.held.load(Ordering::Acquire)
    }

    /// Watches `tenant` holds now, when it has a quota.
    pub fn held_by(&self, tenant: &str) -> Option<usize> {
        self.tenants
            .get(tenant)
            .map(|c| c.own.held.load(Ordering::Acquire))
    }
}

/// One held watch's slot, its tenant's and the server's; given back when
/// dropped.
#[derive(Debug)]
#[must_use = "the slot is given back as soon as the permit is dropped"]
pub struct WatchPermit {
    count: Arc<TenantWatches>,
}

impl Drop for WatchPermit {
    fn drop(&mut self) {
        self.count.server.give_back();
        self.count.own.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_slots_are_capped_and_given_back() {
        let watchers = Watchers::new(2);
        let a = watchers.admit("t").unwrap();
        let _b = watchers.admit("t").unwrap();
        let refused = watchers.admit("t").unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (503, "watch-limit")
        );
        assert_eq!(refused.retry_after, Some(WATCH_RETRY_AFTER_SECS));
        drop(a);
        assert_eq!(watchers.held(), 1);
        assert!(watchers.admit("t").is_ok());
    }

    #[test]
    fn a_tenant_at_its_quota_is_refused_and_the_others_are_not() {
        let watchers = Watchers::with_quotas(2, HashMap::from([("a".to_string(), 1)]));
        let a = watchers.admit("a").unwrap();
        let b1 = watchers.admit("b").unwrap();
        // The server is full and a at its quota: a is told of its quota.
        let refused = watchers.admit("a").unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (429, "watch-quota")
        );
        assert_eq!(refused.retry_after, Some(WATCH_RETRY_AFTER_SECS));
        assert_eq!(watchers.held(), 2, "a refusal keeps no slot");
        drop(a);
        let _b2 = watchers.admit("b").unwrap();
        // Below its quota but the server full: 503, its own slot given back.
        assert_eq!(watchers.admit("a").unwrap_err().code, "watch-limit");
        assert_eq!(watchers.held_by("a"), Some(0));
        drop(b1);
        let _a = watchers.admit("a").unwrap();
        assert_eq!((watchers.held(), watchers.held_by("a")), (2, Some(1)));
        assert_eq!(watchers.held_by("b"), None, "b has no quota");
    }
}

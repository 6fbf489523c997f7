//! Held long-polls and SSE streams, counted three ways: for the whole
//! server (`--max-watchers`, 503 `watch-limit`), for each tenant (its
//! `max-watches` quota, 429 `watch-quota`) and for each end user, the
//! subject of a browser token (`--subject-max-watches`, 429
//! `watch-quota`).
//!
//! The subject's count is what keeps one page from taking every slot: a
//! watch-only browser token is all an end user has, and with it alone one
//! user once held all 14,616 slots of a default server, so that another
//! tenant's long-polls were all refused (issue 24, F6). The tenant's count
//! keeps a tenant with many users (or its own backend) from doing the same
//! to the other tenants; by default each tenant of a server with several
//! may hold half of the slots ([`crate::quotas::QuotaFlags::resolve_with`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{quoted, ApiError};

/// Who holds a watch: the tenant, and the end user when the credential is
/// a browser token (a tenant token is its tenant's backend: no subject).
#[derive(Debug, Clone, Copy)]
pub struct Watcher<'a> {
    /// The credential's tenant.
    pub tenant: &'a str,
    /// A browser token's `sub`.
    pub subject: Option<&'a str>,
}

/// Held long-polls and SSE streams, counted against `--max-watchers`
/// (all tenants), each tenant's `max-watches` quota ([`crate::quotas`])
/// and `--subject-max-watches`. [`Watchers::admit`] hands out a
/// [`WatchPermit`] that gives every slot back when dropped, so the
/// handlers only hold it.
#[derive(Debug)]
pub struct Watchers {
    server: Arc<Count>,
    /// Tenants with a quota: their own count. Built at start-up and never
    /// changed, so admitting takes no lock.
    tenants: HashMap<String, Arc<TenantWatches>>,
    /// The tenants without a quota share one unlimited count.
    unlimited: Arc<TenantWatches>,
    /// Each end user's watches (only users holding some are kept).
    subjects: Arc<SubjectWatches>,
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

    fn is_full(&self) -> bool {
        self.held.load(Ordering::Acquire) >= self.max
    }
}

/// A tenant's count and the server's, so that a permit stays small
/// (10,000 held long-polls hold 10,000 permits).
#[derive(Debug)]
struct TenantWatches {
    own: Count,
    server: Arc<Count>,
}

/// The end users' counts, keyed by tenant and subject. Users come and go,
/// so this is a map under a lock, held only to add or take one.
#[derive(Debug)]
struct SubjectWatches {
    max: usize,
    held: Mutex<HashMap<Arc<str>, usize>>,
}

impl SubjectWatches {
    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, usize>> {
        // A panic while counting cannot leave a count half-written.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a slot for `key`, or `None` when the user holds its maximum.
    fn take(self: &Arc<Self>, key: Arc<str>) -> Option<SubjectSlot> {
        let mut held = self.lock();
        let n = held.entry(Arc::clone(&key)).or_insert(0);
        if *n >= self.max {
            if *n == 0 {
                held.remove(&key);
            }
            return None;
        }
        *n += 1;
        Some(SubjectSlot(Arc::new((Arc::clone(self), key))))
    }

    fn is_full(&self, key: &str) -> bool {
        self.lock().get(key).is_some_and(|n| *n >= self.max)
    }

    fn give_back(&self, key: &str) {
        let mut held = self.lock();
        if let Some(n) = held.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(key);
            }
        }
    }
}

/// The map key of a user: tenant and subject (`sub` is unique only
/// within its tenant's tokens).
fn subject_key(tenant: &str, subject: &str) -> String {
    format!("{tenant}\u{0}{subject}")
}

/// Seconds a refused watcher is told to wait (`Retry-After`): held
/// requests end within 30 s, so slots free up continuously.
pub const WATCH_RETRY_AFTER_SECS: u32 = 2;

/// The default of `--subject-max-watches`: far more than one page needs
/// (a browser opens 6 connections per origin over HTTP/1.1), far fewer
/// than a server's slots.
pub const DEFAULT_SUBJECT_MAX_WATCHES: u64 = 100;

impl Watchers {
    /// A count allowing `max` held watches at once, no tenant quota, and
    /// [`DEFAULT_SUBJECT_MAX_WATCHES`] per end user.
    pub fn new(max: usize) -> Arc<Self> {
        Watchers::with_quotas(max, HashMap::new(), DEFAULT_SUBJECT_MAX_WATCHES as usize)
    }

    /// A count allowing `max` held watches at once, at most
    /// `per_tenant[t]` of them for tenant `t`, and `per_subject` for each
    /// end user.
    pub fn with_quotas(
        max: usize,
        per_tenant: HashMap<String, usize>,
        per_subject: usize,
    ) -> Arc<Self> {
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
        let subjects = Arc::new(SubjectWatches {
            max: per_subject,
            held: Mutex::new(HashMap::new()),
        });
        Arc::new(Watchers {
            server,
            tenants,
            unlimited,
            subjects,
        })
    }

    /// Takes a slot for one held long-poll or SSE stream of `who`, or
    /// refuses: 429 `watch-quota` when the user holds its maximum, or the
    /// tenant its quota (checked first: a caller at its own limit is told
    /// so, whatever the others do), 503 `watch-limit` when every slot of
    /// the server is taken. A refusal keeps no slot.
    pub fn admit(&self, who: Watcher<'_>) -> Result<WatchPermit, ApiError> {
        // From here a refusal gives the user's slot back by dropping it.
        let subject = match who.subject {
            Some(sub) => match self.subjects.take(subject_key(who.tenant, sub).into()) {
                Some(slot) => Some(slot),
                None => return Err(subject_quota(sub, self.subjects.max)),
            },
            None => None,
        };
        let count = self.tenants.get(who.tenant).unwrap_or(&self.unlimited);
        if !count.own.take() {
            return Err(crate::quotas::watch_quota(who.tenant, count.own.max));
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
            _subject: subject,
        })
    }

    /// Refuses at once (429 `watch-quota`) when the user or the tenant
    /// already holds its maximum: the watch routes ask before they read
    /// the task, so that a caller flooding past its quota costs no store
    /// read. [`Self::admit`] still decides once the request is found worth
    /// holding.
    pub fn check_quota(&self, who: Watcher<'_>) -> Result<(), ApiError> {
        if let Some(sub) = who.subject {
            if self.subjects.is_full(&subject_key(who.tenant, sub)) {
                return Err(subject_quota(sub, self.subjects.max));
            }
        }
        match self.tenants.get(who.tenant) {
            Some(count) if count.own.is_full() => {
                Err(crate::quotas::watch_quota(who.tenant, count.own.max))
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

    /// The most watches one end user may hold.
    pub fn per_subject(&self) -> usize {
        self.subjects.max
    }
}

/// 429 `watch-quota` for an end user at `--subject-max-watches`.
fn subject_quota(subject: &str, max: usize) -> ApiError {
    ApiError::too_many(
        "watch-quota",
        format!(
            "subject-max-watches: user {} already holds {max} long-polls and streams, \
             the most one user may hold",
            quoted(subject)
        ),
        WATCH_RETRY_AFTER_SECS,
    )
}

/// One held watch's slots (the user's, its tenant's and the server's);
/// given back when dropped. Two pointers: every held long-poll keeps one.
#[derive(Debug)]
#[must_use = "the slot is given back as soon as the permit is dropped"]
pub struct WatchPermit {
    count: Arc<TenantWatches>,
    _subject: Option<SubjectSlot>,
}

impl Drop for WatchPermit {
    fn drop(&mut self) {
        self.count.server.give_back();
        self.count.own.give_back();
    }
}

/// A user's slot: the user's count and key, given back when dropped (one
/// pointer, so that a permit without a user costs nothing more).
#[derive(Debug)]
struct SubjectSlot(Arc<(Arc<SubjectWatches>, Arc<str>)>);

impl Drop for SubjectSlot {
    fn drop(&mut self) {
        let (subjects, key) = &*self.0;
        subjects.give_back(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(tenant: &str) -> Watcher<'_> {
        Watcher {
            tenant,
            subject: None,
        }
    }

    fn user<'a>(tenant: &'a str, subject: &'a str) -> Watcher<'a> {
        Watcher {
            tenant,
            subject: Some(subject),
        }
    }

    #[test]
    fn watch_slots_are_capped_and_given_back() {
        let watchers = Watchers::new(2);
        let a = watchers.admit(tenant("t")).unwrap();
        let _b = watchers.admit(tenant("t")).unwrap();
        let refused = watchers.admit(tenant("t")).unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (503, "watch-limit")
        );
        assert_eq!(refused.retry_after, Some(WATCH_RETRY_AFTER_SECS));
        drop(a);
        assert_eq!(watchers.held(), 1);
        assert!(watchers.admit(tenant("t")).is_ok());
    }

    #[test]
    fn a_tenant_at_its_quota_is_refused_and_the_others_are_not() {
        let watchers = Watchers::with_quotas(2, HashMap::from([("a".to_string(), 1)]), 10);
        let a = watchers.admit(tenant("a")).unwrap();
        let b1 = watchers.admit(tenant("b")).unwrap();
        // The server is full and a at its quota: a is told of its quota.
        let refused = watchers.admit(tenant("a")).unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (429, "watch-quota")
        );
        assert_eq!(refused.retry_after, Some(WATCH_RETRY_AFTER_SECS));
        assert_eq!(watchers.held(), 2, "a refusal keeps no slot");
        drop(a);
        let _b2 = watchers.admit(tenant("b")).unwrap();
        // Below its quota but the server full: 503, its own slot given back.
        assert_eq!(watchers.admit(tenant("a")).unwrap_err().code, "watch-limit");
        assert_eq!(watchers.held_by("a"), Some(0));
        drop(b1);
        let _a = watchers.admit(tenant("a")).unwrap();
        assert_eq!((watchers.held(), watchers.held_by("a")), (2, Some(1)));
        assert_eq!(watchers.held_by("b"), None, "b has no quota");
    }

    #[test]
    fn one_user_holds_at_most_its_share_and_others_still_get_slots() {
        let watchers = Watchers::with_quotas(10, HashMap::new(), 2);
        let a1 = watchers.admit(user("t", "alice")).unwrap();
        let _a2 = watchers.admit(user("t", "alice")).unwrap();
        let refused = watchers.admit(user("t", "alice")).unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (429, "watch-quota")
        );
        assert!(refused.message.contains("alice"), "{}", refused.message);
        assert!(watchers.check_quota(user("t", "alice")).is_err());
        assert_eq!(watchers.held(), 2, "a refusal keeps no slot");
        // The same name in another tenant is another user.
        let _b = watchers.admit(user("u", "alice")).unwrap();
        // Another user of the same tenant, and the tenant's backend.
        let _c = watchers.admit(user("t", "carol")).unwrap();
        let _d = watchers.admit(tenant("t")).unwrap();
        drop(a1);
        assert!(watchers.check_quota(user("t", "alice")).is_ok());
        let _a3 = watchers.admit(user("t", "alice")).unwrap();
    }

    #[test]
    fn a_refusal_after_the_user_was_counted_gives_its_slot_back() {
        let watchers = Watchers::with_quotas(1, HashMap::new(), 5);
        let _held = watchers.admit(tenant("t")).unwrap();
        for _ in 0..10 {
            let e = watchers.admit(user("t", "alice")).unwrap_err();
            assert_eq!(e.code, "watch-limit");
        }
        // Ten refusals later alice holds nothing: the map forgot her.
        assert!(watchers.subjects.lock().is_empty());
    }
}

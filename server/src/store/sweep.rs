//! What the sweeps ask the store and what they get back: the TTL
//! sweeper's [`Swept`], the notify sender's [`WebhookClaim`] and
//! [`PendingWebhooks`]. Both carry the rows a sweep quarantined, so that
//! the caller reports each one once ([`super::quarantine`]).

use super::{OutboxEntry, Quarantined};

/// What one TTL sweep did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Swept {
    /// Due rows it looked at (expired or quarantined): fewer than the
    /// limit means nothing more is due now.
    pub looked_at: usize,
    /// Tasks it expired.
    pub expired: usize,
    /// Rows it set aside in this sweep (each is reported once, here).
    pub quarantined: Vec<Quarantined>,
}

/// Whose outbox rows a notify receiver is sent: it gets the tenants routed
/// to it, so one receiver's backlog never fills another's reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantScope {
    /// Only these tenants.
    Only(Vec<String>),
    /// Every tenant but these (they have receivers of their own).
    AllBut(Vec<String>),
}

impl TenantScope {
    /// The list and whether it is `Only` (how both stores' SQL takes it).
    pub(crate) fn parts(&self) -> (&[String], bool) {
        match self {
            TenantScope::Only(list) => (list, true),
            TenantScope::AllBut(list) => (list, false),
        }
    }
}

/// Which outbox rows a notify sender asks for: up to `limit` rows of
/// `scope`'s tenants, not yet posted, whose next attempt is due at
/// `now_ms`, oldest first, leaving out the ones it has `in_flight`. A
/// store shared by several instances claims them for `lease_ms`, so that
/// no other instance posts them meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookClaim {
    /// The tenants of one receiver.
    pub scope: TenantScope,
    /// `seq`s being posted now.
    pub in_flight: Vec<u64>,
    /// The clock.
    pub now_ms: f64,
    /// At most this many.
    pub limit: u32,
    /// How long a claim keeps other instances off a row (longer than a
    /// post can take).
    pub lease_ms: f64,
}

/// Outbox rows due for a notify post.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingWebhooks {
    /// Rows to post, oldest first.
    pub rows: Vec<OutboxEntry>,
    /// Rows that did not parse, set aside by this read (reported once,
    /// here); they are never read again.
    pub quarantined: Vec<Quarantined>,
}

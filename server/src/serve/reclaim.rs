//! At the connection cap, a new connection takes the slot of one that is
//! doing nothing useful: idle between requests, or still sending its head
//! or its request body, for at least [`MIN_AGE_MS`]. Only when no such connection is found is
//! the newcomer answered 503 ([`super::refuse`]).
//!
//! Without this, a slowloris larger than the cap holds every slot until
//! its heads time out and takes them back at once, and a normal client
//! gets 503 for as long as the attack lasts. With it, the attack's own
//! connections are the ones that make room: a normal client sends its
//! request in microseconds and is busy from then on, and busy connections
//! (requests being handled, held long-polls, SSE streams) are never
//! picked. A client that takes over a second to send 64 KiB when the
//! server is full is sacrificed with the attackers.
//!
//! The accept loop keeps a list of every connection's [`Activity`]
//! (weakly: a connection that ended is dropped from it when next met) and
//! walks it round-robin, a few entries per accept.

use std::sync::{Arc, Weak};

use super::phase::{clock_ms, Activity};

/// A connection idle or in its head for less than this is not closed for
/// another: normal clients send a head at once and reuse a keep-alive
/// connection quickly.
pub const MIN_AGE_MS: u32 = 1_000;

/// Entries looked at, at most, to find a connection to close.
const SCAN: usize = 64;

/// Entries looked at on every accept, to forget connections that ended.
const PRUNE: usize = 2;

/// Connections over the cap that may be waiting to close for the ones
/// that took their slots; past this, newcomers get 503 until they have.
/// Part of the descriptor reserve ([`crate::limits`]); under a flood the
/// closing tasks may wait their turn on a busy runtime.
pub const MAX_RECLAIMING: usize = 128;

/// Every open connection's activity, for picking one to close.
#[derive(Debug, Default)]
pub(super) struct Reclaimer {
    conns: Vec<Weak<Activity>>,
    cursor: usize,
}

impl Reclaimer {
    /// Adds an accepted connection (and forgets a couple that ended).
    pub(super) fn track(&mut self, activity: &Arc<Activity>) {
        self.conns.push(Arc::downgrade(activity));
        self.walk(PRUNE, false);
    }

    /// Asks one connection idle or in its head for [`MIN_AGE_MS`] to
    /// close; `false` when none was found among the next [`SCAN`].
    pub(super) fn reclaim_one(&mut self) -> bool {
        self.walk(SCAN, true)
    }

    /// Looks at up to `budget` entries from the cursor, dropping those
    /// that ended, and (when `pick`) reclaims the first that qualifies.
    fn walk(&mut self, budget: usize, pick: bool) -> bool {
        let now = clock_ms();
        for _ in 0..budget {
            if self.cursor >= self.conns.len() {
                self.cursor = 0;
            }
            let Some(entry) = self.conns.get(self.cursor) else {
                return false;
            };
            match entry.upgrade() {
                None => {
                    // Another entry moves here; look at it next.
                    self.conns.swap_remove(self.cursor);
                }
                Some(activity) => {
                    self.cursor += 1;
                    if pick && activity.reclaimable(now, MIN_AGE_MS) {
                        activity.reclaim();
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Entries held (live, or ended and not yet met).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.conns.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::phase::{Busy, Phase};
    use super::*;

    #[test]
    fn only_old_idle_or_head_connections_are_picked_and_ended_ones_are_forgotten() {
        let mut reclaimer = Reclaimer::default();
        let young = Activity::new();
        reclaimer.track(&young);
        // Too young to be closed for another.
        assert!(!reclaimer.reclaim_one());
        assert!(!young.is_reclaimed());
        // Old enough: pretend a second passed by asking for age 0.
        assert!(young.reclaimable(clock_ms(), 0));
        let busy = Activity::new();
        let _working = Busy::start(&busy, false);
        assert!(!busy.reclaimable(clock_ms().wrapping_add(MIN_AGE_MS), 0));
        young.set(Phase::Body);
        assert!(young.reclaimable(clock_ms().wrapping_add(MIN_AGE_MS), 0));
        young.set(Phase::Idle);
        assert!(young.reclaimable(clock_ms().wrapping_add(MIN_AGE_MS), 0));
        young.reclaim();
        assert!(young.is_reclaimed());
        assert!(!young.reclaimable(clock_ms().wrapping_add(MIN_AGE_MS), 0));
        // Ended connections leave the list as the walk meets them.
        for _ in 0..10 {
            reclaimer.track(&Activity::new());
        }
        assert!(reclaimer.len() <= 11);
        drop(young);
        for _ in 0..20 {
            reclaimer.walk(PRUNE, false);
        }
        assert_eq!(reclaimer.len(), 0);
    }
}

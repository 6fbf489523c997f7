//! "Work may be waiting": how held claims (routes/work.rs) learn of it.
//!
//! Two ways, so that one new task does not wake every idle worker (with
//! 1,000 held claims, waking all of them cost 30 ms of server CPU per
//! create, each asking the store in vain):
//! - **An offer** ([`WorkSignal::offer`]): a task of a known tenant and
//!   kind was created here. It wakes the one claim that has waited
//!   longest among those that take that tenant and kind (first come,
//!   first served between workers).
//! - **A bump** ([`WorkSignal::bump`]): something changed whose kind this
//!   process does not know (a task queued again, another PostgreSQL
//!   instance's NOTIFY, a running slot freed under `--kind-limit`): every
//!   held claim looks again.
//!
//! A held claim also looks again on its own every few seconds, so work
//! that no signal announced here is still found.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{oneshot, watch};

/// See the module docs.
#[derive(Debug)]
pub struct WorkSignal {
    /// This process's store instance, named in its PostgreSQL NOTIFYs so
    /// that its listener tells them from other instances' (random).
    pub instance: String,
    bumps: watch::Sender<u64>,
    waiting: Arc<Mutex<Waiting>>,
    /// Some kind has a running limit (`--kind-limit`): an attempt that
    /// ends may let a waiting claim start one.
    limited: AtomicBool,
}

#[derive(Debug, Default)]
struct Waiting {
    next_id: u64,
    /// Oldest first.
    queue: VecDeque<Entry>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    tenants: Vec<String>,
    kinds: Vec<String>,
    wake: oneshot::Sender<()>,
}

impl Default for WorkSignal {
    fn default() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        WorkSignal {
            instance: format!("{random:016x}"),
            bumps: watch::channel(0).0,
            waiting: Arc::default(),
            limited: AtomicBool::new(false),
        }
    }
}

/// A held claim's place in line for offers; leaves the line when dropped.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    waiting: Arc<Mutex<Waiting>>,
    /// Resolves when an offer picked this claim.
    pub offered: oneshot::Receiver<()>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        lock(&self.waiting).queue.retain(|e| e.id != self.id);
    }
}

fn lock(waiting: &Mutex<Waiting>) -> MutexGuard<'_, Waiting> {
    // A poisoned lock only means a panic elsewhere mid-update of a queue
    // of senders; the queue itself is still usable.
    waiting.lock().unwrap_or_else(|p| p.into_inner())
}

impl WorkSignal {
    /// Some kind has a running limit (set once at start).
    pub fn set_limited(&self, limited: bool) {
        self.limited.store(limited, Ordering::Relaxed);
    }

    /// Whether a published change with `state` may have made work
    /// claimable: a task queued again, or (under a running limit) an
    /// attempt that ended.
    pub fn changed_to(&self, state: taskwire_core::State) -> bool {
        state == taskwire_core::State::Queued
            || (!state.holds_attempt() && self.limited.load(Ordering::Relaxed))
    }

    /// Wakes every held claim.
    pub fn bump(&self) {
        self.bumps.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees the next bump (`changed().await`).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.bumps.subscribe()
    }

    /// Joins the line for offers of these tenants' tasks of these kinds.
    pub fn ticket(&self, tenants: &[String], kinds: &[String]) -> Ticket {
        let (wake, offered) = oneshot::channel();
        let mut waiting = lock(&self.waiting);
        let id = waiting.next_id;
        waiting.next_id += 1;
        waiting.queue.push_back(Entry {
            id,
            tenants: tenants.to_vec(),
            kinds: kinds.to_vec(),
            wake,
        });
        Ticket {
            id,
            waiting: Arc::clone(&self.waiting),
            offered,
        }
    }

    /// A task of `tenant` and `kind` (`""` for none) was created: wakes
    /// the longest-waiting claim that takes it, if any.
    pub fn offer(&self, tenant: &str, kind: &str) {
        let mut waiting = lock(&self.waiting);
        while let Some(at) = waiting.queue.iter().position(|e| {
            e.tenants.iter().any(|t| t == tenant) && e.kinds.iter().any(|k| k == kind)
        }) {
            let entry = waiting.queue.remove(at).expect("found just now");
            // A claim that went away meanwhile: offer it to the next one.
            if entry.wake.send(()).is_ok() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_offer_wakes_the_longest_waiting_claim_that_takes_it_and_no_other() {
        let signal = WorkSignal::default();
        let mut other_kind = signal.ticket(&names(&["acme"]), &names(&["translate"]));
        let mut first = signal.ticket(&names(&["acme"]), &names(&["summary"]));
        let mut second = signal.ticket(&names(&["acme"]), &names(&["summary"]));
        signal.offer("acme", "summary");
        assert!(first.offered.try_recv().is_ok());
        assert!(
            second.offered.try_recv().is_err(),
            "one task, one claim woken"
        );
        assert!(other_kind.offered.try_recv().is_err());
        signal.offer("other-tenant", "summary");
        assert!(second.offered.try_recv().is_err());
    }

    #[test]
    fn a_claim_that_left_the_line_is_passed_over() {
        let signal = WorkSignal::default();
        let gone = signal.ticket(&names(&["acme"]), &names(&[""]));
        let mut next = signal.ticket(&names(&["acme"]), &names(&[""]));
        drop(gone);
        signal.offer("acme", "");
        assert!(next.offered.try_recv().is_ok());
    }
}

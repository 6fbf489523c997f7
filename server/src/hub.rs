//! In-process wake-ups: commits in, held long-polls and SSE streams out.
//!
//! Each watched task has a `tokio::sync::watch` channel holding the latest
//! committed view and the last `retention` history entries. The store
//! calls [`Hub::publish`] after every commit (in version order per task),
//! so a waiter wakes from the commit itself, never by polling the
//! database, and 1,000 waiters of one task are answered from this memory
//! copy instead of 1,000 SQLite reads.
//!
//! Waiters [`Hub::subscribe`] *before* reading the task from the store:
//! a commit that lands between the read and the wait is then still seen.
//!
//! Several instances (the PostgreSQL store): each instance's LISTEN/NOTIFY
//! listener hears `(version, taskId)` for commits made anywhere, re-reads
//! only the tasks watched here (one read per task, however many waiters)
//! and hands them to [`Hub::publish_read`]. Publishing never moves a task
//! back to an older version, so local and remote publishes may race.
//! [`answer_from`] falls back to a store read whenever memory does not
//! cover the gap, so partial information is safe.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use taskwire_core::{answer_from_recent, HistoryEntry, ResumeAnswer, TaskView};
use tokio::sync::{watch, Notify};

use crate::metrics::Metrics;
use crate::store::outage::Outage;

mod batches;
pub mod output;
pub mod work;
pub use batches::{BatchMark, BatchSubscription, BatchWake};

/// A committed change, as the hub hands it to waiters. The stores make
/// them after each commit ([`Hub::publish`]); defined here, so that the hub
/// needs nothing from the stores.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The task after the change.
    pub view: TaskView,
    /// The history entry the change appended.
    pub entry: HistoryEntry,
    /// The batch cursor the change raised, for an item of a batch.
    pub batch: Option<BatchMark>,
}

/// The latest committed state of one task, as far as this process knows.
#[derive(Debug, Clone, PartialEq)]
pub struct Latest {
    /// The view after the last published change.
    pub view: TaskView,
    /// Contiguous recent entries, oldest first, ending at `view.version`.
    pub recent: VecDeque<HistoryEntry>,
    /// When it was published (right after its commit, or after the
    /// re-read of another instance's): the start of `/metrics`' wake
    /// latency.
    pub published_at: Instant,
}

/// One watched task: its channel, and how many [`Subscription`]s hold it.
///
/// The count is kept under the map's lock, by `subscribe` and by
/// `Subscription`'s `Drop`, so the last one to go always removes the slot.
/// (It used to be read from the channel, `receiver_count() <= 1`, but a
/// subscription's receiver is dropped only after its `Drop` ran and
/// released the lock: two waiters leaving at once on two threads could
/// each still count the other's receiver, and neither removed the slot.)
#[derive(Debug)]
struct Slot {
    latest: watch::Sender<Option<Arc<Latest>>>,
    watchers: usize,
}

/// The wake-up hub shared by the store and the handlers.
#[derive(Debug)]
pub struct Hub {
    slots: Mutex<HashMap<String, Slot>>,
    retention: usize,
    /// One drop signal per tenant, bumped by `/v1/demo/drop-connections`
    /// (that tenant's held requests abort) and at shutdown (all of them).
    /// Tenants come from the configured tokens, so the map stays small.
    drops: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Watched batches ([`batches`]).
    batch_slots: Mutex<HashMap<String, batches::BatchSlot>>,
    /// Woken when an outbox row commits (the notify-webhook sender waits).
    pub outbox: Notify,
    /// The server's metrics: the stores, which know only the hub, time
    /// their commits into it.
    pub metrics: Arc<Metrics>,
    /// Storage outages: the stores report every write here, so a full
    /// disk is logged once, not once per failing write.
    pub outage: Outage,
    /// Woken when work may be waiting for a held claim ([`work`]).
    pub work: work::WorkSignal,
    /// Output followers' wake-ups ([`output`]).
    pub output: Arc<output::OutputSignal>,
}

impl Hub {
    /// A hub keeping `retention` recent entries per watched task.
    pub fn new(retention: u64) -> Arc<Self> {
        Hub::with_metrics(retention, Metrics::new([]))
    }

    /// A hub keeping `retention` recent entries per watched task, and the
    /// server's metrics.
    pub fn with_metrics(retention: u64, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Hub {
            slots: Mutex::new(HashMap::new()),
            retention: usize::try_from(retention).unwrap_or(usize::MAX).min(4096),
            drops: Mutex::new(HashMap::new()),
            batch_slots: Mutex::new(HashMap::new()),
            outbox: Notify::new(),
            metrics,
            outage: Outage::default(),
            work: work::WorkSignal::default(),
            output: Arc::default(),
        })
    }

    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // A poisoned lock only means another thread panicked mid-update of
        // a map of channels; the map itself is still usable.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn drops(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        // As for `slots`: a map of channels survives a panic elsewhere.
        self.drops.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn batch_slots(&self) -> MutexGuard<'_, HashMap<String, batches::BatchSlot>> {
        // As for `slots`.
        self.batch_slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `tenant`'s drop signal, which every held request of it listens to.
    fn drop_signal(&self, tenant: &str) -> watch::Receiver<u64> {
        self.drops()
            .entry(tenant.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Starts watching a task for `tenant` (whose drop signal it listens
    /// to). Call before reading the task from the store.
    pub fn subscribe(self: &Arc<Self>, id: &str, tenant: &str) -> Subscription {
        let drops = self.drop_signal(tenant);
        let rx = {
            let mut slots = self.slots();
            let slot = slots.entry(id.to_string()).or_insert_with(|| Slot {
                latest: watch::channel(None).0,
                watchers: 0,
            });
            slot.watchers += 1;
            slot.latest.subscribe()
        };
        Subscription {
            hub: Arc::clone(self),
            id: id.to_string(),
            rx,
            drops,
        }
    }

    /// Publishes committed changes (in commit order). Tasks nobody watches
    /// cost one map lookup.
    pub fn publish(&self, changes: &[Change]) {
        if changes.is_empty() {
            return;
        }
        for mark in changes.iter().filter_map(|c| c.batch.as_ref()) {
            self.publish_batch(&mark.id, mark.seq);
        }
        if changes.iter().any(|c| self.work.changed_to(c.view.state)) {
            self.work.bump();
        }
        let published_at = Instant::now();
        let slots = self.slots();
        for change in changes {
            let Some(slot) = slots.get(&change.view.id) else {
                continue;
            };
            let retention = self.retention;
            slot.latest.send_if_modified(|latest| {
                // Several commits may publish concurrently (PostgreSQL has
                // more than one writer, and the listener publishes other
                // instances' commits): never go back to an older version.
                if latest
                    .as_deref()
                    .is_some_and(|old| old.view.version >= change.view.version)
                {
                    return false;
                }
                let mut recent = match latest.as_deref() {
                    Some(old) if old.view.version + 1 == change.entry.version => old.recent.clone(),
                    _ => VecDeque::new(),
                };
                if change.entry.version == change.view.version {
                    recent.push_back(change.entry.clone());
                } else {
                    recent.clear();
                }
                while recent.len() > retention {
                    recent.pop_front();
                }
                *latest = Some(Arc::new(Latest {
                    view: change.view.clone(),
                    recent,
                    published_at,
                }));
                true
            });
        }
    }

    /// Publishes a task as read back from the store after another
    /// instance committed it: its view and the history entries the read
    /// returned (contiguous, oldest first, ending at `view.version`, and
    /// possibly fewer than the retention window). Ignored when this hub
    /// already knows that version or a newer one.
    pub fn publish_read(&self, view: TaskView, entries: Vec<HistoryEntry>) {
        let slots = self.slots();
        let Some(slot) = slots.get(&view.id) else {
            return;
        };
        let retention = self.retention;
        slot.latest.send_if_modified(|latest| {
            let old = latest.as_deref();
            if old.is_some_and(|old| old.view.version >= view.version) {
                return false;
            }
            let first = entries.first().map_or(view.version + 1, |e| e.version);
            let contiguous = entries.last().map_or(true, |e| e.version == view.version)
                && entries.windows(2).all(|w| w[0].version + 1 == w[1].version);
            let mut recent = match old {
                // What memory had joins what was read.
                Some(old) if contiguous && old.view.version + 1 >= first => old
                    .recent
                    .iter()
                    .filter(|e| e.version < first)
                    .cloned()
                    .collect(),
                _ => VecDeque::new(),
            };
            if contiguous {
                recent.extend(entries.iter().cloned());
            }
            if recent.back().is_some_and(|e| e.version != view.version)
                || recent
                    .iter()
                    .zip(recent.iter().skip(1))
                    .any(|(a, b)| a.version + 1 != b.version)
            {
                recent.clear();
            }
            while recent.len() > retention {
                recent.pop_front();
            }
            *latest = Some(Arc::new(Latest {
                view: view.clone(),
                recent,
                published_at: Instant::now(),
            }));
            true
        });
    }

    /// For each id: `None` when nobody here watches it, else the version
    /// this hub last published for it (`Some(None)`: nothing yet).
    pub fn known_versions<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
    ) -> Vec<(&'a str, Option<Option<u64>>)> {
        let slots = self.slots();
        ids.into_iter()
            .map(|id| {
                let known = slots
                    .get(id)
                    .map(|slot| slot.latest.borrow().as_deref().map(|l| l.view.version));
                (id, known)
            })
            .collect()
    }

    /// Every watched task and the version this hub knows of it (used to
    /// re-read them all after a lost cross-instance connection).
    pub fn watched_tasks(&self) -> Vec<(String, Option<u64>)> {
        self.slots()
            .iter()
            .map(|(id, slot)| {
                let known = slot.latest.borrow().as_deref().map(|l| l.view.version);
                (id.clone(), known)
            })
            .collect()
    }

    /// How many history entries are kept per watched task.
    pub fn retention(&self) -> usize {
        self.retention
    }

    /// Makes every held long-poll and SSE stream abort its connection
    /// (shutdown).
    pub fn drop_connections(&self) {
        for signal in self.drops().values() {
            signal.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Makes `tenant`'s held long-polls and SSE streams abort their
    /// connections, and no one else's; returns how many were held.
    pub fn drop_connections_of(&self, tenant: &str) -> usize {
        let drops = self.drops();
        let Some(signal) = drops.get(tenant) else {
            return 0;
        };
        let held = signal.receiver_count();
        signal.send_modify(|n| *n = n.wrapping_add(1));
        held
    }

    /// How many requests of `tenant` wait on the hub now.
    pub fn held_by(&self, tenant: &str) -> usize {
        self.drops().get(tenant).map_or(0, |s| s.receiver_count())
    }

    /// How many tasks are watched now.
    pub fn watched(&self) -> usize {
        self.slots().len()
    }
}

/// A waiter's handle on one task; removes the task's slot when the last
/// waiter goes.
#[derive(Debug)]
pub struct Subscription {
    hub: Arc<Hub>,
    id: String,
    rx: watch::Receiver<Option<Arc<Latest>>>,
    drops: watch::Receiver<u64>,
}

/// Why a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Wake {
    /// The task passed the cursor; the latest known state.
    Changed(Arc<Latest>),
    /// `/v1/demo/drop-connections` (or shutdown): abort the connection.
    Dropped,
}

impl Subscription {
    /// The watched task.
    pub fn task_id(&self) -> &str {
        &self.id
    }

    /// Waits until the published version passes `cursor`, or a drop.
    /// A wait that ends on a publish is timed into the wake-latency
    /// metric; one answered at once (nothing to wait for) is not a wake.
    pub async fn wait_past(&mut self, cursor: u64) -> Wake {
        let mut waited = false;
        loop {
            if let Some(latest) = self.rx.borrow_and_update().clone() {
                if latest.view.version > cursor {
                    if waited {
                        self.hub.metrics.woke(latest.published_at);
                    }
                    return Wake::Changed(latest);
                }
            }
            waited = true;
            tokio::select! {
                changed = self.rx.changed() => {
                    if changed.is_err() {
                        return Wake::Dropped;
                    }
                }
                _ = self.drops.changed() => return Wake::Dropped,
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut slots = self.hub.slots();
        let last = match slots.get_mut(&self.id) {
            Some(slot) => {
                slot.watchers = slot.watchers.saturating_sub(1);
                slot.watchers == 0
            }
            None => false,
        };
        if last {
            slots.remove(&self.id);
        }
    }
}

/// Answers a client at `cursor` from memory, as the store would (core's
/// `answer_from_recent`); `None` when memory lacks entries the delta needs.
pub fn answer_from(latest: &Latest, cursor: u64, retention: u64) -> Option<ResumeAnswer> {
    answer_from_recent(&latest.view, &latest.recent, cursor, retention)
}

#[cfg(test)]
mod tests;

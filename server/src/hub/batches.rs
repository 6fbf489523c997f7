//! Wake-ups for batch watches (PROTOCOL.md §Follow a batch): one channel
//! per watched batch, holding the batch cursor last committed here.
//!
//! A batch waiter keeps no copy of the batch: when the cursor passes its
//! own, it reads the answer from the store (one read however many commits
//! came meanwhile, so a burst of changes costs one answer). The channel
//! only says *that* something changed, from the commit itself, never by
//! polling; a 500-item batch costs one slot, not 500.
//!
//! **One read per cursor.** The watchers of one batch are woken by one
//! commit together, and most of them hold the same cursor (they were
//! answered together before). [`BatchSubscription::read_shared`] lets
//! them share one store read per (published cursor, client cursor): the
//! first waiter reads, the others wait for its answer. Without it, 50
//! watchers of a batch made 50 identical reads per commit, and 10,000
//! watchers of 200 batches woke with a p99 of 131 ms (server/README.md,
//! Benchmarks).

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{watch, OnceCell};

use super::Hub;

/// A batch's cursor, as a commit raised it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchMark {
    /// The batch.
    pub id: String,
    /// Its cursor after the commit.
    pub seq: u64,
}

/// The latest cursor of one watched batch, and when it was published.
pub(super) type Latest = Option<(u64, Instant)>;

/// One watched batch: its channel and how many subscriptions hold it
/// (counted under the map's lock, as the task slots are).
#[derive(Debug)]
pub(super) struct BatchSlot {
    latest: watch::Sender<Latest>,
    watchers: usize,
    /// The answers being read, or read, since the latest published cursor.
    reads: Arc<Mutex<SharedReads>>,
}

/// One answer shared by the waiters of one client cursor. Held as `Any`,
/// so the hub needs nothing from the stores (the routes put their answer
/// type in; [`BatchSubscription::read_shared`] takes it back out).
type SharedRead = Arc<OnceCell<Arc<dyn Any + Send + Sync>>>;

/// The reads since published cursor `seq`, by client cursor.
#[derive(Debug, Default)]
pub(super) struct SharedReads {
    seq: u64,
    by_cursor: HashMap<u64, SharedRead>,
}

impl Hub {
    /// Starts watching a batch for `tenant`. Call before reading the batch
    /// from the store, so that a commit in between still wakes it.
    pub fn subscribe_batch(self: &Arc<Self>, id: &str, tenant: &str) -> BatchSubscription {
        let drops = self.drop_signal(tenant);
        let rx = {
            let mut slots = self.batch_slots();
            let slot = slots.entry(id.to_string()).or_insert_with(|| BatchSlot {
                latest: watch::channel(None).0,
                watchers: 0,
                reads: Arc::default(),
            });
            slot.watchers += 1;
            slot.latest.subscribe()
        };
        BatchSubscription {
            hub: Arc::clone(self),
            id: id.to_string(),
            rx,
            drops,
        }
    }

    /// Publishes a batch's cursor after a commit (here, or another
    /// instance's, heard by the listener). Never moves it back; a batch
    /// nobody watches costs one map lookup.
    pub fn publish_batch(&self, id: &str, seq: u64) {
        let slots = self.batch_slots();
        let Some(slot) = slots.get(id) else {
            return;
        };
        slot.latest.send_if_modified(|latest| {
            if latest.is_some_and(|(old, _)| old >= seq) {
                return false;
            }
            *latest = Some((seq, Instant::now()));
            true
        });
    }

    /// How many batches are watched now.
    pub fn watched_batches(&self) -> usize {
        self.batch_slots().len()
    }

    /// The ids of the batches watched now (a listener that missed commits
    /// reads their cursors again and publishes them).
    pub fn watched_batch_ids(&self) -> Vec<String> {
        self.batch_slots().keys().cloned().collect()
    }
}

/// A waiter's handle on one batch; removes the slot when the last goes.
#[derive(Debug)]
pub struct BatchSubscription {
    hub: Arc<Hub>,
    id: String,
    rx: watch::Receiver<Latest>,
    drops: watch::Receiver<u64>,
}

impl BatchSubscription {
    /// The watched batch.
    pub fn batch_id(&self) -> &str {
        &self.id
    }

    /// Waits until the published cursor passes `cursor`, or a drop. The
    /// answer is the store's to read ([`BatchWake::Changed`] carries only
    /// the published cursor: see [`Self::read_shared`]).
    pub async fn wait_past(&mut self, cursor: u64) -> BatchWake {
        let mut waited = false;
        loop {
            if let Some((seq, published_at)) = *self.rx.borrow_and_update() {
                if seq > cursor {
                    if waited {
                        self.hub.metrics.woke(published_at);
                    }
                    return BatchWake::Changed(seq);
                }
            }
            waited = true;
            tokio::select! {
                changed = self.rx.changed() => {
                    if changed.is_err() {
                        return BatchWake::Dropped;
                    }
                }
                _ = self.drops.changed() => return BatchWake::Dropped,
            }
        }
    }
}

/// Why a batch wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchWake {
    /// The batch passed the cursor (now at this published cursor): read
    /// the answer.
    Changed(u64),
    /// `/v1/demo/drop-connections` (or shutdown): abort the connection.
    Dropped,
}

impl BatchSubscription {
    /// The answer for a client at `cursor` after the wake at published
    /// cursor `seq`, read by `read` once and shared with every waiter of
    /// this batch at the same cursor woken by the same publish (any answer
    /// read after that commit is a right answer for the cursor). A read
    /// that fails is not shared: the next waiter reads on its own.
    pub async fn read_shared<T, E, F, Fut>(
        &self,
        cursor: u64,
        seq: u64,
        read: F,
    ) -> Result<Arc<T>, E>
    where
        T: Send + Sync + 'static,
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let Some(cell) = self.shared_cell(cursor, seq) else {
            return read().await.map(Arc::new);
        };
        let mut failed = None;
        let (read_once, failure) = (&read, &mut failed);
        let shared = cell
            .get_or_try_init(move || async move {
                match read_once().await {
                    Ok(answer) => Ok(Arc::new(answer) as Arc<dyn Any + Send + Sync>),
                    Err(e) => {
                        *failure = Some(e);
                        Err(())
                    }
                }
            })
            .await
            .ok()
            .cloned();
        if let Some(e) = failed {
            return Err(e);
        }
        match shared.and_then(|any| any.downcast::<T>().ok()) {
            Some(answer) => Ok(answer),
            // Another answer type under this batch's key: read alone.
            None => read().await.map(Arc::new),
        }
    }

    /// The shared read for (`seq`, `cursor`), made when missing; `None`
    /// when `seq` is older than what the slot already shares (a late
    /// waiter: it reads alone).
    fn shared_cell(&self, cursor: u64, seq: u64) -> Option<SharedRead> {
        let reads = {
            let slots = self.hub.batch_slots();
            Arc::clone(&slots.get(&self.id)?.reads)
        };
        let mut reads = lock(&reads);
        if seq > reads.seq {
            *reads = SharedReads {
                seq,
                by_cursor: HashMap::new(),
            };
        } else if seq < reads.seq {
            return None;
        }
        Some(Arc::clone(reads.by_cursor.entry(cursor).or_default()))
    }
}

fn lock(reads: &Mutex<SharedReads>) -> MutexGuard<'_, SharedReads> {
    // A map of cells is still usable after a panic elsewhere.
    reads.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for BatchSubscription {
    fn drop(&mut self) {
        let mut slots = self.hub.batch_slots();
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

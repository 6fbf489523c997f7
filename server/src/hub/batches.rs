//! Wake-ups for batch watches (PROTOCOL.md §Follow a batch): one channel
//! per watched batch, holding the batch cursor last committed here.
//!
//! A batch waiter keeps no copy of the batch: when the cursor passes its
//! own, it reads the answer from the store (one read however many commits
//! came meanwhile, so a burst of changes costs one answer). The channel
//! only says *that* something changed, from the commit itself, never by
//! polling; a 500-item batch costs one slot, not 500.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

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
    /// answer is the store's to read ([`BatchWake::Changed`] carries nothing).
    pub async fn wait_past(&mut self, cursor: u64) -> BatchWake {
        let mut waited = false;
        loop {
            if let Some((seq, published_at)) = *self.rx.borrow_and_update() {
                if seq > cursor {
                    if waited {
                        self.hub.metrics.woke(published_at);
                    }
                    return BatchWake::Changed;
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
    /// The batch passed the cursor: read the answer.
    Changed,
    /// `/v1/demo/drop-connections` (or shutdown): abort the connection.
    Dropped,
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

//! Wake-ups for output followers (issue 27): a counter per task, bumped
//! after each commit that appended output to it.
//!
//! The wake carries the text appended (a [`Piece`]) when the append was
//! committed here: a follower that held the stream up to exactly where it
//! starts is answered from it, without reading the store (100 followers of
//! one draft would otherwise make 100 reads per chunk). Any other follower
//! (a wake from another instance, a piece it missed, a newer attempt)
//! reads the store.
//!
//! Kept apart from the task slots on purpose: a follower that does not
//! ask for output holds no output watch, so today's held requests stay as
//! small as they were, and an append (which makes no task version) never
//! wakes them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

/// The output wake-ups of every followed task.
#[derive(Debug, Default)]
pub struct OutputSignal {
    slots: Mutex<HashMap<String, Slot>>,
}

/// The text one committed append added: `text` at `offset` of
/// `attempt`'s text of `stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The stream's name.
    pub stream: String,
    /// The attempt whose text it extends.
    pub attempt: u64,
    /// Where it starts, in UTF-16 code units.
    pub offset: u64,
    /// The text appended.
    pub text: String,
}

/// The count of appends, and the last one's piece when it is known here.
type Appends = (u64, Option<Arc<Piece>>);

#[derive(Debug)]
struct Slot {
    appended: watch::Sender<Appends>,
    watchers: usize,
}

impl OutputSignal {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // A map of channels survives a panic elsewhere (as the hub's).
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Output was appended to `task` and committed (`piece`, when it is
    /// known here): wakes its followers. A task nobody follows costs one
    /// map lookup.
    pub fn appended(&self, task: &str, piece: Option<Piece>) {
        if let Some(slot) = self.slots().get(task) {
            let piece = piece.map(Arc::new);
            slot.appended
                .send_modify(|(n, last)| (*n, *last) = (n.wrapping_add(1), piece));
        }
    }

    /// Starts following `task`'s output. Call before reading the stream,
    /// so that an append committed in between still wakes the follower.
    pub fn watch(self: &Arc<Self>, task: &str) -> OutputWatch {
        let rx = {
            let mut slots = self.slots();
            let slot = slots.entry(task.to_string()).or_insert_with(|| Slot {
                appended: watch::channel((0, None)).0,
                watchers: 0,
            });
            slot.watchers += 1;
            slot.appended.subscribe()
        };
        OutputWatch {
            signal: Arc::clone(self),
            task: task.to_string(),
            rx,
        }
    }

    /// How many tasks' output is followed now.
    pub fn followed(&self) -> usize {
        self.slots().len()
    }
}

/// A follower's handle on one task's output; the last one to go removes
/// the task's slot.
#[derive(Debug)]
pub struct OutputWatch {
    signal: Arc<OutputSignal>,
    task: String,
    rx: watch::Receiver<Appends>,
}

impl OutputWatch {
    /// Waits for the next append to the task committed after the last
    /// wait (or after the watch began); the last one's piece, if known.
    pub async fn appended(&mut self) -> Option<Arc<Piece>> {
        if self.rx.changed().await.is_err() {
            // The sender lives in the map as long as this watch does.
            std::future::pending::<()>().await;
        }
        self.rx.borrow_and_update().1.clone()
    }
}

impl Drop for OutputWatch {
    fn drop(&mut self) {
        let mut slots = self.signal.slots();
        let last = match slots.get_mut(&self.task) {
            Some(slot) => {
                slot.watchers = slot.watchers.saturating_sub(1);
                slot.watchers == 0
            }
            None => false,
        };
        if last {
            slots.remove(&self.task);
        }
    }
}

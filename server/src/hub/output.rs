//! Wake-ups for output followers (issue 27): a counter per task, bumped
//! after each commit that appended output to it.
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

#[derive(Debug)]
struct Slot {
    appended: watch::Sender<u64>,
    watchers: usize,
}

impl OutputSignal {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // A map of channels survives a panic elsewhere (as the hub's).
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Output was appended to `task` and committed: wakes its followers.
    /// A task nobody follows costs one map lookup.
    pub fn appended(&self, task: &str) {
        if let Some(slot) = self.slots().get(task) {
            slot.appended.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Starts following `task`'s output. Call before reading the stream,
    /// so that an append committed in between still wakes the follower.
    pub fn watch(self: &Arc<Self>, task: &str) -> OutputWatch {
        let rx = {
            let mut slots = self.slots();
            let slot = slots.entry(task.to_string()).or_insert_with(|| Slot {
                appended: watch::channel(0).0,
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
    rx: watch::Receiver<u64>,
}

impl OutputWatch {
    /// Waits for the next append to the task committed after the last
    /// wait (or after the watch began).
    pub async fn appended(&mut self) {
        if self.rx.changed().await.is_err() {
            // The sender lives in the map as long as this watch does.
            std::future::pending::<()>().await;
        }
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

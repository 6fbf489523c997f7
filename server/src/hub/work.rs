//! "Work may be waiting": the signal held claims wait on
//! (routes/work.rs). A counter in a watch channel: every bump wakes every
//! held claim of this process, which then asks the store again.
//!
//! Bumped when a task is created here, when a published change leaves a
//! task without a running attempt (queued again, held, finished: new
//! work, or a kind's running slot freed), and on every NOTIFY another
//! PostgreSQL instance sends. A claim also looks again on its own once a
//! second, so a create on another instance (which sends no NOTIFY) waits
//! at most that long.

use tokio::sync::watch;

/// See the module docs.
#[derive(Debug)]
pub struct WorkSignal(watch::Sender<u64>);

impl Default for WorkSignal {
    fn default() -> Self {
        WorkSignal(watch::channel(0).0)
    }
}

impl WorkSignal {
    /// Wakes every held claim.
    pub fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees the next bump (`changed().await`).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

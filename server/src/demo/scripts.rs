//! What the demo's workers need to know of a task the demo made: its
//! workload and speed. The workers claim tasks from the queue like any
//! outside worker, so the queue tells them which task; the script tells
//! them what the demo wants done with it.
//!
//! A script also holds the task's places in the demo's limits and its
//! entry among the tasks the page can kill a worker of: both are given
//! back when the demo is done with the task (it ended, or it waited past
//! [`FORGET_AFTER`] without a worker finishing it: a decision nobody
//! made, a task expired in the queue).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::limits::Slot;
use super::plans::Workload;
use super::workers::{Control, Registration, Workers};

/// How long past its longest plan a script is kept for a task no worker
/// finished (a held draft waits this long for a person's decision).
pub const FORGET_AFTER: Duration = Duration::from_secs(600);

/// One demo task's script.
#[derive(Debug)]
pub struct Script {
    /// The tenant whose workload made it.
    pub tenant: String,
    /// What it is.
    pub workload: Workload,
    /// Demo time runs this many times faster.
    pub speed: f64,
    /// Who holds it now, for the page's kills.
    pub control: Arc<Control>,
    /// The furthest progress (%) a job of it set out to report: the
    /// checkpoint a worker that takes the task over goes on from, kept
    /// where an application keeps its workers' checkpoints, beside the
    /// job and not in the task (a new attempt starts at progress 0).
    checkpoint: AtomicU8,
    /// Its places in the demo's limits, shared by a batch's items: given
    /// back when the last of them is done.
    _slots: Arc<Vec<Slot>>,
    _registration: Registration,
    forget_at: Instant,
}

impl Script {
    /// The script of `tenant`'s `task`, holding the places `slots`, and
    /// registered among the tasks the page can kill a worker of.
    pub fn new(
        workers: &Arc<Workers>,
        (tenant, task): (&str, &str),
        workload: Workload,
        speed: f64,
        slots: Arc<Vec<Slot>>,
    ) -> Script {
        let (control, registration) = workers.register(tenant, task);
        let longest = Duration::from_secs_f64(workload.longest() as f64 / speed / 1000.0);
        Script {
            tenant: tenant.to_string(),
            workload,
            speed,
            control,
            checkpoint: AtomicU8::new(0),
            _slots: slots,
            _registration: registration,
            forget_at: Instant::now() + longest + FORGET_AFTER,
        }
    }

    /// A job is about to report `percent`: set before the report leaves,
    /// so that a worker killed mid-report is never followed by one that
    /// reports the same step again.
    pub fn reach(&self, percent: u8) {
        self.checkpoint.fetch_max(percent, Ordering::Relaxed);
    }

    /// The furthest progress a job of the task set out to report.
    pub fn checkpoint(&self) -> u8 {
        self.checkpoint.load(Ordering::Relaxed)
    }
}

/// Every demo task's script, by task id.
#[derive(Debug, Default)]
pub struct Scripts {
    map: Mutex<HashMap<String, Arc<Script>>>,
}

impl Scripts {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Script>>> {
        // A plain map: still consistent after a panic elsewhere.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `task`'s script, and forgets the scripts past their time.
    pub fn insert(&self, task: &str, script: Script) {
        let now = Instant::now();
        let mut map = self.map();
        map.retain(|_, s| s.forget_at > now);
        map.insert(task.to_string(), Arc::new(script));
    }

    /// `task`'s script, if the demo made it and still remembers it.
    pub fn get(&self, task: &str) -> Option<Arc<Script>> {
        self.map().get(task).cloned()
    }

    /// The demo is done with `task`.
    pub fn remove(&self, task: &str) {
        self.map().remove(task);
    }
}

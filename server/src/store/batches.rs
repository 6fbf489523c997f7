//! Batches (PROTOCOL.md §Batches): many tasks created in one call and
//! followed as one. What both stores share: the validated request
//! ([`NewBatch`]) and the answers ([`BatchCreated`], [`BatchAnswer`]). The
//! rules that decide an answer from the batch cursor are core's
//! (`taskwire_core::batch::plan_batch`, `task_answer`), so that the two
//! stores differ only in their SQL.
//!
//! **The cursor.** A batch row holds `seq`: 1 after the create, raised
//! inside every write that appends history to one of its tasks (the same
//! transaction, so the counter and the entries commit together). Each
//! such entry, and the task row, record the `seq` they were written at.
//! A client at cursor `c` then holds, of every task, exactly the entries
//! written at `seq <= c`: its delta is the entries written after `c`.
//! Writes that append nothing (a heartbeat renewing a lease) do not raise
//! it: nothing a client sees changed.

use taskwire_core::{ResumeAnswer, ResumeMode};
use taskwire_wire::to_json;

use super::{Idempotency, NewTask, TaskRecord};

/// Items of one batch, at most (PROTOCOL.md §Create a batch).
pub const MAX_ITEMS: usize = 1_000;

/// A validated batch create.
#[derive(Debug, Clone)]
pub struct NewBatch {
    /// `bat_` + 128 random bits in hex.
    pub id: String,
    /// Owner of the batch and of every item.
    pub tenant: String,
    /// The items, in order (each without an idempotency key of its own).
    pub tasks: Vec<NewTask>,
    /// The batch's `Idempotency-Key` and the whole request it names.
    pub idempotency: Option<Idempotency>,
    /// The tenant's open-task quota: the batch is refused whole when its
    /// items would pass it.
    pub open_task_limit: Option<u64>,
    /// The server's clock at the create.
    pub created_at_ms: f64,
}

/// The answer to a batch create (or its idempotent replay).
#[derive(Debug, Clone)]
pub struct BatchCreated {
    /// The batch id.
    pub id: String,
    /// The batch cursor now (1 right after the create).
    pub cursor: u64,
    /// The items as they are now, in order.
    pub tasks: Vec<TaskRecord>,
    /// False when an idempotent replay returned an existing batch.
    pub created: bool,
}

impl BatchCreated {
    /// The wire shape: `batchId`, `size`, `cursor`, `open`, `epoch` and
    /// the items, each as a single create answers it (with `batchId`).
    pub fn to_json(&self, epoch: &str) -> String {
        let open = self
            .tasks
            .iter()
            .filter(|t| !t.view.state.is_terminal())
            .count();
        let mut out = format!(
            "{{\"batchId\":{},\"size\":{},\"cursor\":{},\"open\":{open},\"epoch\":{},\"tasks\":[",
            to_json(&self.id),
            self.tasks.len(),
            self.cursor,
            to_json(epoch),
        );
        for (i, task) in self.tasks.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&task.to_json(epoch));
        }
        out.push_str("]}");
        out
    }
}

/// A batch follow answer (PROTOCOL.md §Follow a batch).
#[derive(Debug, Clone, PartialEq)]
pub struct BatchAnswer {
    /// The batch id.
    pub id: String,
    /// `caught-up`, `delta` (only the tasks that changed) or `snapshot`
    /// (every task).
    pub mode: ResumeMode,
    /// The batch cursor after this answer.
    pub cursor: u64,
    /// How many tasks the batch has.
    pub size: u64,
    /// How many of them are not terminal.
    pub open: u64,
    /// Per task, in item order: a resume answer of that task for the
    /// version the client held at its cursor.
    pub tasks: Vec<ResumeAnswer>,
}

impl BatchAnswer {
    /// Nothing will ever change again: every task is terminal.
    pub fn is_done(&self) -> bool {
        self.open == 0
    }

    /// The wire shape, with the store's epoch.
    pub fn to_json(&self, epoch: &str) -> String {
        let mut out = format!(
            "{{\"batchId\":{},\"mode\":\"{}\",\"cursor\":{},\"size\":{},\"open\":{},\"tasks\":[",
            to_json(&self.id),
            self.mode.as_str(),
            self.cursor,
            self.size,
            self.open,
        );
        for (i, task) in self.tasks.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&to_json(task));
        }
        out.push_str("],\"epoch\":");
        out.push_str(&to_json(epoch));
        out.push('}');
        out
    }
}

/// A new unguessable batch id: `bat_` + 128 random bits in hex.
pub fn new_batch_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("random id: {e}"))?;
    let mut id = String::with_capacity(4 + 32);
    id.push_str("bat_");
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    Ok(id)
}

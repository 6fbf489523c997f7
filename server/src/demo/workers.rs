//! The demo's running executors, so that the page can kill one's worker
//! (`POST /v1/demo/tasks/{id}/kill-worker`), and the notes they leave for
//! what a task's history cannot show: a zombie's late result fenced off
//! (`stale-attempt` changes nothing, so it has no version), a cancel the
//! work could not honour, a worker replaced. `GET /v1/demo/stats` serves
//! a tenant its last [`NOTES_KEPT`] notes.
//!
//! Bounded like the rest of the demo: one entry per playing demo task
//! (at most `SERVER_RUNNING`), and a short ring of notes per tenant.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use tokio::sync::watch;

use crate::error::{quoted, ApiError};

/// Notes kept per tenant (the page polls every second or two).
pub const NOTES_KEPT: usize = 32;

/// Every playing executor, and every tenant's notes.
#[derive(Debug, Default)]
pub struct Workers {
    state: Mutex<WorkersState>,
}

#[derive(Debug, Default)]
struct WorkersState {
    /// Task id → its executor's control.
    running: HashMap<String, Arc<Control>>,
    notes: HashMap<String, VecDeque<Note>>,
    next_note: u64,
}

/// A note for the page: `{"kind","seq","taskId","text"}` (in name order,
/// as the page has always had it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    /// Stable: `killed`, `fenced`, `replaced`, `cannot-cancel`, …
    pub kind: String,
    /// Increases with every note of the server.
    pub seq: u64,
    /// The task it is about.
    pub task_id: String,
    /// For people.
    pub text: String,
}

/// One executor's side of a kill: which attempt its worker holds now, and
/// the signal that kills that worker (a count of kills, so that a kill
/// that raced with the worker's own release is not taken for the next
/// worker's: the executor marks the count seen when a worker starts).
#[derive(Debug)]
pub struct Control {
    tenant: String,
    /// The attempt and worker that hold the task now, if any.
    holding: Mutex<Option<(u64, String)>>,
    kills: watch::Sender<u64>,
}

impl Control {
    fn holding(&self) -> MutexGuard<'_, Option<(u64, String)>> {
        // A plain value: still consistent after a panic elsewhere.
        self.holding.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The executor's worker now holds the task with `attempt`.
    pub fn hold(&self, attempt: u64, worker: &str) {
        *self.holding() = Some((attempt, worker.to_string()));
    }

    /// The worker no longer holds the task (finished, paused, killed).
    pub fn release(&self) {
        *self.holding() = None;
    }

    /// The kill signal: it changes when the page kills the holding worker.
    pub fn kills(&self) -> watch::Receiver<u64> {
        self.kills.subscribe()
    }
}

/// Removes the executor from [`Workers`] when it ends.
#[derive(Debug)]
#[must_use = "the executor is unregistered when this is dropped"]
pub struct Registration {
    workers: Arc<Workers>,
    task: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.workers.state().running.remove(&self.task);
    }
}

impl Workers {
    fn state(&self) -> MutexGuard<'_, WorkersState> {
        // Maps of handles and notes: still usable after a panic elsewhere.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers the executor of `task`.
    pub fn register(self: &Arc<Self>, tenant: &str, task: &str) -> (Arc<Control>, Registration) {
        let control = Arc::new(Control {
            tenant: tenant.to_string(),
            holding: Mutex::new(None),
            kills: watch::channel(0).0,
        });
        self.state()
            .running
            .insert(task.to_string(), Arc::clone(&control));
        let registration = Registration {
            workers: Arc::clone(self),
            task: task.to_string(),
        };
        (control, registration)
    }

    /// Kills the worker holding `task` for `tenant`: 404 when no demo
    /// executor of the tenant plays it, 409 `no-worker` when none holds it
    /// now (queued, waiting for approval, finished, or killed already).
    /// Returns the attempt and worker killed.
    pub fn kill(&self, tenant: &str, task: &str) -> Result<(u64, String), ApiError> {
        let control = self
            .state()
            .running
            .get(task)
            .filter(|c| c.tenant == tenant)
            .cloned()
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "path.id: no demo executor plays task {} for this tenant",
                    quoted(task)
                ))
            })?;
        let held = control.holding().take().ok_or_else(|| {
            ApiError::conflict(
                "no-worker",
                format!(
                    "path.id: no worker holds task {} now (it is queued, waiting for a \
                     decision, finished, or its worker was killed already)",
                    quoted(task)
                ),
            )
        })?;
        control.kills.send_modify(|n| *n = n.wrapping_add(1));
        Ok(held)
    }

    /// Leaves a note for the page: `kind` is stable (`killed`,
    /// `fenced`, `replaced`, `cannot-cancel`, …), `text` for people.
    pub fn note(&self, tenant: &str, task: &str, kind: &str, text: String) {
        let mut st = self.state();
        st.next_note += 1;
        let note = Note {
            kind: kind.to_string(),
            seq: st.next_note,
            task_id: task.to_string(),
            text,
        };
        let notes = st.notes.entry(tenant.to_string()).or_default();
        if notes.len() == NOTES_KEPT {
            notes.pop_front();
        }
        notes.push_back(note);
    }

    /// The tenant's last notes, oldest first.
    pub fn notes(&self, tenant: &str) -> Vec<Note> {
        let st = self.state();
        st.notes
            .get(tenant)
            .map(|n| n.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_tenant_can_kill_and_only_a_holding_worker() {
        let workers = Arc::new(Workers::default());
        let (control, registration) = workers.register("a", "t1");
        let kills = control.kills();
        assert_eq!(workers.kill("b", "t1").unwrap_err().status.as_u16(), 404);
        let idle = workers.kill("a", "t1").unwrap_err();
        assert_eq!((idle.status.as_u16(), idle.code), (409, "no-worker"));
        control.hold(2, "w-2");
        assert_eq!(workers.kill("a", "t1").unwrap(), (2, "w-2".to_string()));
        assert!(
            kills.has_changed().unwrap(),
            "the signal waits for the executor"
        );
        assert_eq!(workers.kill("a", "t1").unwrap_err().code, "no-worker");
        drop(registration);
        assert_eq!(workers.kill("a", "t1").unwrap_err().status.as_u16(), 404);
    }

    #[test]
    fn notes_are_per_tenant_and_bounded() {
        let workers = Workers::default();
        for i in 0..NOTES_KEPT + 5 {
            workers.note("a", "t1", "fenced", format!("note {i}"));
        }
        workers.note("b", "t2", "killed", "theirs".into());
        let mine = workers.notes("a");
        assert_eq!(mine.len(), NOTES_KEPT);
        assert_eq!(mine[0].text, "note 5");
        assert!(mine.iter().all(|n| n.task_id == "t1"));
        assert_eq!(workers.notes("b")[0].seq, NOTES_KEPT as u64 + 6);
        assert_eq!(workers.notes("c"), []);
    }
}

//! The demo's tasks in play, so that the page can kill the worker that
//! holds one (`POST /v1/demo/tasks/{id}/kill-worker`), and the notes the
//! workers leave for what a task's history cannot show: a worker killed,
//! another taking its task over, a cancel the work could not honour.
//! `GET /v1/demo/stats` serves a tenant its last [`NOTES_KEPT`] notes.
//!
//! Bounded like the rest of the demo: one entry per demo task in play
//! (at most `SERVER_RUNNING` workloads' worth), and a short ring of notes
//! per tenant.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use crate::error::{quoted, ApiError};

/// Notes kept per tenant (the page polls every second or two).
pub const NOTES_KEPT: usize = 32;

/// Every demo task in play, and every tenant's notes.
#[derive(Debug, Default)]
pub struct Workers {
    state: Mutex<WorkersState>,
}

#[derive(Debug, Default)]
struct WorkersState {
    /// Task id → who holds it now.
    running: HashMap<String, Arc<Control>>,
    notes: HashMap<String, VecDeque<Note>>,
    next_note: u64,
}

/// A note for the page: `{"kind","seq","taskId","text"}` (in name order,
/// as the page has always had it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    /// Stable: `killed`, `replaced`, `cannot-cancel`, `forgotten`, …
    pub kind: String,
    /// Increases with every note of the server.
    pub seq: u64,
    /// The task it is about.
    pub task_id: String,
    /// For people.
    pub text: String,
}

/// One task's side of a kill: which attempt and worker hold it now, and
/// which were killed last (so that the worker taking the task over can
/// say whom it replaces).
#[derive(Debug)]
pub struct Control {
    tenant: String,
    /// The attempt and worker that hold the task now, if any.
    holding: Mutex<Option<(u64, String)>>,
    /// The attempt and worker killed last, if any.
    killed: Mutex<Option<(u64, String)>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain values: still consistent after a panic elsewhere.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Control {
    /// `worker` now holds the task with `attempt`.
    pub fn hold(&self, attempt: u64, worker: &str) {
        *locked(&self.holding) = Some((attempt, worker.to_string()));
    }

    /// The job of `attempt` ended (finished, held, stopped): nobody holds
    /// the task unless a later attempt already does.
    pub fn release(&self, attempt: u64) {
        let mut holding = locked(&self.holding);
        if holding.as_ref().is_some_and(|(a, _)| *a == attempt) {
            *holding = None;
        }
    }

    /// The attempt and worker killed last, taken (each is told once).
    pub fn take_killed(&self) -> Option<(u64, String)> {
        locked(&self.killed).take()
    }
}

/// Removes the task from [`Workers`] when the demo is done with it.
#[derive(Debug)]
#[must_use = "the task is unregistered when this is dropped"]
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

    /// Registers `task`, which `tenant`'s workload made.
    pub fn register(self: &Arc<Self>, tenant: &str, task: &str) -> (Arc<Control>, Registration) {
        let control = Arc::new(Control {
            tenant: tenant.to_string(),
            holding: Mutex::new(None),
            killed: Mutex::new(None),
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

    /// The worker holding `task` for `tenant`, now marked killed: 404
    /// when the task is not one of the tenant's demo tasks in play, 409
    /// `no-worker` when no worker holds it now (queued, waiting for a
    /// decision, finished, or its worker was killed already). Returns the
    /// attempt and worker; the caller kills the worker
    /// ([`super::fleet::Fleets::kill`]).
    pub fn kill(&self, tenant: &str, task: &str) -> Result<(u64, String), ApiError> {
        let control = self
            .state()
            .running
            .get(task)
            .filter(|c| c.tenant == tenant)
            .cloned()
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "path.id: no demo task {} is in play for this tenant",
                    quoted(task)
                ))
            })?;
        let held = locked(&control.holding).take().ok_or_else(|| {
            ApiError::conflict(
                "no-worker",
                format!(
                    "path.id: no worker holds task {} now (it is queued, waiting for a \
                     decision, finished, or its worker was killed already)",
                    quoted(task)
                ),
            )
        })?;
        *locked(&control.killed) = Some(held.clone());
        Ok(held)
    }

    /// Everything `worker` held when it was killed, marked killed with it:
    /// each task's attempt. Its jobs died with it; the tasks' leases lapse.
    pub fn killed_with(&self, worker: &str) -> Vec<(String, u64)> {
        let st = self.state();
        let mut lost = Vec::new();
        for (task, control) in &st.running {
            let mut holding = locked(&control.holding);
            if holding.as_ref().is_some_and(|(_, w)| w == worker) {
                if let Some(held) = holding.take() {
                    lost.push((task.clone(), held.0));
                    *locked(&control.killed) = Some(held);
                }
            }
        }
        lost
    }

    /// The control of `task`, while it is in play.
    pub fn control(&self, task: &str) -> Option<Arc<Control>> {
        self.state().running.get(task).cloned()
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

    #[test]
    fn only_the_tenant_can_kill_and_only_a_holding_worker() {
        let workers = Arc::new(Workers::default());
        let (control, registration) = workers.register("a", "t1");
        assert_eq!(workers.kill("b", "t1").unwrap_err().status.as_u16(), 404);
        let idle = workers.kill("a", "t1").unwrap_err();
        assert_eq!((idle.status.as_u16(), idle.code), (409, "no-worker"));
        control.hold(2, "w-2");
        assert_eq!(workers.kill("a", "t1").unwrap(), (2, "w-2".to_string()));
        assert_eq!(workers.kill("a", "t1").unwrap_err().code, "no-worker");
        assert_eq!(control.take_killed(), Some((2, "w-2".to_string())));
        assert_eq!(control.take_killed(), None, "told once");
        drop(registration);
        assert_eq!(workers.kill("a", "t1").unwrap_err().status.as_u16(), 404);
    }

    #[test]
    fn a_killed_worker_takes_what_it_held_with_it() {
        let workers = Arc::new(Workers::default());
        let (one, _r1) = workers.register("a", "t1");
        let (two, _r2) = workers.register("a", "t2");
        let (three, _r3) = workers.register("a", "t3");
        one.hold(1, "w-1");
        two.hold(3, "w-1");
        three.hold(1, "w-2");
        two.release(2);
        let mut lost = workers.killed_with("w-1");
        lost.sort();
        assert_eq!(lost, [("t1".to_string(), 1), ("t2".to_string(), 3)]);
        assert_eq!(workers.kill("a", "t3").unwrap(), (1, "w-2".to_string()));
        three.release(1);
        assert_eq!(workers.kill("a", "t3").unwrap_err().code, "no-worker");
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

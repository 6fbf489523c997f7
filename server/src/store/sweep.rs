//! What the sweeps ask the store and what they get back: the TTL
//! sweeper's [`Swept`], the notify sender's [`WebhookClaim`] and
//! [`PendingWebhooks`]. Both carry the rows a sweep quarantined, so that
//! the caller reports each one once ([`super::quarantine`]).
//!
//! Task sweeps are described once here ([`TaskSweep`]), and one pure
//! function judges a due row ([`step_due_row`]); each store only fetches
//! the rows, writes what moved and quarantines what did not.

use taskwire_core::wire::from_json;
use taskwire_core::{Step, TaskView};

use super::{OutboxEntry, Quarantined};

/// A sweep over due task rows: the column a live task is due by (due
/// when it is ≤ now, indexed for live rows) and the core step that moves
/// a due task. The TTL sweeper is [`TTL`]; the lease and deadline sweeps
/// of the task lifecycle are meant to be two more, run by the same store
/// code (`sweep_tasks` in each store): a savepoint or set-based write,
/// quarantine, the changes for the hub.
pub(crate) struct TaskSweep {
    /// Names the sweep in quarantine errors.
    pub name: &'static str,
    /// The `tasks` column compared with now, and the order rows are taken.
    pub due_by: &'static str,
    /// Core's step for a due task.
    pub step: fn(&mut TaskView) -> Step,
}

/// Tasks past their TTL (the `tasks_due` index).
pub(crate) const TTL: TaskSweep = TaskSweep {
    name: "ttl",
    due_by: "expires_at_ms",
    step: TaskView::expire_step,
};

/// Judges one due row (its id and `view` column): the task after the
/// sweep's step, or, for a row to quarantine, the reason naming the field.
/// A row is bad when its view does not parse, names another task, is
/// terminal although the row is live, or when core's step does not move
/// it (its columns disagree with its view): each would otherwise be due,
/// and picked, on every tick.
pub(crate) fn step_due_row(
    sweep: &TaskSweep,
    id: &str,
    view: &str,
) -> Result<(TaskView, Step), String> {
    let mut view = from_json::<TaskView>(view, "tasks.view").map_err(|e| e.message)?;
    if view.id != id {
        return Err(format!(
            "tasks.view: names task {:?}, the row is {id:?}",
            view.id
        ));
    }
    if view.state.is_terminal() {
        return Err(format!(
            "tasks.live: the row is live but its view is {}",
            view.state.as_str()
        ));
    }
    let step = (sweep.step)(&mut view);
    if step.entry.is_none() {
        return Err("tasks: the row is due but core's step changes nothing".into());
    }
    Ok((view, step))
}

/// What one TTL sweep did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Swept {
    /// Due rows it looked at (expired or quarantined): fewer than the
    /// limit means nothing more is due now.
    pub looked_at: usize,
    /// Tasks it expired.
    pub expired: usize,
    /// Rows it set aside in this sweep (each is reported once, here).
    pub quarantined: Vec<Quarantined>,
}

/// Whose outbox rows a notify receiver is sent: it gets the tenants routed
/// to it, so one receiver's backlog never fills another's reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantScope {
    /// Only these tenants.
    Only(Vec<String>),
    /// Every tenant but these (they have receivers of their own).
    AllBut(Vec<String>),
}

impl TenantScope {
    /// The list and whether it is `Only` (how both stores' SQL takes it).
    pub(crate) fn parts(&self) -> (&[String], bool) {
        match self {
            TenantScope::Only(list) => (list, true),
            TenantScope::AllBut(list) => (list, false),
        }
    }
}

/// Which outbox rows a notify sender asks for: up to `limit` rows of
/// `scope`'s tenants, not yet posted, whose next attempt is due at
/// `now_ms`, oldest first, leaving out the ones it has `in_flight`. A
/// store shared by several instances claims them for `lease_ms`, so that
/// no other instance posts them meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookClaim {
    /// The tenants of one receiver.
    pub scope: TenantScope,
    /// `seq`s being posted now.
    pub in_flight: Vec<u64>,
    /// The clock.
    pub now_ms: f64,
    /// At most this many.
    pub limit: u32,
    /// How long a claim keeps other instances off a row (longer than a
    /// post can take).
    pub lease_ms: f64,
}

/// Outbox rows due for a notify post.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingWebhooks {
    /// Rows to post, oldest first.
    pub rows: Vec<OutboxEntry>,
    /// Rows that did not parse, set aside by this read (reported once,
    /// here); they are never read again.
    pub quarantined: Vec<Quarantined>,
}

#[cfg(test)]
mod tests {
    use taskwire_core::wire::to_json;
    use taskwire_core::{create_task, CreateTask};

    use super::{step_due_row, TTL};

    #[test]
    fn a_due_row_expires_or_says_why_it_cannot() {
        let task = create_task(&CreateTask::new("t1", 0.0, 10.0, 1)).expect("a task");
        let json = to_json(task.view());
        let (view, step) = step_due_row(&TTL, "t1", &json).expect("expires");
        assert_eq!((view.state.as_str(), view.version), ("expired", 1));
        assert!(step.outcome.notify);
        let why = |id: &str, text: &str| step_due_row(&TTL, id, text).expect_err("bad row");
        assert!(why("t1", "{").contains("tasks.view"));
        assert!(why("t2", &json).contains("names task \"t1\""));
        assert!(why("t1", &to_json(&view)).contains("live but its view is expired"));
    }
}

//! What the sweeps ask the store and what they get back: the TTL
//! sweeper's [`Swept`], the notify sender's [`WebhookClaim`] and
//! [`PendingWebhooks`]. Both carry the rows a sweep quarantined, so that
//! the caller reports each one once ([`super::quarantine`]).
//!
//! Task sweeps are described once here ([`TaskSweep`]), and one pure
//! function judges a due row ([`step_due_row`]); each store only fetches
//! the rows, writes what moved and quarantines what did not.

use taskwire_core::{Millis, TaskView};
use taskwire_wire::from_json;

use super::lifecycle::{judge_expiry, judge_sweep, parse_lease, Judged};
use super::{OutboxEntry, Quarantined, TaskRecord};

/// A sweep over due task rows: the column a live task is due by (due
/// when it is ≤ now, indexed for live rows) and what moves a due task.
/// Two exist, run by the same store code (`sweep_tasks` in each store: a
/// savepoint or set-based write, quarantine, the changes for the hub):
/// [`TTL`] and [`LIFECYCLE`].
pub(crate) struct TaskSweep {
    /// Names the sweep in quarantine errors.
    pub name: &'static str,
    /// The `tasks` column compared with now, and the order rows are taken.
    pub due_by: &'static str,
    /// What moves a due task at `now`.
    pub step: fn(&mut TaskRecord, Millis) -> Judged,
}

/// Tasks past their TTL (the `tasks_due` index).
pub(crate) const TTL: TaskSweep = TaskSweep {
    name: "ttl",
    due_by: "expires_at_ms",
    step: |record, _now| judge_expiry(record),
};

/// Tasks whose lease, grace period or execution deadline ran out (the
/// `tasks_lifecycle_due` index on `due_at_ms`, core's `next_due`).
pub(crate) const LIFECYCLE: TaskSweep = TaskSweep {
    name: "lifecycle",
    due_by: "due_at_ms",
    step: judge_sweep,
};

/// A due row as read: `id`, `tenant`, `view` and `lease` columns.
pub(crate) struct DueRow<'a> {
    pub id: &'a str,
    pub tenant: &'a str,
    pub view: &'a str,
    pub lease: Option<&'a str>,
}

/// Judges one due row: the task after the sweep (its `kind` and `input`
/// are not read: a sweep does not write them) or, for a row to
/// quarantine, the reason naming the field. A row is bad when its view or
/// lease does not parse, names another task, is terminal although the
/// row is live, or when core's step does not move it (its columns
/// disagree with its view): each would otherwise be due, and picked, on
/// every tick.
pub(crate) fn step_due_row(
    sweep: &TaskSweep,
    row: DueRow<'_>,
    now_ms: f64,
) -> Result<(TaskRecord, Judged), String> {
    let view = from_json::<TaskView>(row.view, "tasks.view").map_err(|e| e.message)?;
    if view.id != row.id {
        return Err(format!(
            "tasks.view: names task {:?}, the row is {:?}",
            view.id, row.id
        ));
    }
    if view.state.is_terminal() {
        return Err(format!(
            "tasks.live: the row is live but its view is {}",
            view.state.as_str()
        ));
    }
    let lease = parse_lease(row.lease).map_err(|e| e.to_string())?;
    let now = Millis::new(now_ms, "now").map_err(|e| e.message)?;
    let mut record = TaskRecord {
        tenant: row.tenant.to_string(),
        view,
        kind: None,
        input: None,
        lease,
        batch: None,
    };
    let judged = (sweep.step)(&mut record, now);
    if judged.appended.is_empty() {
        return Err("tasks: the row is due but core's step changes nothing".into());
    }
    Ok((record, judged))
}

/// What one TTL sweep did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Swept {
    /// Due rows it looked at (expired or quarantined): fewer than the
    /// limit means nothing more is due now.
    pub looked_at: usize,
    /// Tasks it moved (for the TTL sweep: expired).
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
    use taskwire_core::{create_task, CreateTask};
    use taskwire_wire::to_json;

    use super::{step_due_row, DueRow, LIFECYCLE, TTL};

    fn row<'a>(id: &'a str, view: &'a str, lease: Option<&'a str>) -> DueRow<'a> {
        DueRow {
            id,
            tenant: "acme",
            view,
            lease,
        }
    }

    #[test]
    fn a_due_row_expires_or_says_why_it_cannot() {
        let task = create_task(&CreateTask::new("t1", 0.0, 10.0, 1)).expect("a task");
        let json = to_json(task.view());
        let (record, judged) = step_due_row(&TTL, row("t1", &json, None), 10.0).expect("expires");
        assert_eq!(
            (record.view.state.as_str(), record.view.version),
            ("expired", 1)
        );
        assert!(judged.outcome.notify);
        let why = |id: &str, text: &str, lease: Option<&str>| {
            step_due_row(&TTL, row(id, text, lease), 10.0).expect_err("bad row")
        };
        assert!(why("t1", "{", None).contains("tasks.view"));
        assert!(why("t2", &json, None).contains("names task \"t1\""));
        assert!(why("t1", &to_json(&record.view), None).contains("live but its view is expired"));
        assert!(why("t1", &json, Some("{")).contains("tasks.lease"));
        // Nothing is due for the lifecycle sweep: no lease, no deadline.
        assert!(step_due_row(&LIFECYCLE, row("t1", &json, None), 10.0)
            .expect_err("not due")
            .contains("changes nothing"));
    }
}

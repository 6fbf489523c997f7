//! The SQLite store's sweeps, one row at a time (see
//! [`crate::store::quarantine`]): the TTL sweeper's expiries, which the
//! writer thread runs as one job, and the notify sender's outbox reads,
//! which run on a reader connection (a row that does not parse there is
//! set aside by a small writer job).

use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection};
use taskwire_core::Notification;

use super::jobs::write_judged;
use crate::hub::Change;
use crate::store::quarantine::not_quarantined;
use crate::store::rows::{state_column, to_i64};
use crate::store::sweep::{step_due_row, DueRow, TaskSweep};
use crate::store::{OutboxEntry, Quarantined, StoreError, Swept, WebhookClaim};

/// Why one row of a sweep failed.
enum RowFault {
    /// The row is bad: quarantine it and go on.
    Bad(String),
    /// The store failed: stop, the next tick retries.
    Store(StoreError),
}

impl From<StoreError> for RowFault {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Corrupt(message) => RowFault::Bad(message),
            other => RowFault::Store(other),
        }
    }
}

/// Runs `sweep` over up to `limit` due rows, each in its own savepoint
/// inside the writer's job: a bad row is rolled back alone and
/// quarantined, a storage error fails the job (nothing of it commits).
pub(super) fn sweep_tasks(
    tx: &Connection,
    sweep: &TaskSweep,
    now_ms: f64,
    limit: u32,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<Swept, StoreError> {
    let sql = format!(
        "SELECT id, tenant, view, lease FROM tasks WHERE live = 1 AND {due} <= ?1 AND {}
         ORDER BY {due} LIMIT ?2",
        not_quarantined("tasks", "tasks.id"),
        due = sweep.due_by,
    );
    // Raw values: a row whose columns have the wrong type is a bad row,
    // not a failed query.
    let due: Vec<DueColumns> = {
        let mut stmt = tx.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![now_ms, limit], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    let mut swept = Swept {
        looked_at: due.len(),
        ..Swept::default()
    };
    for (id, tenant, view, lease) in due {
        tx.execute_batch("SAVEPOINT sweep_row")?;
        let mut row_changes = Vec::new();
        let mut row_outbox = false;
        let done = sweep_one(
            tx,
            sweep,
            (&id, tenant, view, lease),
            now_ms,
            &mut row_changes,
            &mut row_outbox,
        );
        match done {
            Ok(()) => {
                tx.execute_batch("RELEASE sweep_row")?;
                changes.append(&mut row_changes);
                *outbox |= row_outbox;
                swept.expired += 1;
            }
            Err(RowFault::Bad(error)) => {
                tx.execute_batch("ROLLBACK TO sweep_row; RELEASE sweep_row")?;
                let error = format!("{} sweep: {error}", sweep.name);
                swept
                    .quarantined
                    .extend(quarantine(tx, "tasks", id, error, now_ms)?);
            }
            // The job's own savepoint rolls all of it back.
            Err(RowFault::Store(e)) => return Err(e),
        }
    }
    Ok(swept)
}

/// One due row: judged by [`step_due_row`], then written.
fn sweep_one(
    tx: &Connection,
    sweep: &TaskSweep,
    (id, tenant, view, lease): (&SqlValue, SqlValue, SqlValue, SqlValue),
    now_ms: f64,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<(), RowFault> {
    let row = DueRow {
        id: text(id, "tasks.id")?,
        tenant: text(&tenant, "tasks.tenant")?,
        view: text(&view, "tasks.view")?,
        lease: match &lease {
            SqlValue::Null => None,
            other => Some(text(other, "tasks.lease")?),
        },
    };
    let (record, judged) = step_due_row(sweep, row, now_ms).map_err(RowFault::Bad)?;
    // A TTL expiry is notified at "now" (core's Book::expire_due); a
    // lifecycle step at the time it fell due (`Appended::notify_at`).
    write_judged(tx, &record, &judged, now_ms, changes, outbox)?;
    Ok(())
}

/// `id, tenant, view, lease` of a due row, as stored.
type DueColumns = (SqlValue, SqlValue, SqlValue, SqlValue);

fn text<'a>(value: &'a SqlValue, column: &str) -> Result<&'a str, RowFault> {
    match value {
        SqlValue::Text(s) => Ok(s),
        other => Err(RowFault::Bad(format!(
            "{column}: is {:?}, not text",
            other.data_type()
        ))),
    }
}

/// Sets a row aside: one `quarantine` row keyed by the row's key exactly
/// as stored (so the due queries' `NOT EXISTS` matches it). Returns it
/// when this call set it aside (not when it already was).
fn quarantine(
    tx: &Connection,
    table: &'static str,
    key: SqlValue,
    error: String,
    now_ms: f64,
) -> Result<Option<Quarantined>, StoreError> {
    let shown = match &key {
        SqlValue::Text(s) => s.clone(),
        SqlValue::Integer(n) => n.to_string(),
        SqlValue::Real(x) => x.to_string(),
        SqlValue::Blob(b) => format!(
            "x'{}'",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
        SqlValue::Null => "NULL".into(),
    };
    let inserted = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO quarantine (source, row_key, error, at_ms) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![table, key, error, now_ms])?;
    Ok((inserted == 1).then_some(Quarantined {
        table,
        key: shown,
        error,
    }))
}

/// A writer job: quarantines outbox rows a reader found unparseable.
pub(super) fn quarantine_outbox(
    tx: &Connection,
    rows: Vec<(i64, String)>,
    now_ms: f64,
) -> Result<Vec<Quarantined>, StoreError> {
    let mut out = Vec::new();
    for (seq, error) in rows {
        let error = format!("notify: {error}");
        out.extend(quarantine(
            tx,
            "outbox",
            SqlValue::Integer(seq),
            error,
            now_ms,
        )?);
    }
    Ok(out)
}

/// The outbox rows the claim asks for, and the `seq` and error of each due
/// row that does not parse (for [`quarantine_outbox`]).
#[allow(clippy::type_complexity)]
pub(super) fn pending_webhooks(
    conn: &Connection,
    claim: &WebhookClaim,
) -> Result<(Vec<OutboxEntry>, Vec<(i64, String)>), StoreError> {
    let sql = format!(
        "SELECT seq, key, task_id, state, at_ms, tenant, attempts FROM outbox
         WHERE sent = 0 AND next_attempt_ms <= ?1
           AND (tenant IN (SELECT value FROM json_each(?3))) = ?4
           AND seq NOT IN (SELECT value FROM json_each(?5)) AND {}
         ORDER BY seq LIMIT ?2",
        not_quarantined("outbox", "outbox.seq")
    );
    let (tenants, only) = claim.scope.parts();
    let tenants = json_list(tenants)?;
    let in_flight = json_list(&claim.in_flight)?;
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![claim.now_ms, claim.limit, tenants, only, in_flight],
        outbox_row,
    )?;
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for row in rows {
        match row? {
            (_, Ok(entry)) => good.push(entry),
            (seq, Err(e)) => bad.push((seq, e.to_string())),
        }
    }
    Ok((good, bad))
}

/// A list as a JSON array, for `json_each` (SQLite has no array
/// parameters).
fn json_list<T: serde::Serialize>(items: &[T]) -> Result<String, StoreError> {
    taskwire_wire::to_string(items)
        .map_err(|e| StoreError::Internal(format!("list parameter: {e}")))
}

/// Records a webhook attempt: sent, or when to try again.
pub(super) fn record_attempt(
    tx: &Connection,
    seq: u64,
    sent: bool,
    next_attempt_ms: f64,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE outbox SET sent = ?2, attempts = attempts + 1, next_attempt_ms = ?3 WHERE seq = ?1",
    )?
    .execute(params![to_i64(seq), sent, next_attempt_ms])?;
    Ok(())
}

/// An outbox row: its `seq` (the rowid, always an integer) and the entry,
/// or why the row does not parse.
pub(super) type OutboxRow = (i64, Result<OutboxEntry, StoreError>);

/// Reads `seq, key, task_id, state, at_ms, tenant, attempts`.
pub(super) fn outbox_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    let seq: i64 = r.get(0)?;
    let entry = (|| {
        let state: String = r.get(3)?;
        let state = state_column(&state, "outbox.state")?;
        let attempts: i64 = r.get(6)?;
        Ok(OutboxEntry {
            seq: u64::try_from(seq).map_err(|_| StoreError::Corrupt("outbox.seq < 0".into()))?,
            key: r.get(1)?,
            notification: Notification {
                task_id: r.get(2)?,
                state,
                at_ms: r.get(4)?,
            },
            tenant: r.get(5)?,
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
        })
    })();
    Ok((seq, entry))
}

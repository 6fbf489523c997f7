//! Reading task rows and history: the store's reads (a task, a resume, a
//! task's tenant, the notification feed) and the row parsing the writer
//! and the listener share.

use deadpool_postgres::{GenericClient, Transaction};
use taskwire_core::{HistoryEntry, ResumeAnswer, TaskView};
use taskwire_wire::from_json;
use tokio_postgres::Row;

use super::writer::Sql;
use super::{sweep, PostgresStore};
use crate::store::decide::{check_key, replayed, resume_plan, KeyCheck};
use crate::store::lifecycle::parse_lease;
use crate::store::rows::{corrupt, history_entry, to_i64};
use crate::store::{Created, Idempotency, OutboxEntry, RawJson, StoreError, TaskRecord};

/// The tenant's task ([`crate::store::Store::get`]).
pub(super) async fn get(
    store: &PostgresStore,
    tenant: String,
    id: String,
) -> Result<TaskRecord, StoreError> {
    let client = store.conn().await?;
    // The tenant is in the query: another tenant's row is never
    // read or parsed (no timing difference from an unknown id).
    let stmt = client
        .prepare_cached(
            "SELECT tenant, view, kind, input, lease, batch_id FROM tasks WHERE id = $1 AND tenant = $2",
        )
        .await?;
    let row = client.query_opt(&stmt, &[&id, &tenant]).await?;
    row.map(|r| record(&r, 0))
        .transpose()?
        .ok_or(StoreError::NotFound(id))
}

/// The task an earlier create under `idem`'s key made, read in one
/// statement without the writer ([`crate::store::Store::replay`]).
pub(super) async fn replay(
    store: &PostgresStore,
    tenant: String,
    idem: Idempotency,
) -> Result<Option<Created>, StoreError> {
    let client = store.conn().await?;
    let stmt = client
        .prepare_cached(
            "SELECT i.request, i.task_id, t.tenant, t.view, t.kind, t.input, t.lease, t.batch_id
             FROM idempotency i LEFT JOIN tasks t ON t.id = i.task_id AND t.tenant = i.tenant
             WHERE i.tenant = $1 AND i.key = $2",
        )
        .await?;
    let row = client.query_opt(&stmt, &[&tenant, &idem.key]).await?;
    let seen = match &row {
        Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
        None => None,
    };
    match (check_key(&idem, seen)?, row) {
        (KeyCheck::Replay(task_id), Some(r)) => {
            let found: Option<String> = r.try_get(2)?;
            let task = found.map(|_| record(&r, 2)).transpose()?;
            replayed(&task_id, task).map(Some)
        }
        _ => Ok(None),
    }
}

/// A resume answer, read in one statement ([`crate::store::Store::resume`]).
pub(super) async fn resume(
    store: &PostgresStore,
    tenant: String,
    id: String,
    cursor: u64,
    force_snapshot: bool,
) -> Result<ResumeAnswer, StoreError> {
    let retention = store.retention;
    let client = store.conn().await?;
    // One statement, one snapshot: the view and the entries agree.
    // The join condition is core's Delta case of plan_resume.
    let stmt = client
        .prepare_cached(
            "SELECT t.tenant, t.view, h.version, h.event FROM tasks t
             LEFT JOIN history h ON h.task_id = t.id AND h.version > $2
                  AND t.version > $2 AND t.version - $2 <= $3 AND NOT $4
             WHERE t.id = $1 AND t.tenant = $5 ORDER BY h.version",
        )
        .await?;
    let rows = client
        .query(
            &stmt,
            &[
                &id,
                &to_i64(cursor),
                &to_i64(retention),
                &force_snapshot,
                &tenant,
            ],
        )
        .await?;
    let Some(first) = rows.first() else {
        return Err(StoreError::NotFound(id));
    };
    let owner: String = first.try_get(0)?;
    if owner != tenant {
        return Err(StoreError::NotFound(id));
    }
    let view = parse_view(&first.try_get::<_, String>(1)?)?;
    resume_plan(view.version, cursor, retention, force_snapshot).answer(view, || entries(&rows, 2))
}

/// The tenant's task and its whole history, read in one statement
/// ([`crate::store::Store::history`]).
pub(super) async fn history(
    store: &PostgresStore,
    tenant: String,
    id: String,
) -> Result<(TaskView, Vec<HistoryEntry>), StoreError> {
    let client = store.conn().await?;
    let stmt = client
        .prepare_cached(
            "SELECT t.tenant, t.view, h.version, h.event FROM tasks t
             LEFT JOIN history h ON h.task_id = t.id
             WHERE t.id = $1 AND t.tenant = $2 ORDER BY h.version",
        )
        .await?;
    let rows = client.query(&stmt, &[&id, &tenant]).await?;
    let Some(first) = rows.first() else {
        return Err(StoreError::NotFound(id));
    };
    let view = parse_view(&first.try_get::<_, String>(1)?)?;
    Ok((view, entries(&rows, 2)?))
}

/// The tenant that owns task `id`, if it exists.
pub(super) async fn task_tenant(
    store: &PostgresStore,
    id: String,
) -> Result<Option<String>, StoreError> {
    let client = store.conn().await?;
    let stmt = client
        .prepare_cached("SELECT tenant FROM tasks WHERE id = $1")
        .await?;
    let row = client.query_opt(&stmt, &[&id]).await?;
    Ok(row.map(|r| r.try_get(0)).transpose()?)
}

/// The tenant's outbox after `after`, oldest first.
pub(super) async fn notifications(
    store: &PostgresStore,
    tenant: String,
    after: u64,
    limit: u32,
) -> Result<Vec<OutboxEntry>, StoreError> {
    let client = store.conn().await?;
    let stmt = client
        .prepare_cached(
            "SELECT seq, key, task_id, state, at_ms, tenant, attempts FROM outbox
             WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&tenant, &to_i64(after), &i64::from(limit)])
        .await?;
    rows.iter().map(sweep::outbox_row).collect()
}

/// Reads the tenant's task without locking it. The tenant is in the
/// query: another tenant's row is never read or parsed.
pub(super) async fn load_own(
    tx: &Transaction<'_>,
    tenant: &str,
    id: &str,
) -> Sql<Option<TaskRecord>> {
    let stmt = tx
        .prepare_cached(
            "SELECT tenant, view, kind, input, lease, batch_id FROM tasks WHERE id = $1 AND tenant = $2",
        )
        .await?;
    let row = tx.query_opt(&stmt, &[&id, &tenant]).await?;
    Ok(row.map(|r| record(&r, 0)).transpose())
}

/// A task row's `tenant, view, kind, input, lease, batch_id` from column
/// `at` on.
pub(super) fn record(row: &Row, at: usize) -> Result<TaskRecord, StoreError> {
    let tenant: String = row.try_get(at)?;
    let view: String = row.try_get(at + 1)?;
    let kind: Option<String> = row.try_get(at + 2)?;
    let input: Option<String> = row.try_get(at + 3)?;
    let lease: Option<String> = row.try_get(at + 4)?;
    let batch: Option<String> = row.try_get(at + 5)?;
    let input = input
        .map(RawJson::parse)
        .transpose()
        .map_err(|e| StoreError::Internal(format!("tasks.input: {e}")))?;
    Ok(TaskRecord {
        tenant,
        view: parse_view(&view)?,
        kind,
        input,
        lease: parse_lease(lease.as_deref())?,
        batch,
    })
}

pub(super) fn parse_view(text: &str) -> Result<TaskView, StoreError> {
    from_json::<TaskView>(text, "tasks.view").map_err(corrupt)
}

/// History entries from the rows' `version, event` columns at `at` (a
/// LEFT JOIN: rows without an entry have NULLs there).
pub(super) fn entries(rows: &[Row], at: usize) -> Result<Vec<HistoryEntry>, StoreError> {
    let mut out = Vec::new();
    for row in rows {
        let version: Option<i64> = row.try_get(at)?;
        let event: Option<String> = row.try_get(at + 1)?;
        if let (Some(version), Some(event)) = (version, event) {
            out.push(history_entry(version, &event)?);
        }
    }
    Ok(out)
}

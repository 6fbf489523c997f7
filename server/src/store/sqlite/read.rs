//! Reading task rows and history, on the writer's transaction or a
//! reader's connection.

use rusqlite::{params, Connection, OptionalExtension};
use taskwire_core::wire::from_json;
use taskwire_core::{HistoryEntry, TaskView};

use super::{corrupt, to_i64};
use crate::store::lifecycle::parse_lease;
use crate::store::{RawJson, StoreError, TaskRecord};

/// `tenant, view, kind, input, lease`.
type TaskRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
);

const COLUMNS: &str = "tenant, view, kind, input, lease";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

/// Any tenant's task (callbacks are signed, not bearer-authenticated).
pub(super) fn load_task(conn: &Connection, id: &str) -> Result<Option<TaskRecord>, StoreError> {
    let found: Option<TaskRow> = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1"))?
        .query_row(params![id], row)
        .optional()?;
    found.map(task_record).transpose()
}

/// The tenant's task. The tenant is part of the query, so another
/// tenant's row is never read, let alone parsed: its size or state cannot
/// show in how long a 404 takes.
pub(super) fn load_own_task(
    conn: &Connection,
    tenant: &str,
    id: &str,
) -> Result<Option<TaskRecord>, StoreError> {
    let found: Option<TaskRow> = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM tasks WHERE id = ?1 AND tenant = ?2"
        ))?
        .query_row(params![id, tenant], row)
        .optional()?;
    found.map(task_record).transpose()
}

fn task_record((tenant, view, kind, input, lease): TaskRow) -> Result<TaskRecord, StoreError> {
    let view = from_json::<TaskView>(&view, "tasks.view").map_err(corrupt)?;
    let input = input
        .map(RawJson::parse)
        .transpose()
        .map_err(|e| StoreError::Internal(format!("tasks.input: {e}")))?;
    Ok(TaskRecord {
        tenant,
        view,
        kind,
        input,
        lease: parse_lease(lease.as_deref())?,
    })
}

/// The task's history entries after `cursor`, in order.
pub(super) fn history_after(
    conn: &Connection,
    id: &str,
    cursor: u64,
) -> Result<Vec<HistoryEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT version, event FROM history WHERE task_id = ?1 AND version > ?2 ORDER BY version",
    )?;
    let rows = stmt.query_map(params![id, to_i64(cursor)], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (version, event) = row?;
        out.push(HistoryEntry {
            version: u64::try_from(version)
                .map_err(|_| StoreError::Internal("history.version < 0".into()))?,
            event: from_json(&event, "history.event").map_err(corrupt)?,
        });
    }
    Ok(out)
}

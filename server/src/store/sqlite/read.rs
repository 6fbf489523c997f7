//! Reading task rows and history, on the writer's transaction or a
//! reader's connection; the pool of reader connections.

use std::path::PathBuf;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};
use taskwire_core::{HistoryEntry, TaskView};
use taskwire_wire::from_json;

use crate::store::decide::{check_key, replayed, KeyCheck};
use crate::store::lifecycle::parse_lease;
use crate::store::rows::{corrupt, history_entry, to_i64};
use crate::store::{Created, Idempotency, RawJson, StoreError, TaskRecord};

/// `tenant, view, kind, input, lease, batch_id`.
type TaskRow = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

const COLUMNS: &str = "tenant, view, kind, input, lease, batch_id";

pub(super) fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
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

pub(super) fn task_record(
    (tenant, view, kind, input, lease, batch): TaskRow,
) -> Result<TaskRecord, StoreError> {
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
        batch,
    })
}

/// The task an earlier create under `idem`'s key made (a replay), `None`
/// for a new key; on the writer's transaction or a reader's connection.
pub(super) fn replay(
    conn: &Connection,
    tenant: &str,
    idem: &Idempotency,
) -> Result<Option<Created>, StoreError> {
    let seen: Option<(String, String)> = conn
        .prepare_cached("SELECT request, task_id FROM idempotency WHERE tenant = ?1 AND key = ?2")?
        .query_row(params![tenant, idem.key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match check_key(idem, seen)? {
        KeyCheck::Replay(task_id) => {
            replayed(&task_id, load_own_task(conn, tenant, &task_id)?).map(Some)
        }
        KeyCheck::Create => Ok(None),
    }
}

/// Refuses a create when `tenant` already has `max` open (non-terminal)
/// tasks. Read on the writer's transaction, so creates earlier in the same
/// batch count; one row of `open_tasks` (kept by triggers on `tasks`, see
/// `sqlite_schema.rs`), whatever the tenant holds.
pub(super) fn check_open_tasks(
    conn: &Connection,
    tenant: &str,
    max: u64,
) -> Result<(), StoreError> {
    check_room_for(conn, tenant, max, 1)
}

/// Refuses `n` creates at once (a batch) when they would take `tenant`
/// past `max` open tasks.
pub(super) fn check_room_for(
    conn: &Connection,
    tenant: &str,
    max: u64,
    n: u64,
) -> Result<(), StoreError> {
    let open: Option<i64> = conn
        .prepare_cached("SELECT open FROM open_tasks WHERE tenant = ?1")?
        .query_row(params![tenant], |r| r.get(0))
        .optional()?;
    if u64::try_from(open.unwrap_or(0))
        .unwrap_or(0)
        .saturating_add(n)
        > max
    {
        return Err(StoreError::OpenTaskQuota {
            tenant: tenant.to_string(),
            max,
            wanted: n,
        });
    }
    Ok(())
}

/// The task's history entries after `cursor`, in order.
pub(super) fn history_after(
    conn: &Connection,
    id: &str,
    cursor: u64,
) -> Result<Vec<HistoryEntry>, StoreError> {
    history_entries(
        conn,
        "SELECT version, event FROM history WHERE task_id = ?1 AND version > ?2 ORDER BY version",
        params![id, to_i64(cursor)],
    )
}

/// History entries from a query whose columns are `version, event`.
pub(super) fn history_entries(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<HistoryEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(args, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
    let mut out = Vec::new();
    for row in rows {
        let (version, event) = row?;
        out.push(history_entry(version, &event)?);
    }
    Ok(out)
}

/// Every reader connection's settings. The page cache is small: a read
/// touches a handful of pages (a primary-key lookup and a range of one
/// task's history), misses are served from the OS page cache, and with
/// SQLite's default (2 MB per connection) the 8 readers' caches filled for
/// tens of minutes as the file grew, which read as RSS rising under a
/// steady load (server/README.md, "Soak"). The writer keeps the default:
/// it holds a batch's dirty pages until COMMIT.
const READER_PRAGMAS: &str =
    "PRAGMA busy_timeout = 5000; PRAGMA query_only = 1; PRAGMA cache_size = -256;";

/// Reader connections, opened on demand and reused.
pub(super) struct Readers {
    pub(super) path: PathBuf,
    pub(super) pool: Mutex<Vec<Connection>>,
}

impl Readers {
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let c = Connection::open(&self.path)?;
                c.execute_batch(READER_PRAGMAS)?;
                c
            }
        };
        let out = f(&mut conn);
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(conn);
        out
    }
}

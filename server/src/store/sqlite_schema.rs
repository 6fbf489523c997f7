//! The SQLite schema's version, and the migration of older files.
//!
//! `PRAGMA user_version` holds the schema version. A file from before
//! versions existed reads 0 but already has tables: that is schema 1. On
//! open, in one `BEGIN IMMEDIATE` transaction, [`prepare`] refuses a file
//! written by a newer server (it would misread it), migrates an older one
//! step by step, creates what is missing (`CREATE … IF NOT EXISTS`) and
//! stamps [`CURRENT`]. A crash mid-migration rolls it all back.
//!
//! Versions:
//! 1. `callbacks.event` held the JSON of every remembered callback's event:
//!    the same text as the history entry that callback produced, so each
//!    event was stored twice (39 % + 33 % of a 1 GB file at 500k tasks).
//! 2. `callbacks.version` names the history entry holding the callback's
//!    event and `callbacks.event` is NULL, except where the history
//!    recorded something else: a callback that expired its task is
//!    recorded as `expire` (core's `Recorded::Expiry`), so that callback
//!    keeps its own event and `version` is NULL. A repeated `webhook-id`
//!    is judged against exactly the event it first carried, as before.
//! 3. `tasks.lease` and `tasks.due_at_ms`: the task lifecycle (leases,
//!    grace periods, execution deadlines; `lifecycle.rs`). Added as NULL
//!    columns: a task of an older file has no lease and no deadline, so
//!    nothing is due for it but its TTL, exactly as before.
//! 4. Batches (`store/batches.rs`): the `batches` table, and
//!    `tasks.batch_id`, `tasks.batch_index`, `tasks.batch_seq` and
//!    `history.batch_seq`. Added as NULL columns: a task of an older file
//!    is in no batch, and nothing about it changes.
//!
//! Layout steps without a version of their own (an older server opening
//! the file finds what it expects or fails loudly, never misreads):
//! `open_tasks`, `callback_replays`, and `callbacks` keyed by (tenant,
//! callback id) hashed (`callback_ids.rs`): a file whose `callbacks` has
//! no `key` column has its rows copied into the keyed table on open
//! (`Prepared::callbacks_rekeyed` rows); its UNIQUE index goes with the old
//! table. An older server then fails to write callbacks (`key` is NOT
//! NULL), so it cannot run against the file by mistake.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::callback_ids;

/// The schema version this server writes.
pub const CURRENT: i64 = 5;

/// The schema. `view` holds the task's `TaskView` as JSON (parsed back
/// through core, which re-checks its invariants); the other task columns
/// exist for indexes and queries.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id            TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    view          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    live          INTEGER NOT NULL,
    expires_at_ms REAL NOT NULL,
    kind          TEXT,
    input         TEXT,
    -- The lifecycle (lifecycle.rs): the current attempt's lease, and when
    -- the sweeper must look at the task next (not the TTL).
    lease         TEXT,
    due_at_ms     REAL,
    -- The batch it is an item of (store/batches.rs), its place in it, and
    -- the batch cursor of its last change.
    batch_id      TEXT,
    batch_index   INTEGER,
    batch_seq     INTEGER,
    -- The work queue (store/work.rs): when the task was last queued, on
    -- the server's clock; NULL unless it is queued.
    queued_at_ms  REAL
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (expires_at_ms) WHERE live = 1;
-- The work queue (store/work.rs): per tenant and kind, oldest first.
CREATE INDEX IF NOT EXISTS tasks_queue ON tasks (tenant, (coalesce(kind, '')), queued_at_ms)
    WHERE queued_at_ms IS NOT NULL;
-- Attempts holding a lease, per kind: a kind's `max-running` limit.
CREATE INDEX IF NOT EXISTS tasks_leased ON tasks (kind) WHERE live = 1 AND lease IS NOT NULL;
-- A kind's rate limit across claims (store/work.rs): when its bucket is
-- empty again.
CREATE TABLE IF NOT EXISTS work_rates (
    kind   TEXT PRIMARY KEY,
    tat_ms REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_lifecycle_due ON tasks (due_at_ms)
    WHERE live = 1 AND due_at_ms IS NOT NULL;
-- Each tenant's open (live) tasks, for the `max-open-tasks` quota
-- (quotas/): one row read per create instead of a count of the tenant's
-- tasks. Kept by triggers, so every write path (and a server that does
-- not know the table) keeps it exact; filled from `tasks` by `prepare`
-- when it is new. No schema version of its own: nothing older misreads it.
CREATE TABLE IF NOT EXISTS open_tasks (
    tenant TEXT PRIMARY KEY,
    open   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS open_tasks_insert AFTER INSERT ON tasks WHEN NEW.live = 1
BEGIN
    INSERT INTO open_tasks (tenant, open) VALUES (NEW.tenant, 1)
        ON CONFLICT (tenant) DO UPDATE SET open = open + 1;
END;
CREATE TRIGGER IF NOT EXISTS open_tasks_update AFTER UPDATE OF live ON tasks
    WHEN OLD.live <> NEW.live
BEGIN
    INSERT INTO open_tasks (tenant, open) VALUES (NEW.tenant, NEW.live = 1)
        ON CONFLICT (tenant) DO UPDATE SET open = open + (CASE WHEN NEW.live = 1 THEN 1 ELSE -1 END);
END;
CREATE TRIGGER IF NOT EXISTS open_tasks_delete AFTER DELETE ON tasks WHEN OLD.live = 1
BEGIN
    UPDATE open_tasks SET open = open - 1 WHERE tenant = OLD.tenant;
END;
CREATE TABLE IF NOT EXISTS history (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    event   TEXT NOT NULL,
    -- The batch cursor the entry was written at (items of a batch only).
    batch_seq INTEGER,
    PRIMARY KEY (task_id, version)
) WITHOUT ROWID;
-- A batch: its owner, how many items, and its cursor (`seq`, raised by
-- every write that appends history to one of its items).
CREATE TABLE IF NOT EXISTS batches (
    id            TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    size          INTEGER NOT NULL,
    seq           INTEGER NOT NULL,
    created_at_ms REAL NOT NULL
) WITHOUT ROWID;
-- A batch's items changed after a cursor; and its open items, counted
-- from the index alone.
CREATE INDEX IF NOT EXISTS tasks_batch ON tasks (batch_id, batch_seq)
    WHERE batch_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_batch_open ON tasks (batch_id)
    WHERE batch_id IS NOT NULL AND live = 1;
-- A remembered callback id names the history entry holding its event;
-- `event` only when the history holds another one (see callback_ref.rs).
-- Keyed by (tenant, callback id) hashed: one task per callback id and
-- tenant, and both lookups, in one B-tree (callback_ids.rs). `tenant` is
-- NULL in rows from before the column existed (keyed by their task).
CREATE TABLE IF NOT EXISTS callbacks (
    key         BLOB PRIMARY KEY,
    task_id     TEXT NOT NULL,
    callback_id TEXT NOT NULL,
    version     INTEGER,
    event       TEXT,
    tenant      TEXT,
    CHECK ((version IS NULL) <> (event IS NULL))
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency (
    tenant  TEXT NOT NULL,
    key     TEXT NOT NULL,
    request TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    tenant  TEXT NOT NULL,
    key     TEXT NOT NULL,
    receipt TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant          TEXT NOT NULL,
    key             TEXT NOT NULL UNIQUE,
    task_id         TEXT NOT NULL,
    state           TEXT NOT NULL,
    at_ms           REAL NOT NULL,
    sent            INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_tenant ON outbox (tenant, seq);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (next_attempt_ms) WHERE sent = 0;
";

/// What [`prepare`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// The version the file had (0: a new file).
    pub from: i64,
    /// Callback rows the migration turned into references to history.
    pub callbacks_referenced: usize,
    /// Callback rows of the layout before keys, copied into the keyed
    /// table (`callback_ids.rs`).
    pub callbacks_rekeyed: usize,
}

/// Brings the file at `path` (opened as `conn`) to [`CURRENT`]; `schema`
/// is the current `CREATE … IF NOT EXISTS` script. Errors name the file.
pub fn prepare(conn: &mut Connection, schema: &str, path: &str) -> Result<Prepared, String> {
    let fail = |e: rusqlite::Error| format!("{path}: {e}");
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(fail)?;
    let stamped: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(fail)?;
    if stamped > CURRENT {
        return Err(format!(
            "{path}: schema version {stamped} was written by a newer taskwire-server \
             (this one knows versions up to {CURRENT}); run that version or newer"
        ));
    }
    let from = match stamped {
        0 if table_exists(&tx, "callbacks").map_err(fail)? => 1,
        v => v,
    };
    if (1..3).contains(&from) {
        tx.execute_batch(
            "ALTER TABLE tasks ADD COLUMN lease TEXT;
             ALTER TABLE tasks ADD COLUMN due_at_ms REAL;",
        )
        .map_err(fail)?;
    }
    if (1..4).contains(&from) {
        tx.execute_batch(
            "ALTER TABLE tasks ADD COLUMN batch_id TEXT;
             ALTER TABLE tasks ADD COLUMN batch_index INTEGER;
             ALTER TABLE tasks ADD COLUMN batch_seq INTEGER;
             ALTER TABLE history ADD COLUMN batch_seq INTEGER;",
        )
        .map_err(fail)?;
    }
    if (1..5).contains(&from) {
        // The queue: every task queued now joins it, oldest first.
        tx.execute_batch(
            "ALTER TABLE tasks ADD COLUMN queued_at_ms REAL;
             UPDATE tasks SET queued_at_ms = unixepoch('subsec') * 1000.0
             WHERE live = 1 AND json_extract(view, '$.state') = 'queued';",
        )
        .map_err(fail)?;
    }
    if from == 1 {
        // The old table steps aside (with its indexes, which would keep
        // their names and stop the script from creating them on the new
        // one); the script creates the new one.
        tx.execute_batch("ALTER TABLE callbacks RENAME TO callbacks_v1")
            .map_err(fail)?;
        drop_indexes_of(&tx, "callbacks_v1").map_err(fail)?;
    }
    // Callbacks keyed by (tenant, id) hashed (callback_ids.rs): a file
    // with the table keyed by task has its rows copied into the new one.
    // No version of its own: the layout says which it is.
    let unkeyed = from > 1
        && table_exists(&tx, "callbacks").map_err(fail)?
        && !column_exists(&tx, "callbacks", "key").map_err(fail)?;
    if unkeyed {
        tx.execute_batch("ALTER TABLE callbacks RENAME TO callbacks_unkeyed")
            .map_err(fail)?;
        drop_indexes_of(&tx, "callbacks_unkeyed").map_err(fail)?;
    }
    let counted = table_exists(&tx, "open_tasks").map_err(fail)?;
    tx.execute_batch(schema).map_err(fail)?;
    if !counted {
        // A file from before the table: count what its triggers will keep.
        tx.execute_batch(
            "INSERT INTO open_tasks (tenant, open)
             SELECT tenant, count(*) FROM tasks WHERE live = 1 GROUP BY tenant",
        )
        .map_err(fail)?;
    }
    let mut callbacks_referenced = 0;
    if from == 1 {
        callbacks_referenced = callbacks_1_to_2(&tx).map_err(fail)?;
    }
    // An older server that opened the file since made its UNIQUE index
    // again (on the keyed table): the key already holds the rule.
    tx.execute_batch("DROP INDEX IF EXISTS callbacks_tenant_callback_id")
        .map_err(fail)?;
    let mut callbacks_rekeyed = 0;
    if unkeyed {
        callbacks_rekeyed = callback_ids::sqlite_copy_keyed(
            &tx,
            "SELECT task_id, callback_id, version, event, tenant FROM callbacks_unkeyed",
        )
        .map_err(fail)?;
        tx.execute_batch("DROP TABLE callbacks_unkeyed")
            .map_err(fail)?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {CURRENT}"))
        .map_err(fail)?;
    tx.commit().map_err(fail)?;
    Ok(Prepared {
        from,
        callbacks_referenced,
        callbacks_rekeyed,
    })
}

/// Schema 1 → 2: each callback row points at the earliest history entry
/// of its task with the same event text (both were written as the same
/// `to_json` of one event, so the text is equal exactly when the events
/// are; any entry with that text holds the same event). Rows with no such
/// entry (expiries) keep their event.
///
/// A file of schema 1 written after `callbacks.tenant` was added
/// (`callback_ids.rs`) keeps each row's tenant; an older one has none
/// (NULL: not checked across tasks, as before).
fn callbacks_1_to_2(tx: &Connection) -> rusqlite::Result<usize> {
    let tenant = if column_exists(tx, "callbacks_v1", "tenant")? {
        "c.tenant"
    } else {
        "NULL"
    };
    callback_ids::sqlite_copy_keyed(
        tx,
        &format!(
            "SELECT task_id, callback_id, version, CASE WHEN version IS NULL THEN event END, tenant
         FROM (SELECT c.task_id, c.callback_id, c.event, {tenant} AS tenant,
                      (SELECT min(h.version) FROM history h
                       WHERE h.task_id = c.task_id AND h.event = c.event) AS version
               FROM callbacks_v1 c)"
        ),
    )?;
    tx.execute_batch("DROP TABLE callbacks_v1")?;
    tx.query_row(
        "SELECT count(*) FROM callbacks WHERE version IS NOT NULL",
        [],
        |r| r.get(0),
    )
}

fn column_exists(tx: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    tx.query_row(
        "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2",
        [table, column],
        |_| Ok(()),
    )
    .optional()
    .map(|found| found.is_some())
}

fn table_exists(tx: &Connection, name: &str) -> rusqlite::Result<bool> {
    tx.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |_| Ok(()),
    )
    .optional()
    .map(|found| found.is_some())
}

/// Drops the named indexes of `table` (automatic ones have no SQL and go
/// with the table).
fn drop_indexes_of(tx: &Connection, table: &str) -> rusqlite::Result<()> {
    let names: Vec<String> = {
        let mut stmt = tx.prepare(
            "SELECT name FROM sqlite_master
             WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL",
        )?;
        let rows = stmt.query_map([table], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    for name in names {
        tx.execute_batch(&format!("DROP INDEX \"{}\"", name.replace('"', "\"\"")))?;
    }
    Ok(())
}

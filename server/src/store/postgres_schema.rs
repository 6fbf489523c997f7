//! The PostgreSQL schema's version, and the migration of older databases.
//!
//! The one-row table `taskwire_schema` holds the version. A database from
//! before versions existed has no such table but already has `callbacks`:
//! that is schema 1. Each instance, on start, runs [`prepare`]: one
//! transaction under an advisory lock (instances starting together take
//! turns; the second finds the work done) that refuses a database written
//! by a newer server, migrates an older one step by step, creates what is
//! missing (`CREATE … IF NOT EXISTS`) and stamps [`CURRENT`]. A failure
//! rolls it all back.
//!
//! Versions (the same as SQLite's, see `sqlite_schema.rs`):
//! 1. `callbacks.event` held a copy of every remembered callback's event.
//! 2. `callbacks.version` names the history entry holding it; `event` only
//!    where the history recorded something else (an expiry).
//! 3. `tasks.lease` and `tasks.due_at_ms`, the task lifecycle (NULL for
//!    older tasks: no lease, no deadline).
//! 4. Batches (`store/batches.rs`, `postgres/batches.rs`): the `batches`
//!    table, `tasks.batch_id`, `tasks.batch_index`, `tasks.batch_seq` and
//!    `history.batch_seq` (NULL for older tasks: in no batch). An older
//!    instance left running would change batch items without raising
//!    their batch's cursor, so its followers would miss those changes.
//!
//! `callbacks` keyed by (tenant, callback id) hashed (`callback_ids.rs`)
//! is a layout step without a version of its own, run in place by the
//! schema script: a table without `key` gains it. An older instance then
//! fails to write callbacks (`key` is NOT NULL) instead of misreading.
//!
//! An instance of an older server must not run against a migrated
//! database: it would read the NULL events of new rows as an error. Stop
//! every instance, start the new version, then the others.

use deadpool_postgres::Object;

/// The schema version this server writes.
pub const CURRENT: i32 = 5;

/// The schema (same tables as SQLite). Run by
/// [`prepare`] in one transaction under an advisory lock,
/// so instances starting together do not race on `CREATE … IF NOT EXISTS`
/// or on a migration.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id            text PRIMARY KEY,
    tenant        text NOT NULL,
    view          text NOT NULL,
    version       bigint NOT NULL,
    live          boolean NOT NULL,
    expires_at_ms double precision NOT NULL,
    kind          text,
    input         text,
    -- The lifecycle (lifecycle.rs): the current attempt's lease, and when
    -- the sweeper must look at the task next (not the TTL).
    lease         text,
    due_at_ms     double precision,
    -- The batch it is an item of (store/batches.rs), its place in it, and
    -- the batch cursor of its last change.
    batch_id      text,
    batch_index   bigint,
    batch_seq     bigint,
    -- The work queue (store/work.rs): when the task was last queued, on
    -- the server's clock; NULL unless it is queued.
    queued_at_ms  double precision
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (expires_at_ms) WHERE live;
-- The work queue (store/work.rs): per tenant and kind, oldest first.
CREATE INDEX IF NOT EXISTS tasks_queue ON tasks (tenant, (coalesce(kind, '')), queued_at_ms)
    WHERE queued_at_ms IS NOT NULL;
-- Attempts holding a lease, per kind: a kind's `max-running` limit.
CREATE INDEX IF NOT EXISTS tasks_leased ON tasks (kind) WHERE live AND lease IS NOT NULL;
-- A kind's rate limit across claims and instances (store/work.rs).
CREATE TABLE IF NOT EXISTS work_rates (
    kind   text PRIMARY KEY,
    tat_ms double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_lifecycle_due ON tasks (due_at_ms)
    WHERE live AND due_at_ms IS NOT NULL;
-- Each tenant's open tasks, for the `max-open-tasks` quota (quotas/):
-- only live rows. No schema version of its own: an older server keeps it
-- up to date anyway. Built at the first start of this version, which
-- holds the table's writes for as long as that takes on a large table.
CREATE INDEX IF NOT EXISTS tasks_open ON tasks (tenant) WHERE live;
CREATE TABLE IF NOT EXISTS history (
    task_id text NOT NULL,
    version bigint NOT NULL,
    event   text NOT NULL,
    -- The batch cursor the entry was written at (items of a batch only).
    batch_seq bigint,
    PRIMARY KEY (task_id, version)
);
-- A batch: its owner, how many items, and its cursor (`seq`, raised once
-- by every transaction that appends history to one of its items, under
-- the row's lock: see postgres/batches.rs).
CREATE TABLE IF NOT EXISTS batches (
    id            text PRIMARY KEY,
    tenant        text NOT NULL,
    size          bigint NOT NULL,
    seq           bigint NOT NULL,
    created_at_ms double precision NOT NULL
);
-- A batch's items changed after a cursor; and its open items, counted
-- from the index alone.
CREATE INDEX IF NOT EXISTS tasks_batch ON tasks (batch_id, batch_seq)
    WHERE batch_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_batch_open ON tasks (batch_id)
    WHERE batch_id IS NOT NULL AND live;
-- A remembered callback id names the history entry holding its event;
-- `event` only when the history holds another one (see callback_ref.rs).
-- Keyed by (tenant, callback id) hashed: one task per callback id and
-- tenant, and both lookups, in one index (callback_ids.rs, which also
-- brings an older table to this layout).
CREATE TABLE IF NOT EXISTS callbacks (
    key         bytea NOT NULL,
    task_id     text NOT NULL,
    callback_id text NOT NULL,
    version     bigint,
    event       text,
    tenant      text,
    CONSTRAINT callbacks_tenant_callback_id PRIMARY KEY (key),
    CONSTRAINT callbacks_event_once CHECK ((version IS NULL) <> (event IS NULL))
);
CREATE TABLE IF NOT EXISTS idempotency (
    tenant  text NOT NULL,
    key     text NOT NULL,
    request text NOT NULL,
    task_id text NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE IF NOT EXISTS deliveries (
    tenant  text NOT NULL,
    key     text NOT NULL,
    receipt text NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE IF NOT EXISTS outbox (
    seq             bigserial PRIMARY KEY,
    tenant          text NOT NULL,
    key             text NOT NULL UNIQUE,
    task_id         text NOT NULL,
    state           text NOT NULL,
    at_ms           double precision NOT NULL,
    sent            boolean NOT NULL DEFAULT false,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_ms double precision NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_tenant ON outbox (tenant, seq);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (next_attempt_ms) WHERE NOT sent;
";

/// Serializes schema work across instances (any fixed id).
const LOCK: i64 = 7_401_551_000_000_000_001;

/// What [`prepare`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared {
    /// The version the database had (0: an empty database).
    pub from: i32,
    /// Callback rows the migration turned into references to history.
    pub callbacks_referenced: u64,
}

/// Brings the database to [`CURRENT`]; `schema` is the current
/// `CREATE … IF NOT EXISTS` script.
pub async fn prepare(client: &mut Object, schema: &str) -> Result<Prepared, String> {
    let fail = |e: tokio_postgres::Error| match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    };
    let tx = client.transaction().await.map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await
        .map_err(fail)?;
    let row = tx
        .query_one(
            "SELECT to_regclass('taskwire_schema') IS NOT NULL,
                    to_regclass('callbacks') IS NOT NULL",
            &[],
        )
        .await
        .map_err(fail)?;
    let (versioned, has_callbacks): (bool, bool) = (row.get(0), row.get(1));
    let from = if versioned {
        tx.query_opt("SELECT version FROM taskwire_schema", &[])
            .await
            .map_err(fail)?
            .map_or(0, |r| r.get::<_, i32>(0))
    } else if has_callbacks {
        1
    } else {
        0
    };
    if from > CURRENT {
        return Err(format!(
            "schema version {from} was written by a newer taskwire-server \
             (this one knows versions up to {CURRENT}); run that version or newer"
        ));
    }
    let mut callbacks_referenced = 0;
    if (1..3).contains(&from) {
        tx.batch_execute(
            "ALTER TABLE tasks ADD COLUMN IF NOT EXISTS lease text,
                              ADD COLUMN IF NOT EXISTS due_at_ms double precision",
        )
        .await
        .map_err(fail)?;
    }
    if (1..4).contains(&from) {
        // Before the script: its indexes name these columns.
        tx.batch_execute(
            "ALTER TABLE tasks ADD COLUMN IF NOT EXISTS batch_id text,
                              ADD COLUMN IF NOT EXISTS batch_index bigint,
                              ADD COLUMN IF NOT EXISTS batch_seq bigint;
             ALTER TABLE history ADD COLUMN IF NOT EXISTS batch_seq bigint",
        )
        .await
        .map_err(fail)?;
    }
    if (1..5).contains(&from) {
        // The queue: every task queued now joins it.
        tx.batch_execute(
            "ALTER TABLE tasks ADD COLUMN IF NOT EXISTS queued_at_ms double precision;
             UPDATE tasks SET queued_at_ms = extract(epoch from now()) * 1000
             WHERE live AND view::jsonb ->> 'state' = 'queued'",
        )
        .await
        .map_err(fail)?;
    }
    if from == 1 {
        callbacks_referenced = callbacks_1_to_2(&tx).await.map_err(fail)?;
    }
    tx.batch_execute(schema).await.map_err(fail)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS taskwire_schema (
             only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
             version  integer NOT NULL
         )",
    )
    .await
    .map_err(fail)?;
    tx.execute(
        "INSERT INTO taskwire_schema (version) VALUES ($1)
         ON CONFLICT (only_row) DO UPDATE SET version = excluded.version",
        &[&CURRENT],
    )
    .await
    .map_err(fail)?;
    tx.commit().await.map_err(fail)?;
    Ok(Prepared {
        from,
        callbacks_referenced,
    })
}

/// Schema 1 → 2, in place (indexes and grants stay): each callback row
/// points at the earliest history entry of its task with the same event
/// text (both were the same `to_json` of one event, so equal text means
/// an equal event); rows without one (expiries) keep their event.
async fn callbacks_1_to_2(
    tx: &deadpool_postgres::Transaction<'_>,
) -> Result<u64, tokio_postgres::Error> {
    tx.batch_execute(
        "ALTER TABLE callbacks ADD COLUMN version bigint, ALTER COLUMN event DROP NOT NULL",
    )
    .await?;
    let n = tx
        .execute(
            "UPDATE callbacks c SET version = m.version, event = NULL
             FROM (SELECT c.task_id, c.callback_id, min(h.version) AS version
                   FROM callbacks c
                   JOIN history h ON h.task_id = c.task_id AND h.event = c.event
                   GROUP BY c.task_id, c.callback_id) m
             WHERE c.task_id = m.task_id AND c.callback_id = m.callback_id",
            &[],
        )
        .await?;
    tx.batch_execute(
        "ALTER TABLE callbacks ADD CONSTRAINT callbacks_event_once
             CHECK ((version IS NULL) <> (event IS NULL))",
    )
    .await?;
    Ok(n)
}

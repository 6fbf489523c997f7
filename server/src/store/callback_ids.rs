//! One callback id, one task: a `webhook-id` the tenant already used on
//! one task is refused on its other tasks (PROTOCOL.md §Executor callback,
//! `callback-id-reused-for-other-task`).
//!
//! Core scopes callback ids to their task (vector
//! `fix-02-callback-ids-scoped-to-task`: the same id on another task is
//! another callback), and that stays core's rule. The server adds this one
//! at its boundary: an executor's ids are unique message ids (Standard
//! Webhooks), so an id seen on another task is a replay or a bug, never a
//! new callback. Only remembered ids count (those whose event changed the
//! task, core fix 1), as for redeliveries.
//!
//! Per tenant, not global: a tenant's executor must not be able to burn,
//! or probe for, another tenant's ids.
//!
//! **Schema.** `callbacks` has a `tenant` column and a UNIQUE index on
//! `(tenant, callback_id)`: the index makes the rule atomic (two
//! callbacks racing the same id on two tasks, on any instance, cannot both
//! commit) and serves the lookup. SQLite declares both in its schema (a
//! file of schema 1 gets them when `sqlite_schema.rs` rebuilds
//! `callbacks`, keeping the tenants its rows had); PostgreSQL adds them
//! with [`POSTGRES`], in place. Rows written before the column existed
//! keep `tenant` NULL: UNIQUE ignores NULLs, so they are simply not
//! checked.

use rusqlite::{params, Connection, OptionalExtension};

use super::StoreError;

/// The index's name (PostgreSQL reports it on a unique violation).
pub const INDEX: &str = "callbacks_tenant_callback_id";

/// PostgreSQL: the column and the index, idempotent; part of the schema
/// script `postgres_schema::prepare` runs under its advisory lock
/// (instances may start together).
pub const POSTGRES: &str = "
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS tenant text;
CREATE UNIQUE INDEX IF NOT EXISTS callbacks_tenant_callback_id ON callbacks (tenant, callback_id);
";

/// PostgreSQL: which (tenant, callback id) pairs are remembered on some
/// task, read by exact pairs.
pub const POSTGRES_OWNERS: &str = "
SELECT c.tenant, c.callback_id
FROM unnest($1::text[], $2::text[]) AS k(tenant, callback_id)
JOIN callbacks c ON c.tenant = k.tenant AND c.callback_id = k.callback_id";

/// SQLite: the task `callback_id` is remembered on for `tenant`, if any.
pub fn sqlite_owner(
    tx: &Connection,
    tenant: &str,
    callback_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(tx
        .prepare_cached("SELECT task_id FROM callbacks WHERE tenant = ?1 AND callback_id = ?2")?
        .query_row(params![tenant, callback_id], |r| r.get(0))
        .optional()?)
}

/// Whether a PostgreSQL error is a lost race for a callback id: another
/// transaction committed the same (tenant, id) first. The batch is run
/// again and then sees that row.
pub fn is_lost_race(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        *db.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            && db.constraint() == Some(INDEX)
    })
}

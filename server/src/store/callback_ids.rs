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
//! **Schema: one B-tree, keyed by the tenant's id.** `callbacks` is keyed
//! by `key`, 16 bytes naming (tenant, callback id) ([`tenant_key`]). That
//! one primary key makes the rule atomic (two callbacks racing the same id
//! on two tasks, on any instance, cannot both commit) and serves both
//! lookups: the server knows the tenant of every callback, so "is this id
//! remembered on this task" is the row at the key whose `task_id` and
//! `callback_id` are this task's and this id, and "on another task" is
//! any other row at the key. Before, the table was keyed by
//! `(task_id, callback_id)` with a UNIQUE index on `(tenant, callback_id)`
//! beside it: the index repeated the ids and the task id, 514 of the
//! 2,605 bytes per task of `taskwire-load fill` (server/README.md,
//! "Storage per task").
//!
//! Rows from before `callbacks.tenant` existed have no tenant and were
//! never checked across tasks: their key is [`task_key`] (the task's id
//! instead of the tenant, another domain), so they are found on their task
//! only, as before. Every lookup tries both keys of the callback.
//!
//! **Why 16 bytes of SHA-256 are safe here.** The key only finds the row;
//! a row counts as this callback's only if its stored `task_id` and
//! `callback_id` are equal too, so a collision can never make an id look
//! remembered with another one's event. A colliding key of another id
//! makes the new id count as used elsewhere: it is refused, never applied
//! twice (replays stay refused whatever the hash does). Finding two ids of
//! one tenant with equal keys takes about 2^64 SHA-256 evaluations and
//! only refuses that tenant's own callback; matching another tenant's
//! existing key is a second preimage (2^128). By accident, 10^12 ids
//! collide with probability below 10^-14.

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use super::StoreError;

/// The primary key's name. PostgreSQL reports it on a unique violation;
/// it kept the name of the UNIQUE index it replaced, so a database's
/// errors read the same.
pub const INDEX: &str = "callbacks_tenant_callback_id";

/// The key of a tenant's callback id: the first 16 bytes of SHA-256 of
/// `0x01`, the tenant's length (4 bytes, big-endian), the tenant and the
/// id (UTF-8). The length keeps ("ab", "c") apart from ("a", "bc").
/// `taskwire_callback_key` ([`POSTGRES`]) computes the same bytes.
pub fn tenant_key(tenant: &str, callback_id: &str) -> [u8; 16] {
    key(1, tenant, callback_id)
}

/// The key of a row from before `callbacks.tenant`: as [`tenant_key`],
/// with `0x02` and the task's id instead of the tenant.
pub fn task_key(task_id: &str, callback_id: &str) -> [u8; 16] {
    key(2, task_id, callback_id)
}

fn key(domain: u8, scope: &str, callback_id: &str) -> [u8; 16] {
    let digest = Sha256::new()
        .chain_update([domain])
        .chain_update((scope.len() as u32).to_be_bytes())
        .chain_update(scope)
        .chain_update(callback_id)
        .finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// SQLite: the remembered callback's event text (`coalesce` of the row's
/// and its history entry's), found by either key of the callback.
pub const SQLITE_SEEN: &str = "
SELECT coalesce(c.event, h.event) FROM callbacks c
LEFT JOIN history h ON h.task_id = c.task_id AND h.version = c.version
WHERE c.key IN (?1, ?2) AND c.task_id = ?3 AND c.callback_id = ?4";

/// SQLite: whether the tenant's id ([`tenant_key`]) is remembered on some
/// task (asked only when it is not this task's: see the module's note on
/// collisions).
pub fn sqlite_owned(tx: &Connection, key: &[u8; 16]) -> Result<bool, StoreError> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM callbacks WHERE key = ?1")?
        .query_row(params![&key[..]], |_| Ok(()))
        .optional()?
        .is_some())
}

/// SQLite: inserts a remembered id (`tenant` the callback's).
pub const SQLITE_INSERT: &str = "
INSERT INTO callbacks (key, task_id, callback_id, version, event, tenant)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// SQLite, on open: copies the rows `select` reads (task id, callback id,
/// version, event, tenant) into the keyed table, each keyed by its tenant
/// or, without one, by its task. Keys are computed here: SQLite has no
/// SHA-256 of its own.
pub fn sqlite_copy_keyed(tx: &Connection, select: &str) -> rusqlite::Result<usize> {
    type Row = (String, String, Option<i64>, Option<String>, Option<String>);
    let mut read = tx.prepare(select)?;
    let rows = read.query_map([], |r| -> rusqlite::Result<Row> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })?;
    let mut insert = tx.prepare(SQLITE_INSERT)?;
    let mut copied = 0;
    for row in rows {
        let (task_id, callback_id, version, event, tenant) = row?;
        let key = match &tenant {
            Some(tenant) => tenant_key(tenant, &callback_id),
            None => task_key(&task_id, &callback_id),
        };
        copied += insert.execute(params![
            &key[..],
            task_id,
            callback_id,
            version,
            event,
            tenant
        ])?;
    }
    Ok(copied)
}

/// PostgreSQL: the key function (the bytes of [`tenant_key`] for domain
/// 1, [`task_key`] for 2; an inlined SQL function) and the layout step,
/// idempotent; part of the schema script `postgres_schema::prepare` runs
/// under its advisory lock (instances may start together). A table of the
/// old layout gains `key` (each row's from its tenant, or from its task
/// where it has none) and trades its primary key and UNIQUE index for
/// the one on `key`, in place.
pub const POSTGRES: &str = "
CREATE OR REPLACE FUNCTION taskwire_callback_key(domain integer, scope text, callback_id text)
RETURNS bytea LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT substring(sha256(set_byte('\\x00'::bytea, 0, domain)
        || int4send(octet_length(convert_to(scope, 'UTF8')))
        || convert_to(scope, 'UTF8') || convert_to(callback_id, 'UTF8')) from 1 for 16)
$$;
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS tenant text;
DO $$
DECLARE
    old_key name;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                   WHERE attrelid = 'callbacks'::regclass AND attname = 'key'
                     AND NOT attisdropped) THEN
        ALTER TABLE callbacks ADD COLUMN key bytea;
        UPDATE callbacks SET key = CASE WHEN tenant IS NULL
            THEN taskwire_callback_key(2, task_id, callback_id)
            ELSE taskwire_callback_key(1, tenant, callback_id) END;
        DROP INDEX IF EXISTS callbacks_tenant_callback_id;
        -- The (task_id, callback_id) key, whatever it was named.
        SELECT conname INTO old_key FROM pg_constraint
        WHERE conrelid = 'callbacks'::regclass AND contype = 'p';
        IF old_key IS NOT NULL THEN
            EXECUTE format('ALTER TABLE callbacks DROP CONSTRAINT %I', old_key);
        END IF;
        ALTER TABLE callbacks ALTER COLUMN key SET NOT NULL,
            ADD CONSTRAINT callbacks_tenant_callback_id PRIMARY KEY (key);
    END IF;
END
$$;
";

/// PostgreSQL: which (tenant, callback id) pairs are remembered on some
/// task, read by exact keys.
pub const POSTGRES_OWNERS: &str = "
SELECT k.tenant, k.callback_id
FROM unnest($1::text[], $2::text[]) AS k(tenant, callback_id)
JOIN callbacks c ON c.key = taskwire_callback_key(1, k.tenant, k.callback_id)";

/// Whether a PostgreSQL error is a lost race for a callback id: another
/// transaction committed the same (tenant, id) first. The batch is run
/// again and then sees that row.
pub fn is_lost_race(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        *db.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            && db.constraint() == Some(INDEX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_tenants_ids_and_domains_apart() {
        assert_eq!(tenant_key("demo", "cb-1"), tenant_key("demo", "cb-1"));
        assert_ne!(tenant_key("demo", "cb-1"), tenant_key("demo", "cb-2"));
        assert_ne!(tenant_key("ab", "c"), tenant_key("a", "bc"));
        assert_ne!(tenant_key("demo", "cb-1"), task_key("demo", "cb-1"));
    }

    /// Pinned: PostgreSQL's `taskwire_callback_key` must give these very
    /// bytes (tests/postgres_callback_keys.rs checks it against them).
    #[test]
    fn the_key_is_sha256_of_domain_length_scope_and_id() {
        let mut input = vec![1u8, 0, 0, 0, 4];
        input.extend_from_slice(b"democb-1");
        let digest = Sha256::digest(&input);
        assert_eq!(tenant_key("demo", "cb-1")[..], digest[..16]);
    }
}

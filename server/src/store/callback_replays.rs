//! A signed callback request is used once (PROTOCOL.md §Executor
//! callback, "Secrets and binding").
//!
//! A callback id is remembered on its task only when its event changed
//! the task (core fix 1: a `succeed` that arrived before its `start` must
//! still apply when it is sent again). Left there, a signed request that
//! changed nothing (a `fail` while the task is queued) could be captured
//! and replayed, byte for byte, after a `start`, and would apply. So every
//! request whose id is not remembered is remembered itself, by what names
//! its exact signed bytes: (tenant, `webhook-id`, `webhook-timestamp`,
//! SHA-256 of the body). Nobody without the secret can change any of them
//! and keep the signature. The same request judged again (while its id is
//! still not remembered on the task) is a duplicate callback and changes
//! nothing. A legitimate resend is signed again, with a fresh
//! `webhook-timestamp`: another request, judged as before, so fix 1
//! holds. (A resend of the very same bytes within the same second is the
//! same request, and a duplicate.)
//!
//! The body's digest is part of the key, not only (tenant, id,
//! timestamp): an executor may use an id that changed nothing on one task
//! again on another one (or with another event) within the same second,
//! and that is another request, not a replay.
//!
//! A row is needed only while its timestamp could still be accepted
//! ([`TOLERANCE_SECS`] either way of the server's clock): the sweeper
//! deletes older ones ([`forget_before`]), with [`MARGIN_SECS`] for clocks
//! of several instances that disagree a little. Each row is a few tens of
//! bytes plus the id; heartbeats that change nothing write one each.
//!
//! **Schema.** A table of its own, created by both stores' schema scripts
//! (`CREATE TABLE IF NOT EXISTS`: an older file or database gets it when
//! it is opened, nothing else changes, so no schema version of its own).

use crate::signature::TOLERANCE_SECS;

/// Extra seconds a row is kept past the tolerance: the clocks of several
/// instances on one PostgreSQL database may disagree by this much.
pub const MARGIN_SECS: i64 = 60;

/// The oldest `webhook-timestamp` that must still be remembered at
/// `now_ms`: rows signed before it are deleted.
pub fn forget_before(now_ms: f64) -> i64 {
    (now_ms / 1000.0).floor() as i64 - TOLERANCE_SECS - MARGIN_SECS
}

/// The table (both stores): the primary key is the request; the index on
/// `signed_at` serves the sweeper's delete.
pub const SQLITE: &str = "
CREATE TABLE IF NOT EXISTS callback_replays (
    tenant      TEXT NOT NULL,
    callback_id TEXT NOT NULL,
    signed_at   INTEGER NOT NULL,
    body_sha256 BLOB NOT NULL,
    PRIMARY KEY (tenant, callback_id, signed_at, body_sha256)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS callback_replays_signed_at ON callback_replays (signed_at);
";

/// PostgreSQL: as [`SQLITE`]; part of the schema script
/// `postgres_schema::prepare` runs under its advisory lock.
pub const POSTGRES: &str = "
CREATE TABLE IF NOT EXISTS callback_replays (
    tenant      text NOT NULL,
    callback_id text NOT NULL,
    signed_at   bigint NOT NULL,
    body_sha256 bytea NOT NULL,
    PRIMARY KEY (tenant, callback_id, signed_at, body_sha256)
);
CREATE INDEX IF NOT EXISTS callback_replays_signed_at ON callback_replays (signed_at);
";

/// The sweeper's delete, SQLite: the index on `signed_at` serves it.
pub const SQLITE_FORGET: &str = "DELETE FROM callback_replays WHERE signed_at < ?1";
/// PostgreSQL's spelling of [`SQLITE_FORGET`].
pub const POSTGRES_FORGET: &str = "DELETE FROM callback_replays WHERE signed_at < $1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_kept_while_their_timestamp_could_be_accepted_plus_the_margin() {
        let now_ms = 1_000_000_000.0 * 1000.0 + 999.0;
        assert_eq!(
            forget_before(now_ms),
            1_000_000_000 - TOLERANCE_SECS - MARGIN_SECS
        );
    }
}

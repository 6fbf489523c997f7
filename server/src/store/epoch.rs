//! The epoch: the identity of the store's history (PROTOCOL.md §Epoch).
//!
//! Versions only compare within one history. A database that is new, or
//! restored from a backup, answers with versions that may be lower than a
//! client holds; without a way to tell, the client's mirror refuses them
//! as stale for ever. So the database holds an epoch, 128 random bits in
//! hex, in the one-row table `taskwire_epoch`, and every task view and
//! answer carries it:
//! - a new database draws one on its first open ([`sqlite_open`],
//!   [`postgres_open`]); a database of an earlier server gets one the
//!   same way (its clients hold no epoch and learn it);
//! - a restore is marked by the operator, `taskwire-server --data …
//!   --mark-restored` ([`mark_restored`]): a new epoch is drawn and the
//!   command exits. A one-shot command, not a setting applied at start:
//!   a start flag left in a service file would draw a new epoch at every
//!   restart (and, on PostgreSQL, at every instance's start), making
//!   every client start over each time, silently.
//!
//! The store reads the epoch once, when it opens: mark a restore while no
//! instance runs (a restore replaces the database under them anyway).
//!
//! The table is additive and needs no schema version: an earlier server
//! ignores it (and sends no epoch, which clients judge as before), so a
//! file stays readable by both.

use rusqlite::{Connection, OpenFlags, OptionalExtension};

/// The epoch table, SQLite dialect (appended to the schema script).
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS taskwire_epoch (
    only_row    INTEGER PRIMARY KEY CHECK (only_row = 1),
    epoch       TEXT NOT NULL,
    -- 'created' (first open) or 'restored' (--mark-restored), and when.
    cause       TEXT NOT NULL,
    drawn_at_ms REAL NOT NULL
);
";

/// The epoch table, PostgreSQL dialect (appended to the schema script).
pub const POSTGRES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS taskwire_epoch (
    only_row    boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    epoch       text NOT NULL,
    cause       text NOT NULL,
    drawn_at_ms double precision NOT NULL
);
";

/// What `--mark-restored` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// The epoch the data had (`None`: it had none, an earlier server's).
    pub before: Option<String>,
    /// The epoch drawn.
    pub after: String,
}

/// A new epoch: 128 random bits, 32 lowercase hex digits. Random, not a
/// counter or a clock: two restores of one backup, or two databases made
/// at the same moment, must not share one.
pub fn new_epoch() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("random epoch: {e}"))?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    Ok(bytes
        .iter()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]])
        .map(char::from)
        .collect())
}

fn now_ms() -> f64 {
    crate::clock::now_ms()
}

/// The SQLite file's epoch, drawn on the first open. Runs after the
/// schema script created the table.
pub fn sqlite_open(conn: &Connection, path: &str) -> Result<String, String> {
    let fail = |e: rusqlite::Error| format!("{path}: epoch: {e}");
    conn.execute(
        "INSERT INTO taskwire_epoch (only_row, epoch, cause, drawn_at_ms)
         VALUES (1, ?1, 'created', ?2) ON CONFLICT (only_row) DO NOTHING",
        rusqlite::params![new_epoch()?, now_ms()],
    )
    .map_err(fail)?;
    conn.query_row("SELECT epoch FROM taskwire_epoch", [], |r| r.get(0))
        .map_err(fail)
}

/// Draws a new epoch for the SQLite file `path`, which must exist and be
/// a taskwire database: a mistyped `--data` must not create an empty one.
pub fn sqlite_mark_restored(path: &std::path::Path) -> Result<Marked, String> {
    let shown = path.display().to_string();
    let fail = |e: rusqlite::Error| format!("{shown}: {e}");
    if !path.is_file() {
        return Err(format!(
            "{shown}: no such database (--mark-restored marks an existing one)"
        ));
    }
    let mut conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(|e| format!("{shown}: {e}"))?;
    conn.execute_batch("PRAGMA busy_timeout = 5000;")
        .map_err(fail)?;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(fail)?;
    let is_taskwire = tx
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tasks'",
            [],
            |_| Ok(()),
        )
        .optional()
        .map_err(fail)?
        .is_some();
    if !is_taskwire {
        return Err(format!("{shown}: not a taskwire database (no tasks table)"));
    }
    tx.execute_batch(SQLITE_SCHEMA).map_err(fail)?;
    let before: Option<String> = tx
        .query_row("SELECT epoch FROM taskwire_epoch", [], |r| r.get(0))
        .optional()
        .map_err(fail)?;
    let after = new_epoch()?;
    tx.execute(
        "INSERT INTO taskwire_epoch (only_row, epoch, cause, drawn_at_ms)
         VALUES (1, ?1, 'restored', ?2)
         ON CONFLICT (only_row) DO UPDATE SET epoch = excluded.epoch,
             cause = excluded.cause, drawn_at_ms = excluded.drawn_at_ms",
        rusqlite::params![after, now_ms()],
    )
    .map_err(fail)?;
    tx.commit().map_err(fail)?;
    Ok(Marked { before, after })
}

fn pg_fail(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("epoch: {}", db.message()),
        None => format!("epoch: {e}"),
    }
}

/// The database's epoch, drawn by the first instance that opens it (the
/// others, racing, find that one: the insert waits on the row's key).
pub async fn postgres_open(client: &tokio_postgres::Client) -> Result<String, String> {
    client
        .execute(
            "INSERT INTO taskwire_epoch (epoch, cause, drawn_at_ms)
             VALUES ($1, 'created', $2) ON CONFLICT (only_row) DO NOTHING",
            &[&new_epoch()?, &now_ms()],
        )
        .await
        .map_err(pg_fail)?;
    let row = client
        .query_one("SELECT epoch FROM taskwire_epoch", &[])
        .await
        .map_err(pg_fail)?;
    Ok(row.get(0))
}

/// Draws a new epoch for the database `client` is connected to, which
/// must hold taskwire's tables.
pub async fn postgres_mark_restored(client: &mut tokio_postgres::Client) -> Result<Marked, String> {
    let tx = client.transaction().await.map_err(pg_fail)?;
    let is_taskwire: bool = tx
        .query_one("SELECT to_regclass('tasks') IS NOT NULL", &[])
        .await
        .map_err(pg_fail)?
        .get(0);
    if !is_taskwire {
        return Err("not a taskwire database (no tasks table)".into());
    }
    tx.batch_execute(POSTGRES_SCHEMA).await.map_err(pg_fail)?;
    let before: Option<String> = tx
        .query_opt("SELECT epoch FROM taskwire_epoch FOR UPDATE", &[])
        .await
        .map_err(pg_fail)?
        .map(|r| r.get(0));
    let after = new_epoch()?;
    tx.execute(
        "INSERT INTO taskwire_epoch (epoch, cause, drawn_at_ms) VALUES ($1, 'restored', $2)
         ON CONFLICT (only_row) DO UPDATE SET epoch = excluded.epoch,
             cause = excluded.cause, drawn_at_ms = excluded.drawn_at_ms",
        &[&after, &now_ms()],
    )
    .await
    .map_err(pg_fail)?;
    tx.commit().await.map_err(pg_fail)?;
    Ok(Marked { before, after })
}

/// `taskwire-server --data … --mark-restored`: draws a new epoch for the
/// data `config.data` names, without starting a server.
pub async fn mark_restored(config: &crate::Config) -> Result<Marked, String> {
    match config.postgres_url() {
        Some(url) => {
            let shown = super::postgres::redact(url);
            let (mut client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| format!("--data {shown}: {e}"))?;
            let driver = tokio::spawn(connection);
            let marked = postgres_mark_restored(&mut client)
                .await
                .map_err(|e| format!("--data {shown}: {e}"));
            drop(client);
            let _ = driver.await;
            marked
        }
        None => sqlite_mark_restored(&config.data.join(super::sqlite::FILE_NAME)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_are_128_random_bits_in_hex() {
        let a = new_epoch().unwrap();
        let b = new_epoch().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[test]
    fn marking_a_missing_or_foreign_file_is_refused_and_creates_nothing() {
        let dir = std::env::temp_dir().join(format!("tw-epoch-{}", new_epoch().unwrap()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("taskwire.sqlite3");
        let err = sqlite_mark_restored(&path).unwrap_err();
        assert!(err.contains("no such database"), "{err}");
        assert!(!path.exists());
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE other (x)")
            .unwrap();
        let err = sqlite_mark_restored(&path).unwrap_err();
        assert!(err.contains("not a taskwire database"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

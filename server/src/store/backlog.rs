//! The notify outbox's backlog, read for `/metrics` (one indexed query per
//! scrape: `outbox_pending` covers the undelivered rows). Quarantined rows
//! are left out, as the sender leaves them out: they wait for an operator,
//! not for a receiver.

use super::quarantine::not_quarantined;
use super::StoreError;

/// What the outbox still has to deliver.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OutboxBacklog {
    /// Rows no receiver has acknowledged yet.
    pub undelivered: u64,
    /// The event time (`atMs`) of the oldest of them.
    pub oldest_at_ms: Option<f64>,
}

fn query(sent: &str, key: &str) -> String {
    format!(
        "SELECT count(*), min(at_ms) FROM outbox WHERE {sent} AND {}",
        not_quarantined("outbox", key)
    )
}

/// The backlog of a SQLite store.
pub(super) fn sqlite(conn: &rusqlite::Connection) -> Result<OutboxBacklog, StoreError> {
    let sql = query("sent = 0", "outbox.seq");
    let (count, oldest): (i64, Option<f64>) = conn
        .prepare_cached(&sql)?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(OutboxBacklog {
        undelivered: u64::try_from(count).unwrap_or(0),
        oldest_at_ms: oldest,
    })
}

/// The backlog of a PostgreSQL store.
pub(super) async fn postgres(
    client: &deadpool_postgres::Object,
) -> Result<OutboxBacklog, StoreError> {
    let sql = query("NOT sent", "outbox.seq::text");
    let stmt = client.prepare_cached(&sql).await?;
    let row = client.query_one(&stmt, &[]).await?;
    let count: i64 = row.try_get(0)?;
    let oldest: Option<f64> = row.try_get(1)?;
    Ok(OutboxBacklog {
        undelivered: u64::try_from(count).unwrap_or(0),
        oldest_at_ms: oldest,
    })
}

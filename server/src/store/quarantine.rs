//! Quarantine: where a sweep puts a row it cannot act on, so that one bad
//! row never stops the sweep for every other row.
//!
//! A sweep (the TTL sweeper; the notify sender's outbox read; later the
//! lease and deadline sweeps) reads due rows in batches. Before this, one
//! row whose JSON did not parse failed the whole batch, on every tick, and
//! no task behind it ever expired. Now each row is handled on its own:
//!
//! 1. The due query leaves out quarantined rows ([`not_quarantined`]).
//! 2. A row that does not parse, disagrees with itself (its view names
//!    another id, a live row holds a terminal view) or breaks a constraint
//!    when written is rolled back alone and gets a `quarantine` row: the
//!    table and key it lives under, the error, when. The row itself is
//!    left exactly as it was: nothing is deleted or rewritten.
//! 3. The sweep goes on with the other rows; its answer lists what it
//!    quarantined ([`Quarantined`]), and the caller reports each one once
//!    (a stderr line and the `quarantinedRows` counter,
//!    [`crate::stats::Stats::quarantined`]). Once, because the quarantine
//!    insert only succeeds once (its primary key), and the row is not read
//!    again, on any instance, after any restart.
//!
//! A storage failure (disk full, lost connection) is not a bad row: it
//! stops the sweep, nothing is quarantined, and the next tick retries.
//!
//! An operator who has repaired a row deletes its `quarantine` row; the
//! next sweep picks it up again.

/// A row set aside by a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantined {
    /// The table the row is in (`tasks`, `outbox`).
    pub table: &'static str,
    /// Its key there (a task id, an outbox `seq`).
    pub key: String,
    /// Why: the field that failed and how.
    pub error: String,
}

/// The quarantine table, SQLite dialect. `row_key` has no declared type on
/// purpose: it keeps the key exactly as the row has it (SQLite lets a
/// corrupted `tasks.id` be a blob), so [`not_quarantined`]'s comparison
/// always matches the row it set aside.
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS quarantine (
    source  TEXT NOT NULL,
    row_key NOT NULL,
    error   TEXT NOT NULL,
    at_ms   REAL NOT NULL,
    PRIMARY KEY (source, row_key)
) WITHOUT ROWID;
";

/// The quarantine table, PostgreSQL dialect (run inside the schema
/// transaction, under its advisory lock).
pub const POSTGRES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS quarantine (
    source  text NOT NULL,
    row_key text NOT NULL,
    error   text NOT NULL,
    at_ms   double precision NOT NULL,
    PRIMARY KEY (source, row_key)
);
";

/// The condition a due query adds so that it skips quarantined rows:
/// `source` is the table, `key` the SQL expression of the row's key
/// (`tasks.id`; `outbox.seq`, cast to text in PostgreSQL). Both dialects
/// read it the same way.
pub fn not_quarantined(source: &str, key: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM quarantine q WHERE q.source = '{source}' AND q.row_key = {key})"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_condition_names_the_table_and_key() {
        assert_eq!(
            super::not_quarantined("tasks", "t.id"),
            "NOT EXISTS (SELECT 1 FROM quarantine q WHERE q.source = 'tasks' AND q.row_key = t.id)"
        );
    }
}

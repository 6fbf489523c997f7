//! What the SQLite file must be before the server serves from it: not an
//! empty file it would silently make a new database of, and not damaged.
//!
//! Why at start (issue 24, N6): SQLite finds a damaged page only when a
//! query reads it. Before, a server started on a damaged file served
//! what it could read and answered 500 to every write that touched the
//! bad page, for as long as it ran, with nothing to tell the operator
//! that a restore was due. And an existing file of 0 bytes (a copy or a
//! restore that failed, a truncated disk) opened as a new, empty
//! database: every task gone without a word. Both now stop the start with
//! a message that names the file and says what to do.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode};

/// What [`SqliteStore::open`](super::SqliteStore::open) checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartChecks {
    /// `--new-database`: an existing empty file may become a new database.
    pub new_database: bool,
    /// Run `PRAGMA quick_check` before serving (off with
    /// `--skip-integrity-check`, for a file too large to read at every
    /// start).
    pub integrity: bool,
}

impl Default for StartChecks {
    fn default() -> Self {
        StartChecks {
            new_database: false,
            integrity: true,
        }
    }
}

/// Refuses an existing 0-byte file unless `new_database`. A path that
/// does not exist yet is a first start: SQLite creates it, as before.
pub(super) fn refuse_empty(path: &Path, shown: &str, new_database: bool) -> Result<(), String> {
    let empty = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0);
    if !empty || new_database {
        return Ok(());
    }
    Err(format!(
        "{shown}: the file exists but is empty (0 bytes), so it holds no tasks; not starting, \
         since SQLite would silently make it a new, empty database. If it should hold your \
         tasks (a copy or restore that failed, a truncated disk), restore it from a backup \
         (server/README.md, \"Restoring from a backup\"); to start a new database in this \
         file, start once with --new-database (TASKWIRE_NEW_DATABASE=true)"
    ))
}

/// Errors `PRAGMA quick_check` reports at most (the message quotes them).
const REPORTED: usize = 5;

/// Reads every page of the file (`PRAGMA quick_check`: b-tree structure,
/// cell and record formats, free list; not the index-to-table agreement
/// `integrity_check` adds, which costs several times longer). Returns how
/// long it took, or the refusal naming the file.
pub(super) fn check_integrity(conn: &Connection, shown: &str) -> Result<Duration, String> {
    let started = Instant::now();
    let found: Result<Vec<String>, rusqlite::Error> = conn
        .prepare(&format!("PRAGMA quick_check({REPORTED})"))
        .and_then(|mut stmt| {
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        });
    match found {
        Ok(lines) if lines.len() == 1 && lines[0] == "ok" => Ok(started.elapsed()),
        Ok(lines) => Err(damaged(shown, &lines.join("; "))),
        Err(e) if is_damage(&e) => Err(damaged(shown, &e.to_string())),
        Err(e) => Err(format!("{shown}: integrity check: {e}")),
    }
}

/// SQLite's codes for a file whose bytes are not a sound database.
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// The refusal for a damaged file: what was found, and what to do.
fn damaged(shown: &str, found: &str) -> String {
    format!(
        "{shown}: the database file is damaged (PRAGMA quick_check: {found}); not starting, \
         so that no request reads or writes a damaged page. Stop every instance, move the \
         file (with its -wal and -shm) aside and keep it, restore it from your last backup \
         and run --mark-restored (server/README.md, \"Restoring from a backup\"); \
         `sqlite3 DAMAGED_FILE .recover` can salvage rows written since that backup. \
         --skip-integrity-check starts without this check (the damage stays)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_empty_file_is_refused_unless_a_new_database_is_asked_for() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.sqlite3");
        assert_eq!(refuse_empty(&path, "t", false), Ok(()), "a new path");
        std::fs::write(&path, b"").expect("empty file");
        let e = refuse_empty(&path, "t.sqlite3", false).expect_err("refused");
        assert!(
            e.starts_with("t.sqlite3: the file exists but is empty"),
            "{e}"
        );
        assert!(e.contains("--new-database"), "{e}");
        assert_eq!(refuse_empty(&path, "t", true), Ok(()));
    }

    #[test]
    fn a_file_that_is_not_a_database_is_damaged_and_the_message_says_restore() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.sqlite3");
        std::fs::write(&path, vec![0x5a_u8; 8192]).expect("garbage");
        let conn = Connection::open(&path).expect("open is lazy");
        let e = check_integrity(&conn, "t.sqlite3").expect_err("refused");
        assert!(
            e.starts_with("t.sqlite3: the database file is damaged"),
            "{e}"
        );
        assert!(e.contains("Restoring from a backup"), "{e}");
        let fresh = Connection::open(dir.path().join("new.sqlite3")).expect("open");
        assert!(check_integrity(&fresh, "new").is_ok());
    }
}

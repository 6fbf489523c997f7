//! What a SQLite error means for the caller: the storage is unavailable
//! for now (503 `storage-unavailable`: disk full, read-only, I/O error,
//! locked by another process, the file cannot be opened), the rows are
//! bad (a constraint broken, a column of the wrong type), or anything
//! else, a bug (500 `internal`).

use rusqlite::ErrorCode;

use crate::store::StoreError;

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        let message = e.to_string();
        match &e {
            rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
                code if unavailable(code) => StoreError::Unavailable(message),
                ErrorCode::ConstraintViolation => StoreError::Corrupt(message),
                _ => StoreError::Internal(message),
            },
            rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
            | rusqlite::Error::Utf8Error(..) => StoreError::Corrupt(message),
            _ => StoreError::Internal(message),
        }
    }
}

/// The result codes that say "not now" rather than "never": the same
/// statement can succeed once space is freed, the file is writable again,
/// another process lets go of its lock or the file can be opened. `BUSY`
/// reaches a caller only after the connection's 5 s `busy_timeout`, so it
/// means another process (a backup, an `sqlite3` shell) holds the lock.
fn unavailable(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::DiskFull
            | ErrorCode::ReadOnly
            | ErrorCode::SystemIoFailure
            | ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::CannotOpen
            | ErrorCode::FileLockingProtocolFailed
            | ErrorCode::PermissionDenied
            | ErrorCode::OutOfMemory
    )
}

#[cfg(test)]
mod tests {
    //! Each error comes from a real SQLite file, as the store meets it.
    //! Tests run as root, so file modes would not stop a write: these use
    //! SQLite's own limits and locks, which hold for root too.

    use rusqlite::Connection;

    use crate::error::ApiError;
    use crate::store::StoreError;

    fn db() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.sqlite3");
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT NOT NULL);",
        )
        .expect("schema");
        (dir, path)
    }

    fn error_of(result: rusqlite::Result<usize>) -> StoreError {
        StoreError::from(result.expect_err("the write must fail"))
    }

    fn is_unavailable(e: &StoreError) -> bool {
        matches!(e, StoreError::Unavailable(_))
    }

    #[test]
    fn a_full_database_is_unavailable_and_answers_503_with_retry_after() {
        let (_dir, path) = db();
        let conn = Connection::open(&path).expect("open");
        // The file may not grow past its current pages: SQLITE_FULL.
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .expect("page_count");
        conn.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |r| {
            r.get::<_, i64>(0)
        })
        .expect("max_page_count");
        let big = "x".repeat(64 * 1024);
        let e = error_of(conn.execute("INSERT INTO t VALUES ('a', ?1)", [&big]));
        assert!(is_unavailable(&e), "{e:?}");
        let api = ApiError::from(e);
        assert_eq!(api.status.as_u16(), 503);
        assert_eq!(api.code, "storage-unavailable");
        assert_eq!(
            api.retry_after,
            Some(crate::error::STORAGE_RETRY_AFTER_SECS)
        );
        assert!(api.message.contains("full"), "{}", api.message);
    }

    #[test]
    fn a_read_only_database_is_unavailable() {
        let (_dir, path) = db();
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch("PRAGMA query_only = 1")
            .expect("query_only");
        let e = error_of(conn.execute("INSERT INTO t VALUES ('a', 'b')", []));
        assert!(is_unavailable(&e), "{e:?}");
        // Opened read-only by the OS flags: the same.
        let ro = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open read-only");
        let e = error_of(ro.execute("INSERT INTO t VALUES ('a', 'b')", []));
        assert!(is_unavailable(&e), "{e:?}");
    }

    #[test]
    fn a_database_locked_by_another_process_is_unavailable() {
        let (_dir, path) = db();
        let holder = Connection::open(&path).expect("open");
        holder.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        let conn = Connection::open(&path).expect("open");
        conn.busy_timeout(std::time::Duration::ZERO)
            .expect("busy_timeout");
        let e = error_of(conn.execute("INSERT INTO t VALUES ('a', 'b')", []));
        assert!(is_unavailable(&e), "{e:?}");
    }

    #[test]
    fn a_file_that_cannot_be_opened_is_unavailable() {
        let (dir, _) = db();
        let missing = dir.path().join("gone").join("t.sqlite3");
        let e = StoreError::from(Connection::open(missing).expect_err("no such directory"));
        assert!(is_unavailable(&e), "{e:?}");
    }

    #[test]
    fn bugs_stay_internal_and_broken_constraints_are_corrupt() {
        let (_dir, path) = db();
        let conn = Connection::open(&path).expect("open");
        let e = error_of(conn.execute("INSERT INTO nope VALUES (1)", []));
        assert!(matches!(e, StoreError::Internal(_)), "{e:?}");
        assert_eq!(ApiError::from(e).status.as_u16(), 500);
        conn.execute("INSERT INTO t VALUES ('a', 'b')", [])
            .expect("first insert");
        let e = error_of(conn.execute("INSERT INTO t VALUES ('a', 'c')", []));
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
        assert_eq!(ApiError::from(e).code, "internal");
    }
}

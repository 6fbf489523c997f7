//! What a PostgreSQL error means for the caller: the database is
//! unavailable for now (503 `storage-unavailable`: the connection is lost
//! or refused, the server is shutting down, out of disk or memory, the
//! database read-only), the rows are bad (a constraint broken), or
//! anything else, a bug (500 `internal`).

use std::io;

use deadpool_postgres::{PoolError, TimeoutType};

use crate::store::StoreError;

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        let message = pg_message(&e);
        match e.as_db_error() {
            Some(db) => {
                let code = db.code().code();
                if unavailable_sqlstate(code) {
                    StoreError::Unavailable(message)
                } else if code.starts_with("23") {
                    StoreError::Corrupt(message)
                } else {
                    StoreError::Internal(message)
                }
            }
            None if lost_connection(&e) => StoreError::Unavailable(message),
            None => StoreError::Internal(message),
        }
    }
}

/// SQLSTATEs that say "not now": the same statement can succeed later.
/// Classes 08 (connection exception), 53 (insufficient resources: 53100
/// disk full, 53200 out of memory, 53300 too many connections), 57P
/// (operator intervention: 57P01 admin shutdown, 57P02 crash shutdown,
/// 57P03 cannot connect now), 58 (system error: 58030 I/O error); 25006
/// (read-only transaction: a standby, or `default_transaction_read_only`),
/// 57014 (statement cancelled, e.g. by `statement_timeout`), 55P03 (lock
/// not available), and 40001/40P01 (serialization failure, deadlock) once
/// the writer's own retries have run out.
fn unavailable_sqlstate(code: &str) -> bool {
    ["08", "53", "57P", "58"]
        .iter()
        .any(|class| code.starts_with(class))
        || ["25006", "57014", "55P03", "40001", "40P01"].contains(&code)
}

/// No answer from the server at all: the connection closed, an I/O error
/// on its socket, connecting failed, or no answer in time.
fn lost_connection(e: &tokio_postgres::Error) -> bool {
    use std::error::Error as _;
    e.is_closed()
        || e.source()
            .is_some_and(|s| s.downcast_ref::<io::Error>().is_some())
        || e.to_string() == "timeout waiting for server"
}

/// An error for messages and logs: the server's message and SQLSTATE when
/// it sent one.
pub(super) fn pg_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("postgres: {} ({})", db.message(), db.code().code()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("postgres: {e}: {cause}"),
            None => format!("postgres: {e}"),
        },
    }
}

/// A failed `pool.get()`: every pooled connection busy past the wait
/// timeout is overload; no new connection in time, or a pool closed at
/// shutdown, is the database being unavailable.
pub(super) fn pool_error(e: PoolError) -> StoreError {
    match e {
        PoolError::Timeout(TimeoutType::Wait) => StoreError::Overloaded,
        PoolError::Timeout(TimeoutType::Create | TimeoutType::Recycle) | PoolError::Closed => {
            StoreError::Unavailable(format!("postgres pool: {e}"))
        }
        PoolError::Backend(e) => StoreError::from(e),
        other => StoreError::Internal(format!("postgres pool: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::unavailable_sqlstate;

    #[test]
    fn outages_are_unavailable_and_bugs_are_not() {
        for code in [
            "08006", "53100", "53300", "57P01", "57P03", "58030", "25006", "40P01",
        ] {
            assert!(unavailable_sqlstate(code), "{code}");
        }
        for code in ["42P01", "42703", "23505", "22P02", "XX000"] {
            assert!(!unavailable_sqlstate(code), "{code}");
        }
    }
}

//! Column values both stores convert the same way: counters to the
//! databases' 64-bit integers, history rows back to entries, and the one
//! error for a stored row that does not parse.

use std::borrow::Cow;

use taskwire_core::json::{from_value, Value};
use taskwire_core::{HistoryEntry, State};
use taskwire_wire::from_json;

use super::StoreError;

/// Counters are ≤ 2^53 − 1 (core enforces it), so they fit SQLite's i64
/// and PostgreSQL's bigint.
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A stored row that core's parser refuses: corruption, which a sweep
/// quarantines and a request answers with a 500.
pub(crate) fn corrupt(e: taskwire_core::Error) -> StoreError {
    StoreError::Corrupt(format!("stored row does not parse: {}", e.message))
}

/// A history entry from its `version, event` columns.
pub(crate) fn history_entry(version: i64, event: &str) -> Result<HistoryEntry, StoreError> {
    Ok(HistoryEntry {
        version: u64::try_from(version)
            .map_err(|_| StoreError::Internal("history.version < 0".into()))?,
        event: from_json(event, "history.event").map_err(corrupt)?,
    })
}

/// A state column (`outbox.state`): its wire name, read by core's reader
/// for the state's JSON string, so a name core does not know is
/// corruption naming the column (`outbox.state: unknown value "x", …`).
pub(crate) fn state_column(name: &str, column: &str) -> Result<State, StoreError> {
    from_value::<State>(&Value::String(Cow::Borrowed(name)), column)
        .map_err(|e| StoreError::Corrupt(e.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_rows_parse_or_say_which_column_is_wrong() {
        let entry = history_entry(3, r#"{"type":"expire","atMs":5}"#).expect("an entry");
        assert_eq!(entry.version, 3);
        assert_eq!(
            history_entry(-1, r#"{"type":"expire","atMs":5}"#).map(|e| e.version),
            Err(StoreError::Internal("history.version < 0".into()))
        );
        assert!(matches!(
            history_entry(1, "{}"),
            Err(StoreError::Corrupt(m)) if m.starts_with("stored row does not parse: history.event")
        ));
        assert_eq!(to_i64(u64::MAX), i64::MAX);
    }
}

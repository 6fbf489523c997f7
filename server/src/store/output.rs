//! Live output (issue 27, PROTOCOL.md §Live output): what both stores
//! keep of a task's output streams, and how they judge an append.
//!
//! A stream is stored as the chunks its newest attempt gained, one row per
//! `(task, stream, attempt, start)`: the `added` text of each `appended`
//! judgement, so the rows of one attempt tile its text with no overlap.
//! An append loads the stream (its newest attempt's rows, in order) and
//! the task, has core's [`OutputLog::append`] judge it, and writes the
//! text gained in the same transaction as the load, inside the store's
//! writer: appends that arrive together share one commit (one fsync),
//! and two appends racing on one offset cannot both append (the writer
//! serializes them on SQLite; on PostgreSQL the task row is locked, and
//! the primary key refuses a second row at one start in any case).
//!
//! The first chunk of a newer attempt deletes the older attempt's rows:
//! only the newest attempt's text is ever shown. Output makes no task
//! version and no history entry. Its rows go when their task's row goes
//! (a trigger on SQLite, a cascade on PostgreSQL).

use taskwire_core::output::{Catchup, Chunk, OutputLog, StreamName};
use taskwire_core::{Appended, TaskView};

/// An executor's append, its signature checked.
#[derive(Debug, Clone)]
pub struct OutputAppend {
    /// The task the body was signed for.
    pub task_id: String,
    /// The stream it appends to.
    pub stream: StreamName,
    /// The chunk, checked by core.
    pub chunk: Chunk,
}

/// What a follower asks for: the stream, and what of it it holds.
#[derive(Debug, Clone)]
pub struct OutputWanted {
    /// The stream.
    pub stream: StreamName,
    /// The attempt whose text it holds (0: none).
    pub attempt: u64,
    /// How much of that text it holds, in UTF-16 code units.
    pub offset: u64,
}

/// A stream as read back: its newest attempt and that attempt's text
/// (`None`: nothing was ever appended).
pub type StoredStream = Option<(u64, String)>;

/// The log a stream is judged by: its stored text, closed when the task
/// has ended.
fn restore(view: &TaskView, stored: StoredStream) -> OutputLog {
    let (attempt, text) = stored.unwrap_or_default();
    let mut log = OutputLog::restore(attempt, text, false);
    log.follow_task(view.attempts, !view.state.is_terminal());
    log
}

/// Core's judgement of `chunk` against the stored stream of the task
/// whose current fields are `view`.
pub fn judge(view: &TaskView, stored: StoredStream, chunk: &Chunk) -> Appended {
    let (attempt, text) = stored.unwrap_or_default();
    let mut log = OutputLog::restore(attempt, text, false);
    log.append(chunk, view.attempts, !view.state.is_terminal())
}

/// What a follower holding `wanted` lacks, by core's [`OutputLog::since`].
pub fn catch_up(view: &TaskView, stored: StoredStream, wanted: &OutputWanted) -> Catchup {
    restore(view, stored).since(wanted.attempt, wanted.offset)
}

/// The chunks table and its cleanup, SQLite dialect (created with the
/// schema, on every open: `IF NOT EXISTS`).
pub const SQLITE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS output_chunks (
    task_id TEXT NOT NULL,
    stream  TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    start   INTEGER NOT NULL,
    text    TEXT NOT NULL,
    PRIMARY KEY (task_id, stream, attempt, start)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS output_chunks_of_deleted_tasks AFTER DELETE ON tasks
BEGIN
    DELETE FROM output_chunks WHERE task_id = OLD.id;
END;
";

/// The chunks table, PostgreSQL dialect.
pub const POSTGRES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS output_chunks (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    stream  TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    start   BIGINT NOT NULL,
    text    TEXT NOT NULL,
    PRIMARY KEY (task_id, stream, attempt, start)
);
";

/// The newest attempt's rows of one stream, in order (SQLite: `?1` task,
/// `?2` stream).
pub const SQLITE_LOAD: &str = "SELECT attempt, text FROM output_chunks
    WHERE task_id = ?1 AND stream = ?2
      AND attempt = (SELECT max(attempt) FROM output_chunks WHERE task_id = ?1 AND stream = ?2)
    ORDER BY start";

/// As [`SQLITE_LOAD`], PostgreSQL.
pub const POSTGRES_LOAD: &str = "SELECT attempt, text FROM output_chunks
    WHERE task_id = $1 AND stream = $2
      AND attempt = (SELECT max(attempt) FROM output_chunks WHERE task_id = $1 AND stream = $2)
    ORDER BY start";

/// Joins loaded rows `(attempt, text)` into a stream.
pub fn joined(rows: impl IntoIterator<Item = (i64, String)>) -> StoredStream {
    let mut stream: StoredStream = None;
    for (attempt, text) in rows {
        let attempt = u64::try_from(attempt).unwrap_or(0);
        stream
            .get_or_insert_with(|| (attempt, String::new()))
            .1
            .push_str(&text);
    }
    stream
}

//! Live output on SQLite (see `store/output.rs`): the append, a job of
//! the writer thread (so appends arriving together share its commit), and
//! the followers' read.

use rusqlite::{params, Connection};
use taskwire_core::output::Catchup;
use taskwire_core::{AppendReason, Appended};

use super::read::{load_own_task, load_task};
use crate::store::output::SQLITE_LOAD;
use crate::store::output::{catch_up, joined, judge, OutputAppend, OutputWanted, StoredStream};
use crate::store::rows::to_i64;
use crate::store::StoreError;

fn load_stream(conn: &Connection, task: &str, stream: &str) -> Result<StoredStream, StoreError> {
    let mut stmt = conn.prepare_cached(SQLITE_LOAD)?;
    let rows = stmt
        .query_map(params![task, stream], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<Vec<(i64, String)>, _>>()?;
    Ok(joined(rows))
}

/// Loads the stream and the task, has core judge the chunk, and writes
/// what it gained (dropping an older attempt's rows first), all inside
/// the writer's transaction.
pub(super) fn append_output(tx: &Connection, append: OutputAppend) -> Result<Appended, StoreError> {
    let task = load_task(tx, &append.task_id)?
        .ok_or_else(|| StoreError::NotFound(append.task_id.clone()))?;
    let stream = append.stream.as_str();
    let stored = load_stream(tx, &append.task_id, stream)?;
    let judged = judge(&task.view, stored, &append.chunk);
    if judged.reason != AppendReason::Appended {
        return Ok(judged);
    }
    if judged.superseded || judged.offset == 0 {
        tx.prepare_cached(
            "DELETE FROM output_chunks WHERE task_id = ?1 AND stream = ?2 AND attempt < ?3",
        )?
        .execute(params![append.task_id, stream, to_i64(judged.attempt)])?;
    }
    tx.prepare_cached(
        "INSERT INTO output_chunks (task_id, stream, attempt, start, text) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        append.task_id,
        stream,
        to_i64(judged.attempt),
        to_i64(judged.offset),
        judged.added
    ])?;
    Ok(judged)
}

/// What a follower of the tenant's task lacks, read consistently (the
/// task and the stream in one read transaction).
pub(super) fn read_output(
    conn: &mut Connection,
    tenant: &str,
    id: &str,
    wanted: &OutputWanted,
) -> Result<Catchup, StoreError> {
    let tx = conn.transaction()?;
    let task = load_own_task(&tx, tenant, id)?.ok_or_else(|| StoreError::NotFound(id.into()))?;
    let stored = load_stream(&tx, id, wanted.stream.as_str())?;
    Ok(catch_up(&task.view, stored, wanted))
}

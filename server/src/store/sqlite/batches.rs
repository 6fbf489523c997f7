//! Batches on SQLite (see `store/batches.rs` for the cursor): the create,
//! its idempotent replay, and the follow answer, read in one read
//! transaction so the cursor, the views and the entries agree.

use rusqlite::{params, Connection, OptionalExtension};

use super::jobs::insert_task;
use super::read::{check_room_for, history_entries, row, task_record};
use crate::store::batches::{BatchAnswer, BatchCreated, NewBatch};
use crate::store::decide::{check_key, KeyCheck};
use crate::store::rows::to_i64;
use crate::store::{Idempotency, StoreError, TaskRecord};
use taskwire_core::batch::{plan_batch, task_answer};
use taskwire_core::{ResumeAnswer, ResumeMode};

/// The create, on the writer's transaction: a replay is answered first
/// (never refused by a quota), then the open-task quota is checked for
/// every item at once, then the rows go in. A refusal writes nothing.
pub(super) fn create_batch(tx: &Connection, batch: NewBatch) -> Result<BatchCreated, StoreError> {
    if let Some(idem) = &batch.idempotency {
        if let Some(replay) = replay_batch(tx, &batch.tenant, idem)? {
            return Ok(replay);
        }
    }
    let size = batch.tasks.len() as u64;
    if let Some(max) = batch.open_task_limit {
        check_room_for(tx, &batch.tenant, max, size)?;
    }
    if let Some(idem) = &batch.idempotency {
        // The key names the batch: `task_id` holds its id, and the stored
        // request (a batch's own form) never equals a single create's.
        tx.prepare_cached(
            "INSERT INTO idempotency (tenant, key, request, task_id) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![batch.tenant, idem.key, idem.request, batch.id])?;
    }
    tx.prepare_cached(
        "INSERT INTO batches (id, tenant, size, seq, created_at_ms) VALUES (?1, ?2, ?3, 1, ?4)",
    )?
    .execute(params![
        batch.id,
        batch.tenant,
        to_i64(size),
        batch.created_at_ms
    ])?;
    let mut tasks = Vec::with_capacity(batch.tasks.len());
    for (index, task) in batch.tasks.into_iter().enumerate() {
        let record = TaskRecord {
            tenant: task.tenant,
            view: task.view,
            kind: task.kind,
            input: task.input,
            lease: None,
            batch: Some(batch.id.clone()),
        };
        insert_task(tx, &record, Some((&batch.id, index)))?;
        tasks.push(record);
    }
    Ok(BatchCreated {
        id: batch.id,
        cursor: 1,
        tasks,
        created: true,
    })
}

/// The batch an earlier create under `idem`'s key made, `None` for a new
/// key; 422 when the key was used for another request (a single create
/// included).
pub(super) fn replay_batch(
    conn: &Connection,
    tenant: &str,
    idem: &Idempotency,
) -> Result<Option<BatchCreated>, StoreError> {
    let seen: Option<(String, String)> = conn
        .prepare_cached("SELECT request, task_id FROM idempotency WHERE tenant = ?1 AND key = ?2")?
        .query_row(params![tenant, idem.key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let KeyCheck::Replay(id) = check_key(idem, seen)? else {
        return Ok(None);
    };
    let Some((seq, _)) = batch_row(conn, tenant, &id)? else {
        return Err(StoreError::Internal(format!(
            "idempotency row points at missing batch {id}"
        )));
    };
    let mut stmt = conn.prepare_cached(
        "SELECT tenant, view, kind, input, lease, batch_id FROM tasks
         WHERE batch_id = ?1 ORDER BY batch_index",
    )?;
    let rows = stmt.query_map(params![id], row)?;
    let mut tasks = Vec::new();
    for r in rows {
        tasks.push(task_record(r?)?);
    }
    Ok(Some(BatchCreated {
        id,
        cursor: seq,
        tasks,
        created: false,
    }))
}

/// The tenant's batch: its cursor and size (another tenant's reads as
/// missing).
fn batch_row(conn: &Connection, tenant: &str, id: &str) -> Result<Option<(u64, u64)>, StoreError> {
    let found: Option<(i64, i64)> = conn
        .prepare_cached("SELECT seq, size FROM batches WHERE id = ?1 AND tenant = ?2")?
        .query_row(params![id, tenant], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(found.map(|(seq, size)| {
        (
            u64::try_from(seq).unwrap_or(0),
            u64::try_from(size).unwrap_or(0),
        )
    }))
}

/// The follow answer for a client at `cursor` (PROTOCOL.md §Follow a
/// batch), on a reader connection, in one read transaction.
pub(super) fn resume_batch(
    conn: &mut Connection,
    (tenant, id): (&str, &str),
    cursor: u64,
    force_snapshot: bool,
    retention: u64,
) -> Result<BatchAnswer, StoreError> {
    let tx = conn.transaction()?;
    let Some((seq, size)) = batch_row(&tx, tenant, id)? else {
        return Err(StoreError::BatchNotFound(id.to_string()));
    };
    let open: i64 = tx
        .prepare_cached("SELECT count(*) FROM tasks WHERE batch_id = ?1 AND live = 1")?
        .query_row(params![id], |r| r.get(0))?;
    let mode = plan_batch(seq, cursor, force_snapshot);
    let tasks = match mode {
        ResumeMode::CaughtUp => Vec::new(),
        ResumeMode::Snapshot => changed_tasks(&tx, id, 0)?
            .into_iter()
            .map(|r| ResumeAnswer::Snapshot { task: r.view })
            .collect(),
        ResumeMode::Delta => {
            let mut out = Vec::new();
            for r in changed_tasks(&tx, id, cursor)? {
                let entries = history_entries(
                    &tx,
                    "SELECT version, event FROM history
                     WHERE task_id = ?1 AND batch_seq > ?2 ORDER BY version LIMIT ?3",
                    params![r.view.id, to_i64(cursor), to_i64(retention + 1)],
                )?;
                out.push(task_answer(r.view, entries, retention));
            }
            out
        }
    };
    tx.finish()?;
    Ok(BatchAnswer {
        id: id.to_string(),
        mode,
        cursor: seq,
        size,
        open: u64::try_from(open).unwrap_or(0),
        tasks,
    })
}

/// The batch's items changed after `cursor` (every item for 0), in item
/// order.
fn changed_tasks(tx: &Connection, id: &str, cursor: u64) -> Result<Vec<TaskRecord>, StoreError> {
    let mut stmt = tx.prepare_cached(
        "SELECT tenant, view, kind, input, lease, batch_id FROM tasks
         WHERE batch_id = ?1 AND batch_seq > ?2 ORDER BY batch_index",
    )?;
    let rows = stmt.query_map(params![id, to_i64(cursor)], row)?;
    let mut out = Vec::new();
    for r in rows {
        out.push(task_record(r?)?);
    }
    Ok(out)
}

//! Batches on PostgreSQL (see `store/batches.rs` for the cursor): the
//! create and its idempotent replay (a writer job), the follow answer
//! (one statement), and the raising of the cursors in the group commit.
//!
//! **Cursors commit in order, across writers and instances.** A batch's
//! `seq` is raised by [`raise_cursors`] inside the transaction that
//! appends the history, once per transaction however many of its items
//! moved, and the UPDATE holds the batch row's lock until that
//! transaction ends. A second transaction raising the same batch waits
//! for the lock, and only then reads the row (READ COMMITTED takes the
//! newest committed version: it writes N + 1 on top of the first one's
//! N). PostgreSQL makes a transaction visible before it releases its
//! locks, so when the second can write N + 1, N (with every history row
//! written at N, in the same commit) is visible to every new snapshot;
//! N + 1 commits after that. A snapshot that sees cursor N + 1 therefore
//! sees N and all before it, and a client that asks for the entries
//! written after the cursor it holds never skips one that commits late.
//!
//! **No deadlocks.** The locks are taken sorted by batch id, so two
//! transactions touching the same batches never hold one the other waits
//! for while waiting for one the other holds. They come after every task
//! row lock (the jobs take those before the flush) and before the
//! tenants' outbox locks (later statements of the flush), which places
//! them in the global order of `postgres.rs`'s module docs.

use std::collections::BTreeMap;

use deadpool_postgres::{GenericClient, Transaction};
use taskwire_core::{ResumeAnswer, ResumeMode};

use super::batch::Batch;
use super::jobs::{check_open_tasks, key_row};
use super::read::{entries, parse_view, record};
use super::writer::Sql;
use super::PostgresStore;
use crate::hub::BatchMark;
use crate::store::batches::{BatchAnswer, BatchCreated, NewBatch};
use crate::store::decide::{check_key, KeyCheck};
use crate::store::rows::to_i64;
use crate::store::{Idempotency, StoreError, TaskRecord};
use taskwire_core::batch::{plan_batch, task_answer};

/// A batch row this transaction inserts.
pub(super) struct NewBatchRow {
    pub(super) id: String,
    pub(super) tenant: String,
    pub(super) size: i64,
    /// 1, or 2 when this transaction also changed one of its items.
    pub(super) seq: i64,
    pub(super) created_at_ms: f64,
}

/// The create, a writer job: a replay is answered first (never refused by
/// a quota), then the open-task quota is checked for every item at once
/// (under the tenant's quota lock, see `jobs::check_open_tasks`), then the
/// rows are gathered for the flush. A refusal gathers nothing.
pub(super) async fn create_batch(
    tx: &Transaction<'_>,
    b: &mut Batch,
    batch: &NewBatch,
) -> Sql<BatchCreated> {
    if let Some(idem) = &batch.idempotency {
        let seen = key_row(tx, b, &batch.tenant, &idem.key).await?;
        match check_key(idem, seen) {
            Err(e) => return Ok(Err(e)),
            Ok(KeyCheck::Replay(id)) => return replay_here(tx, b, &batch.tenant, &id).await,
            Ok(KeyCheck::Create) => {}
        }
    }
    let size = batch.tasks.len() as u64;
    if let Some(max) = batch.open_task_limit {
        if let Err(e) = check_open_tasks(tx, b, &batch.tenant, max, size).await? {
            return Ok(Err(e));
        }
    }
    if let Some(idem) = &batch.idempotency {
        // The key names the batch: `task_id` holds its id, and the stored
        // request (a batch's own form) never equals a single create's.
        b.idempotency.insert(
            (batch.tenant.clone(), idem.key.clone()),
            (idem.request.clone(), batch.id.clone()),
        );
    }
    b.new_batches.push(NewBatchRow {
        id: batch.id.clone(),
        tenant: batch.tenant.clone(),
        size: to_i64(size),
        seq: 1,
        created_at_ms: batch.created_at_ms,
    });
    let mut tasks = Vec::with_capacity(batch.tasks.len());
    for (index, task) in batch.tasks.iter().enumerate() {
        let record = TaskRecord {
            tenant: task.tenant.clone(),
            view: task.view.clone(),
            kind: task.kind.clone(),
            input: task.input.clone(),
            lease: None,
            batch: Some(batch.id.clone()),
        };
        let id = task.view.id.clone();
        b.item_index.insert(id.clone(), to_i64(index as u64));
        b.tasks.insert(id.clone(), record.clone());
        b.created.push(id);
        tasks.push(record);
    }
    Ok(Ok(BatchCreated {
        id: batch.id.clone(),
        cursor: 1,
        tasks,
        created: true,
    }))
}

/// A replay inside the writer: the batch this transaction created (from
/// memory), or the committed one.
async fn replay_here(tx: &Transaction<'_>, b: &Batch, tenant: &str, id: &str) -> Sql<BatchCreated> {
    if b.new_batches.iter().any(|n| n.id == id) {
        let tasks = b
            .created
            .iter()
            .filter_map(|t| b.tasks.get(t))
            .filter(|r| r.batch.as_deref() == Some(id))
            .cloned()
            .collect();
        return Ok(Ok(BatchCreated {
            id: id.to_string(),
            cursor: 1,
            tasks,
            created: false,
        }));
    }
    read_batch(tx, tenant, id).await
}

/// The batch an earlier create under `idem`'s key made, read without the
/// writer ([`crate::store::Store::replay_batch`]); 422 when the key was
/// used for another request (a single create included).
pub(super) async fn replay_batch(
    store: &PostgresStore,
    tenant: String,
    idem: Idempotency,
) -> Result<Option<BatchCreated>, StoreError> {
    let client = store.conn().await?;
    let stmt = client
        .prepare_cached("SELECT request, task_id FROM idempotency WHERE tenant = $1 AND key = $2")
        .await?;
    let seen = match client.query_opt(&stmt, &[&tenant, &idem.key]).await? {
        Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
        None => None,
    };
    match check_key(&idem, seen)? {
        KeyCheck::Create => Ok(None),
        KeyCheck::Replay(id) => read_batch(&client, &tenant, &id).await?.map(Some),
    }
}

/// The tenant's batch as it is now, cursor and items from one statement
/// (one snapshot). The idempotency row that names it must not point at
/// nothing: that is an internal error, as for a task.
async fn read_batch(client: &impl GenericClient, tenant: &str, id: &str) -> Sql<BatchCreated> {
    let stmt = client
        .prepare_cached(
            "SELECT b.seq, t.tenant, t.view, t.kind, t.input, t.lease, t.batch_id
             FROM batches b JOIN tasks t ON t.batch_id = b.id
             WHERE b.id = $1 AND b.tenant = $2 ORDER BY t.batch_index",
        )
        .await?;
    let rows = client.query(&stmt, &[&id, &tenant]).await?;
    let Some(first) = rows.first() else {
        return Ok(Err(StoreError::Internal(format!(
            "idempotency row points at missing batch {id}"
        ))));
    };
    let seq: i64 = first.try_get(0)?;
    let tasks = match rows.iter().map(|r| record(r, 1)).collect() {
        Ok(tasks) => tasks,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Ok(BatchCreated {
        id: id.to_string(),
        cursor: u64::try_from(seq).unwrap_or(0),
        tasks,
        created: false,
    }))
}

/// The follow answer for a client at `cursor` (PROTOCOL.md §Follow a
/// batch), read in one statement, so the cursor, the open count, the
/// views and the entries come from one snapshot. The conditions are
/// [`plan_batch`]'s cases: a snapshot reads every item and no history; a
/// delta the items changed after `cursor` (a range of `tasks_batch`),
/// with at most `retention + 1` of their entries written after it;
/// caught-up nothing. Each case is a branch of its own that the batch row
/// switches on or off (a one-time filter in the plan), so that each keeps
/// its index condition.
pub(super) async fn resume_batch(
    store: &PostgresStore,
    (tenant, id): (String, String),
    cursor: u64,
    force_snapshot: bool,
) -> Result<BatchAnswer, StoreError> {
    let retention = store.retention;
    let client = store.conn().await?;
    let stmt = client
        .prepare_cached(
            "SELECT b.seq, b.size, o.open, t.id, t.view, h.version, h.event
             FROM batches b
             CROSS JOIN LATERAL (SELECT count(*) AS open FROM tasks
                                 WHERE batch_id = b.id AND live) o
             CROSS JOIN LATERAL (SELECT $3::bool OR $2::bigint = 0 OR $2::bigint > b.seq
                                 AS snapshot) m
             LEFT JOIN LATERAL (SELECT id, view, batch_index FROM tasks
                                WHERE batch_id = b.id AND m.snapshot
                                UNION ALL
                                SELECT id, view, batch_index FROM tasks
                                WHERE batch_id = b.id AND batch_seq > $2::bigint
                                  AND NOT m.snapshot AND $2::bigint < b.seq) t ON true
             LEFT JOIN LATERAL (SELECT version, event FROM history
                                WHERE task_id = t.id AND batch_seq > $2::bigint
                                  AND NOT m.snapshot
                                ORDER BY version LIMIT $4::bigint) h ON true
             WHERE b.id = $1 AND b.tenant = $5
             ORDER BY t.batch_index, h.version",
        )
        .await?;
    let rows = client
        .query(
            &stmt,
            &[
                &id,
                &to_i64(cursor),
                &force_snapshot,
                &to_i64(retention.saturating_add(1)),
                &tenant,
            ],
        )
        .await?;
    let Some(first) = rows.first() else {
        return Err(StoreError::BatchNotFound(id));
    };
    let count = |at: usize| -> Result<u64, StoreError> {
        Ok(u64::try_from(first.try_get::<_, i64>(at)?).unwrap_or(0))
    };
    let (seq, size, open) = (count(0)?, count(1)?, count(2)?);
    let mode = plan_batch(seq, cursor, force_snapshot);
    let mut tasks = Vec::new();
    let mut start = 0;
    while start < rows.len() && mode != ResumeMode::CaughtUp {
        let task: Option<&str> = rows[start].try_get(3)?;
        if task.is_none() {
            break; // the LEFT JOIN found no item: nothing changed
        }
        let mut end = start + 1;
        while end < rows.len() && rows[end].try_get::<_, Option<&str>>(3)? == task {
            end += 1;
        }
        let group = &rows[start..end];
        let view = parse_view(&group[0].try_get::<_, String>(4)?)?;
        tasks.push(match mode {
            ResumeMode::Delta => task_answer(view, entries(group, 5)?, retention),
            _ => ResumeAnswer::Snapshot { task: view },
        });
        start = end;
    }
    Ok(BatchAnswer {
        id,
        mode,
        cursor: seq,
        size,
        open,
        tasks,
    })
}

/// Raises, by one, the cursor of every batch this transaction appended
/// history to an item of (see the module docs for why the row lock makes
/// cursors commit in order), and marks the transaction's changes with
/// them for the hub. Returns the cursors, by batch id; a transaction that
/// moved no item of any batch sends nothing.
pub(super) async fn raise_cursors(
    tx: &Transaction<'_>,
    b: &mut Batch,
) -> Result<BTreeMap<String, u64>, tokio_postgres::Error> {
    let mut marks: BTreeMap<String, u64> = b
        .history
        .iter()
        .filter_map(|(task, _, _)| b.tasks.get(task)?.batch.clone())
        .map(|batch| (batch, 0))
        .collect();
    // A batch created by this transaction is its own (no lock to take).
    for row in &mut b.new_batches {
        if let Some(seq) = marks.get_mut(&row.id) {
            row.seq += 1;
            *seq = u64::try_from(row.seq).unwrap_or(0);
        }
    }
    let committed: Vec<&str> = marks
        .iter()
        .filter(|(_, seq)| **seq == 0)
        .map(|(id, _)| id.as_str())
        .collect();
    if !committed.is_empty() {
        // Sorted (a BTreeMap's keys) and locked in that order: LockRows
        // runs above the sort. The UPDATE, a later statement, reads with
        // the locks held and waits for nobody.
        let lock = tx
            .prepare_cached(
                "SELECT id FROM batches WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE",
            )
            .await?;
        let raise = tx
            .prepare_cached(
                "UPDATE batches SET seq = seq + 1 WHERE id = ANY($1::text[]) RETURNING id, seq",
            )
            .await?;
        let (_, raised) = futures_util::future::try_join(
            tx.query(&lock, &[&committed]),
            tx.query(&raise, &[&committed]),
        )
        .await?;
        for row in &raised {
            let (id, seq): (String, i64) = (row.try_get(0)?, row.try_get(1)?);
            marks.insert(id, u64::try_from(seq).unwrap_or(0));
        }
    }
    // An item whose batch row is gone (none is ever deleted) moves nothing.
    marks.retain(|_, seq| *seq > 0);
    for change in &mut b.changes {
        let batch = b.tasks.get(&change.view.id).and_then(|r| r.batch.as_ref());
        change.batch = batch.and_then(|id| {
            let seq = *marks.get(id)?;
            Some(BatchMark {
                id: id.clone(),
                seq,
            })
        });
    }
    Ok(marks)
}

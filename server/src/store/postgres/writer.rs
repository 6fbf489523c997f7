//! The writer tasks: group commit (see the module docs of `postgres.rs`).
//! Jobs are taken off the queue in batches, sorted into the global lock
//! order, run in one transaction and committed once; a batch that fails
//! is retried (deadlocks, serialization failures, lost callback-id races)
//! or run job by job, so that only the failing job fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};
use tokio_postgres::error::SqlState;

use super::batch::{hub_publish, Batch};
use super::batch_cancel::cancel_batch;
use super::batches::create_batch;
use super::callback::{callback, prefetch};
use super::errors::pool_error;
use super::jobs::{act, create, deliver, open_tasks_lock};
use crate::hub::Hub;
use crate::store::{
    callback_ids, Action, BatchCancel, Callback, Claim, NewBatch, NewTask, StoreError, WriteDone,
};

// A task view (in `NewTask`/`Created`) makes one variant ~400 bytes since
// the lifecycle fields (issue 11); each value lives only while its write
// is queued, so boxing would add an allocation per create to save a few
// hundred bytes per queued write.
#[allow(clippy::large_enum_variant)]
/// What a queued write asks for.
pub(super) enum Op {
    Create(NewTask),
    CreateBatch(NewBatch),
    Callback(Callback),
    Act(Action),
    CancelBatch(BatchCancel),
    Claim(Claim),
    Deliver {
        tenant: String,
        id: String,
        key: String,
        now_ms: f64,
    },
    /// An executor's output append (`store/output.rs`).
    Output(crate::store::OutputAppend),
}

/// Where a job's first blocking lock sits in the global lock order.
pub(super) type LockOrder = (u8, i64, String);

/// One queued write: the job, where it sorts in the lock order, and where
/// its answer goes.
pub(super) struct Job {
    pub(super) op: Op,
    pub(super) order: LockOrder,
    pub(super) reply: oneshot::Sender<Result<WriteDone, StoreError>>,
}

/// A 64-bit advisory lock id for a name (the same on every instance).
pub(super) fn lock_id(parts: &[&str]) -> i64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    i64::from_be_bytes(b)
}

/// Where a job sorts in the global lock order (see the module docs of
/// `postgres.rs`): key-locked creates and deliveries first, then
/// callbacks and requests by task id, then creates without a key.
pub(super) fn order_of(op: &Op) -> LockOrder {
    match op {
        Op::Create(task) => match &task.idempotency {
            Some(idem) => (
                0,
                lock_id(&["idem", &task.tenant, &idem.key]),
                String::new(),
            ),
            None => (2, 0, String::new()),
        },
        // A batch's key is in the tasks' key space (the same lock).
        Op::CreateBatch(batch) => match &batch.idempotency {
            Some(idem) => (
                0,
                lock_id(&["idem", &batch.tenant, &idem.key]),
                String::new(),
            ),
            None => (2, 0, String::new()),
        },
        Op::Deliver { tenant, key, .. } => (0, lock_id(&["delivery", tenant, key]), String::new()),
        Op::Callback(cb) => (1, 0, cb.task_id.clone()),
        Op::Act(action) => (1, 0, action.task_id.clone()),
        // Its rows are locked in id order, from the first.
        Op::CancelBatch(_) => (1, 0, String::new()),
        // Its row locks skip what others hold; its kind locks come last.
        Op::Claim(_) => (3, 0, String::new()),
        // Its task row, after the callbacks' (locked all at once, first):
        // by task id among the appends.
        Op::Output(append) => (2, 0, append.task_id.clone()),
    }
}

/// Why a batch failed.
enum BatchError {
    /// Rolled back by a deadlock or serialization failure: run it again.
    Retry(StoreError),
    /// A statement failed and rolled it back: nothing of it committed.
    RolledBack(StoreError),
    /// No connection (pool timeout, connection lost): nothing committed,
    /// and running the jobs one by one would not help.
    Unavailable(StoreError),
    /// Failed at COMMIT: it may or may not have committed.
    Unknown(StoreError),
}

fn classify(e: tokio_postgres::Error) -> BatchError {
    if e.as_db_error().is_none() {
        return BatchError::Unavailable(e.into());
    }
    // A callback id another transaction committed first: run again, and
    // the prefetch finds it (`callback-id-reused-for-other-task`).
    let retry = callback_ids::is_lost_race(&e)
        || e.code().is_some_and(|c| {
            *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
        });
    if retry {
        BatchError::Retry(e.into())
    } else {
        BatchError::RolledBack(e.into())
    }
}

/// A job's outcome: the outer error is a failed statement (the transaction
/// is aborted), the inner one the job's own answer (nothing written).
pub(super) type Sql<T> = Result<Result<T, StoreError>, tokio_postgres::Error>;

type Results = Vec<Result<WriteDone, StoreError>>;

/// A writer task: group commit (see the module docs).
pub(super) async fn writer(
    pool: Pool,
    rx: Arc<AsyncMutex<mpsc::Receiver<Job>>>,
    hub: Arc<Hub>,
    max_batch: usize,
) {
    loop {
        let mut jobs = Vec::new();
        {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            jobs.push(first);
            while jobs.len() < max_batch {
                match rx.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
        }
        // The global lock order (stable: same-task callbacks keep their
        // arrival order).
        jobs.sort_by(|a, b| a.order.cmp(&b.order));
        let started = Instant::now();
        match commit(&pool, &jobs, &hub.work.instance).await {
            Ok((results, batch)) => finish(&hub, jobs, results, &batch, started),
            Err(BatchError::RolledBack(_) | BatchError::Retry(_)) if jobs.len() > 1 => {
                // One job's statement failed and took the batch with it:
                // run each alone, so only that one fails.
                for job in jobs {
                    let one = [job];
                    let started = Instant::now();
                    let outcome = commit(&pool, &one, &hub.work.instance).await;
                    let [job] = one;
                    match outcome {
                        Ok((results, batch)) => finish(&hub, vec![job], results, &batch, started),
                        Err(
                            BatchError::Retry(e)
                            | BatchError::RolledBack(e)
                            | BatchError::Unavailable(e)
                            | BatchError::Unknown(e),
                        ) => {
                            hub.outage.refused(1, &e);
                            let _ = job.reply.send(Err(e));
                        }
                    }
                }
            }
            Err(
                BatchError::Retry(e)
                | BatchError::RolledBack(e)
                | BatchError::Unavailable(e)
                | BatchError::Unknown(e),
            ) => {
                hub.outage.refused(jobs.len(), &e);
                for job in jobs {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Durable now: wake the watchers, then answer. `started` is when the
/// batch went to the pool (its commit latency, for `/metrics`).
/// A job that committed is a write the database took: the end of an
/// outage, if one was logged.
fn finish(hub: &Hub, jobs: Vec<Job>, results: Results, batch: &Batch, started: Instant) {
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        hub.outage.refused(1, e);
    }
    if results.iter().any(Result::is_ok) {
        hub.outage.wrote();
    }
    hub.metrics.committed(jobs.len(), started.elapsed());
    hub_publish(hub, batch);
    for (task, piece) in results
        .iter()
        .flatten()
        .filter_map(WriteDone::output_appended)
    {
        hub.output.appended(task, Some(piece));
    }
    for (job, result) in jobs.into_iter().zip(results) {
        let _ = job.reply.send(result);
    }
}

/// Runs the jobs in one transaction, retrying deadlock/serialization
/// failures (rolled back, so safe to run again).
async fn commit(pool: &Pool, jobs: &[Job], instance: &str) -> Result<(Results, Batch), BatchError> {
    let mut tries: u64 = 0;
    loop {
        match run_batch(pool, jobs, instance).await {
            Err(BatchError::Retry(_)) if tries < 8 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(tries * 2)).await;
            }
            other => return other,
        }
    }
}

async fn run_batch(
    pool: &Pool,
    jobs: &[Job],
    instance: &str,
) -> Result<(Results, Batch), BatchError> {
    let mut client = pool
        .get()
        .await
        .map_err(|e| BatchError::Unavailable(pool_error(e)))?;
    let tx = client.transaction().await.map_err(classify)?;
    lock_open_task_counts(&tx, jobs).await.map_err(classify)?;
    let mut batch = Batch::default();
    let mut results = Vec::with_capacity(jobs.len());
    let mut prefetched = false;
    for job in jobs {
        // Callbacks sort after the key-locked jobs: lock all their rows now.
        if !prefetched && matches!(job.op, Op::Callback(_)) {
            prefetch(&tx, &mut batch, jobs).await.map_err(classify)?;
            prefetched = true;
        }
        let result = match &job.op {
            Op::Create(task) => create(&tx, &mut batch, task)
                .await
                .map(|r| r.map(WriteDone::Created)),
            Op::CreateBatch(nb) => create_batch(&tx, &mut batch, nb)
                .await
                .map(|r| r.map(WriteDone::BatchCreated)),
            Op::Callback(cb) => callback(&tx, &mut batch, cb)
                .await
                .map(|r| r.map(WriteDone::Callback)),
            Op::Act(action) => act(&tx, &mut batch, action)
                .await
                .map(|r| r.map(WriteDone::Acted)),
            Op::CancelBatch(cancel) => cancel_batch(&tx, &mut batch, cancel)
                .await
                .map(|r| r.map(WriteDone::BatchCancelled)),
            Op::Claim(c) => super::work::claim(&tx, &mut batch, c)
                .await
                .map(|r| r.map(WriteDone::Claimed)),
            Op::Deliver {
                tenant,
                id,
                key,
                now_ms,
            } => deliver(&tx, &mut batch, tenant, id, key, *now_ms)
                .await
                .map(|r| r.map(WriteDone::Delivery)),
            Op::Output(append) => super::output::append_output(&tx, &batch, append, instance)
                .await
                .map(|r| {
                    r.map(|a| {
                        let stream = append.stream.as_str().to_string();
                        WriteDone::Output(append.task_id.clone(), stream, a)
                    })
                }),
        };
        results.push(result.map_err(classify)?);
    }
    batch.flush(&tx, instance).await.map_err(classify)?;
    tx.commit()
        .await
        .map_err(|e| BatchError::Unknown(e.into()))?;
    Ok((results, batch))
}

/// Takes the open-task lock of every tenant the batch creates for with a
/// quota (see `jobs::open_tasks_lock`), sorted, before any other lock.
/// Batches without such a create take none.
async fn lock_open_task_counts(
    tx: &deadpool_postgres::Transaction<'_>,
    jobs: &[Job],
) -> Result<(), tokio_postgres::Error> {
    let mut locks: Vec<i64> = jobs
        .iter()
        .filter_map(|job| match &job.op {
            Op::Create(task) if task.open_task_limit.is_some() => {
                Some(open_tasks_lock(&task.tenant))
            }
            Op::CreateBatch(batch) if batch.open_task_limit.is_some() => {
                Some(open_tasks_lock(&batch.tenant))
            }
            _ => None,
        })
        .collect();
    if locks.is_empty() {
        return Ok(());
    }
    locks.sort_unstable();
    locks.dedup();
    // Function scans run in array order: the locks are taken sorted.
    let stmt = tx
        .prepare_cached("SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS l(k)")
        .await?;
    tx.execute(&stmt, &[&locks]).await?;
    Ok(())
}

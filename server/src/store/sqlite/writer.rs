//! The writer thread: group commit (see the module docs of `sqlite.rs`).
//! Every write is a [`Job`]; the thread runs each batch of them in one
//! transaction, each job in a savepoint of its own, and answers only
//! after the COMMIT.

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::batch_cancel::cancel_batch;
use super::batches::create_batch;
use super::jobs::{act, callback, create, deliver};
use super::sweep;
use super::work::claim;
use crate::hub::{Change, Hub};
use crate::store::sweep::{TaskSweep, TTL};
use crate::store::{
    Action, BatchCancel, Callback, Claim, NewBatch, NewTask, StoreError, WriteDone,
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
    SweepDue {
        sweep: &'static TaskSweep,
        now_ms: f64,
        limit: u32,
    },
    Webhook {
        seq: u64,
        sent: bool,
        next_attempt_ms: f64,
    },
    /// Signed callback requests too old to be accepted again.
    ForgetUsedCallbacks {
        now_ms: f64,
    },
    /// An executor's output append (`store/output.rs`).
    Output(crate::store::OutputAppend),
    /// Outbox rows a reader found unparseable: `seq` and why.
    QuarantineOutbox {
        rows: Vec<(i64, String)>,
        now_ms: f64,
    },
}

/// One queued write and where its answer goes.
pub(super) struct Job {
    pub(super) op: Op,
    pub(super) reply: oneshot::Sender<Result<WriteDone, StoreError>>,
}

/// The writer thread: group commit (see the module docs).
pub(super) fn writer(mut conn: Connection, rx: Receiver<Job>, hub: Arc<Hub>, max_batch: usize) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let mut changes = Vec::new();
        let mut outbox = false;
        let started = Instant::now();
        let results = commit_batch(&mut conn, &mut batch, &mut changes, &mut outbox);
        match results {
            Ok((results, wrote)) => {
                for e in results.iter().filter_map(|r| r.as_ref().err()) {
                    hub.outage.refused(1, e);
                }
                if wrote {
                    hub.outage.wrote();
                }
                hub.metrics.committed(batch.len(), started.elapsed());
                // Durable now: wake watchers, then answer.
                hub.publish(&changes);
                for (task, piece) in results
                    .iter()
                    .flatten()
                    .filter_map(WriteDone::output_appended)
                {
                    hub.output.appended(task, Some(piece));
                }
                if outbox {
                    hub.outbox.notify_one();
                }
                for (job, result) in batch.into_iter().zip(results) {
                    let _ = job.reply.send(result);
                }
            }
            Err(e) => {
                hub.outage.refused(batch.len(), &e);
                for job in batch {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Runs a batch in one transaction, one savepoint per job. Returns each
/// job's result once the COMMIT succeeded, and whether a job that
/// committed changed rows (a write that proves the storage takes writes:
/// an empty sweep commits nothing, and succeeds on a full disk too).
fn commit_batch(
    conn: &mut Connection,
    batch: &mut [Job],
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<(Vec<Result<WriteDone, StoreError>>, bool), StoreError> {
    let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut results = Vec::with_capacity(batch.len());
    let mut wrote = false;
    for job in batch.iter_mut() {
        let op = std::mem::replace(
            &mut job.op,
            Op::SweepDue {
                sweep: &TTL,
                now_ms: 0.0,
                limit: 0,
            },
        );
        let mut job_changes = Vec::new();
        let mut job_outbox = false;
        let sp = tx.savepoint()?;
        let before = sp.total_changes();
        let result = run(&sp, op, &mut job_changes, &mut job_outbox);
        if result.is_ok() {
            wrote |= sp.total_changes() != before;
            sp.commit()?;
            changes.append(&mut job_changes);
            *outbox |= job_outbox;
        } else {
            // Rolls back this job alone. After a full disk or an I/O error
            // SQLite may have rolled back the whole transaction, the jobs
            // before this one included: then none of the batch may be
            // answered as committed.
            drop(sp);
            if let (true, Err(e)) = (tx.is_autocommit(), &result) {
                return Err(e.clone());
            }
        }
        results.push(result);
    }
    tx.commit()?;
    Ok((results, wrote))
}

fn run(
    tx: &Connection,
    op: Op,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<WriteDone, StoreError> {
    match op {
        Op::Create(task) => create(tx, task).map(WriteDone::Created),
        Op::CreateBatch(batch) => create_batch(tx, batch).map(WriteDone::BatchCreated),
        Op::Callback(cb) => callback(tx, cb, changes, outbox).map(WriteDone::Callback),
        Op::Act(action) => act(tx, action, changes, outbox).map(WriteDone::Acted),
        Op::CancelBatch(cancel) => {
            cancel_batch(tx, cancel, changes, outbox).map(WriteDone::BatchCancelled)
        }
        Op::Claim(c) => claim(tx, c, changes, outbox).map(WriteDone::Claimed),
        Op::Deliver {
            tenant,
            id,
            key,
            now_ms,
        } => deliver(tx, &tenant, &id, &key, now_ms).map(WriteDone::Delivery),
        Op::SweepDue {
            sweep,
            now_ms,
            limit,
        } => sweep::sweep_tasks(tx, sweep, now_ms, limit, changes, outbox).map(WriteDone::Expired),
        Op::Webhook {
            seq,
            sent,
            next_attempt_ms,
        } => sweep::record_attempt(tx, seq, sent, next_attempt_ms).map(|()| WriteDone::Unit),
        Op::ForgetUsedCallbacks { now_ms } => {
            let before = crate::store::callback_replays::forget_before(now_ms);
            tx.prepare_cached(crate::store::callback_replays::SQLITE_FORGET)?
                .execute([before])?;
            Ok(WriteDone::Unit)
        }
        Op::Output(append) => {
            let task = append.task_id.clone();
            let stream = append.stream.as_str().to_string();
            super::output::append_output(tx, append).map(|a| WriteDone::Output(task, stream, a))
        }
        Op::QuarantineOutbox { rows, now_ms } => {
            sweep::quarantine_outbox(tx, rows, now_ms).map(WriteDone::Quarantined)
        }
    }
}

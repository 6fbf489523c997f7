//! The SQLite store: WAL mode, `synchronous=FULL`, one writer thread with
//! group commit, and a small pool of reader connections.
//!
//! **Group commit.** Every write (create, callback, delivery, expiry) is a
//! job sent to one writer thread. The thread takes every job waiting (up
//! to `max_batch`), opens one `BEGIN IMMEDIATE` transaction, runs each job
//! inside its own `SAVEPOINT` (so a failing job rolls back alone and each
//! callback stays atomic and isolated), then `COMMIT`s once: one fsync for
//! the whole batch. Only after that COMMIT returns are the changes
//! published to the hub and the answers sent. Under light load a batch is
//! one job, exactly a per-callback transaction; under load the fsync cost
//! is shared (see server/README.md for the numbers).
//!
//! **Reads** (get, resume, feeds) use separate connections: WAL lets them
//! read the last commit while the writer writes. A resume reads the view
//! and its entries in one read transaction, so they always agree.
//!
//! **Sweeps** (TTL expiry, the notify sender's outbox reads) handle each
//! row on its own and quarantine a bad one (`sqlite/sweep.rs`); errors
//! are sorted into unavailable, corrupt and internal in
//! `sqlite/errors.rs`.
//!
//! **Files.** This file: opening the file and the [`Store`] methods, which
//! queue a job for the writer or run a read. The writer thread is in
//! `sqlite/writer.rs`, its jobs in `sqlite/jobs.rs`, row reads and the
//! reader pool in `sqlite/read.rs`.

mod batch_cancel;
mod batches;
mod errors;
mod health;
mod jobs;
mod output;
mod read;
mod sweep;
mod work;
mod writer;

use std::path::Path;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OptionalExtension};
use taskwire_core::{Delivery, HistoryEntry, ResumeAnswer, TaskView};
use tokio::sync::{oneshot, Semaphore};

use super::decide::resume_plan;
use super::rows::to_i64;
use super::sqlite_schema;
use super::sweep::{LIFECYCLE, TTL};
use super::{
    Acted, Action, BatchAnswer, BatchCancel, BatchCancelled, BatchCreated, Callback,
    CallbackAnswer, Created, Idempotency, NewBatch, NewTask, OutboxEntry, PendingWebhooks, Store,
    StoreError, StoreFuture, Swept, TaskRecord, WebhookClaim, WriteDone,
};
use crate::hub::Hub;
use read::{history_after, load_own_task, replay, Readers};
use writer::{writer, Job, Op};

pub use health::StartChecks;

/// Writes queued beyond this answer 503 instead of growing memory.
const QUEUE: usize = 16_384;
/// Reader connections (and blocking threads) in use at once.
const READERS: usize = 8;
/// The database file in the `--data` directory.
pub const FILE_NAME: &str = "taskwire.sqlite3";

/// The SQLite implementation of [`Store`].
pub struct SqliteStore {
    jobs: SyncSender<Job>,
    readers: Arc<Readers>,
    read_permits: Arc<Semaphore>,
    retention: u64,
    epoch: String,
}

impl SqliteStore {
    /// Opens (or creates) `dir/taskwire.sqlite3` and starts the writer.
    /// `max_batch` 1 turns group commit off. An empty or damaged file is
    /// refused (`sqlite/health.rs`, as `checks` says).
    pub fn open(
        dir: &Path,
        hub: Arc<Hub>,
        retention: u64,
        max_batch: usize,
        checks: StartChecks,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("--data {}: {e}", dir.display()))?;
        let path = dir.join(FILE_NAME);
        let shown = path.display().to_string();
        health::refuse_empty(&path, &shown, checks.new_database)?;
        let mut conn = Connection::open(&path).map_err(|e| format!("{shown}: {e}"))?;
        // The schema version first: a file from a newer server is refused
        // before anything (even the journal mode) is changed in it.
        conn.execute_batch("PRAGMA busy_timeout = 5000;")
            .map_err(|e| format!("{shown}: {e}"))?;
        if checks.integrity {
            let took = health::check_integrity(&conn, &shown)?;
            eprintln!(
                "taskwire-server: {shown}: integrity check (PRAGMA quick_check) ok in {} ms",
                took.as_millis()
            );
        }
        let schema = format!(
            "{}{}{}{}",
            sqlite_schema::SCHEMA,
            super::quarantine::SQLITE_SCHEMA,
            super::callback_replays::SQLITE,
            super::epoch::SQLITE_SCHEMA,
        ) + super::output::SQLITE_SCHEMA;
        let prepared = sqlite_schema::prepare(&mut conn, &schema, &shown)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .map_err(|e| format!("{shown}: {e}"))?;
        let epoch = super::epoch::sqlite_open(&conn, &shown)?;
        if prepared.from != 0 && prepared.from < sqlite_schema::CURRENT {
            eprintln!(
                "taskwire-server: {shown}: migrated from schema {} to {} ({} callback events now stored once); \
                 the space freed is reused for new rows (VACUUM returns it to the file system)",
                prepared.from,
                sqlite_schema::CURRENT,
                prepared.callbacks_referenced
            );
        }
        if prepared.callbacks_rekeyed > 0 {
            eprintln!(
                "taskwire-server: {shown}: {} remembered callback ids keyed by (tenant, callback id)",
                prepared.callbacks_rekeyed
            );
        }
        let (jobs, rx) = mpsc::sync_channel(QUEUE);
        let max_batch = max_batch.max(1);
        std::thread::Builder::new()
            .name("taskwire-writer".into())
            .spawn(move || writer(conn, rx, hub, max_batch))
            .map_err(|e| format!("writer thread: {e}"))?;
        Ok(SqliteStore {
            jobs,
            readers: Arc::new(Readers {
                path,
                pool: Mutex::new(Vec::new()),
            }),
            read_permits: Arc::new(Semaphore::new(READERS)),
            retention,
            epoch,
        })
    }

    fn write(
        &self,
        op: Op,
    ) -> impl std::future::Future<Output = Result<WriteDone, StoreError>> + Send + 'static {
        let (reply, rx) = oneshot::channel();
        let sent = self.jobs.try_send(Job { op, reply });
        async move {
            match sent {
                Ok(()) => rx
                    .await
                    .unwrap_or_else(|_| Err(StoreError::Internal("writer stopped".into()))),
                Err(TrySendError::Full(_)) => Err(StoreError::Overloaded),
                Err(TrySendError::Disconnected(_)) => {
                    Err(StoreError::Internal("writer stopped".into()))
                }
            }
        }
    }

    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let readers = Arc::clone(&self.readers);
        let permits = Arc::clone(&self.read_permits);
        Box::pin(async move {
            let _permit = permits
                .acquire_owned()
                .await
                .map_err(|_| StoreError::Internal("reader pool closed".into()))?;
            tokio::task::spawn_blocking(move || readers.with(f))
                .await
                .map_err(|e| StoreError::Internal(format!("reader: {e}")))?
        })
    }
}

impl Store for SqliteStore {
    fn epoch(&self) -> &str {
        &self.epoch
    }

    fn create(&self, task: NewTask) -> StoreFuture<'_, Created> {
        let done = self.write(Op::Create(task));
        Box::pin(async move { done.await?.created() })
    }

    fn replay(&self, tenant: String, idem: Idempotency) -> StoreFuture<'_, Option<Created>> {
        self.read(move |conn| replay(conn, &tenant, &idem))
    }

    fn create_batch(&self, batch: NewBatch) -> StoreFuture<'_, BatchCreated> {
        let done = self.write(Op::CreateBatch(batch));
        Box::pin(async move { done.await?.batch_created() })
    }

    fn replay_batch(
        &self,
        tenant: String,
        idem: Idempotency,
    ) -> StoreFuture<'_, Option<BatchCreated>> {
        self.read(move |conn| batches::replay_batch(conn, &tenant, &idem))
    }

    fn resume_batch(
        &self,
        tenant: String,
        id: String,
        cursor: u64,
        force_snapshot: bool,
    ) -> StoreFuture<'_, BatchAnswer> {
        let retention = self.retention;
        self.read(move |conn| {
            batches::resume_batch(conn, (&tenant, &id), cursor, force_snapshot, retention)
        })
    }

    fn get(&self, tenant: String, id: String) -> StoreFuture<'_, TaskRecord> {
        self.read(move |conn| load_own_task(conn, &tenant, &id)?.ok_or(StoreError::NotFound(id)))
    }

    fn resume(
        &self,
        tenant: String,
        id: String,
        cursor: u64,
        force_snapshot: bool,
    ) -> StoreFuture<'_, ResumeAnswer> {
        let retention = self.retention;
        self.read(move |conn| {
            let tx = conn.transaction()?;
            let view = load_own_task(&tx, &tenant, &id)?
                .ok_or_else(|| StoreError::NotFound(id.clone()))?
                .view;
            resume_plan(view.version, cursor, retention, force_snapshot)
                .answer(view, || history_after(&tx, &id, cursor))
        })
    }

    fn history(
        &self,
        tenant: String,
        id: String,
    ) -> StoreFuture<'_, (TaskView, Vec<HistoryEntry>)> {
        self.read(move |conn| {
            let tx = conn.transaction()?;
            let view = load_own_task(&tx, &tenant, &id)?
                .ok_or_else(|| StoreError::NotFound(id.clone()))?
                .view;
            Ok((view, history_after(&tx, &id, 0)?))
        })
    }

    fn task_tenant(&self, id: String) -> StoreFuture<'_, Option<String>> {
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT tenant FROM tasks WHERE id = ?1")?
                .query_row(params![id], |r| r.get(0))
                .optional()?)
        })
    }

    fn callback(&self, callback: Callback) -> StoreFuture<'_, CallbackAnswer> {
        let done = self.write(Op::Callback(callback));
        Box::pin(async move { done.await?.callback() })
    }

    fn act(&self, action: Action) -> StoreFuture<'_, Acted> {
        let done = self.write(Op::Act(action));
        Box::pin(async move { done.await?.acted() })
    }

    fn cancel_batch(&self, cancel: BatchCancel) -> StoreFuture<'_, BatchCancelled> {
        let done = self.write(Op::CancelBatch(cancel));
        Box::pin(async move { done.await?.batch_cancelled() })
    }

    fn deliver(
        &self,
        tenant: String,
        id: String,
        key: String,
        now_ms: f64,
    ) -> StoreFuture<'_, Delivery> {
        let done = self.write(Op::Deliver {
            tenant,
            id,
            key,
            now_ms,
        });
        Box::pin(async move { done.await?.delivery() })
    }

    fn notifications(
        &self,
        tenant: String,
        after: u64,
        limit: u32,
    ) -> StoreFuture<'_, Vec<OutboxEntry>> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT seq, key, task_id, state, at_ms, tenant, attempts FROM outbox
                 WHERE tenant = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            let rows = stmt.query_map(params![tenant, to_i64(after), limit], sweep::outbox_row)?;
            rows.map(|r| r.map_err(StoreError::from).and_then(|(_, r)| r))
                .collect()
        })
    }

    fn expire_due(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, Swept> {
        let done = self.write(Op::SweepDue {
            sweep: &TTL,
            now_ms,
            limit,
        });
        Box::pin(async move { done.await?.expired() })
    }

    fn lifecycle_due(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, Swept> {
        let done = self.write(Op::SweepDue {
            sweep: &LIFECYCLE,
            now_ms,
            limit,
        });
        Box::pin(async move { done.await?.expired() })
    }

    /// One instance only, so nothing is claimed (`lease_ms` is unused):
    /// leaving out the sender's rows in flight is enough.
    fn pending_webhooks(&self, claim: WebhookClaim) -> StoreFuture<'_, PendingWebhooks> {
        let now_ms = claim.now_ms;
        let read = self.read(move |conn| sweep::pending_webhooks(conn, &claim));
        Box::pin(async move {
            let (rows, bad) = read.await?;
            let quarantined = if bad.is_empty() {
                Vec::new()
            } else {
                self.write(Op::QuarantineOutbox { rows: bad, now_ms })
                    .await?
                    .quarantined()?
            };
            Ok(PendingWebhooks { rows, quarantined })
        })
    }

    fn webhook_attempted(&self, seq: u64, sent: bool, next_attempt_ms: f64) -> StoreFuture<'_, ()> {
        let done = self.write(Op::Webhook {
            seq,
            sent,
            next_attempt_ms,
        });
        Box::pin(async move { done.await.map(drop) })
    }

    fn forget_used_callbacks(&self, now_ms: f64) -> StoreFuture<'_, ()> {
        let done = self.write(Op::ForgetUsedCallbacks { now_ms });
        Box::pin(async move { done.await.map(drop) })
    }

    fn claim(&self, claim: super::Claim) -> StoreFuture<'_, super::Claimed> {
        let done = self.write(Op::Claim(claim));
        Box::pin(async move { done.await?.claimed() })
    }

    fn queue_depth(&self, now_ms: f64) -> StoreFuture<'_, Vec<super::QueueDepth>> {
        self.read(move |conn| work::queue_depth(conn, now_ms))
    }

    fn outbox_backlog(&self) -> StoreFuture<'_, super::OutboxBacklog> {
        self.read(|conn| super::backlog::sqlite(conn))
    }

    fn append_output(
        &self,
        append: super::OutputAppend,
    ) -> StoreFuture<'_, taskwire_core::Appended> {
        let done = self.write(Op::Output(append));
        Box::pin(async move { done.await?.output() })
    }

    fn read_output(
        &self,
        tenant: String,
        id: String,
        wanted: super::OutputWanted,
    ) -> StoreFuture<'_, taskwire_core::output::Catchup> {
        self.read(move |conn| output::read_output(conn, &tenant, &id, &wanted))
    }
}

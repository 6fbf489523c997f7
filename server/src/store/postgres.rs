//! The PostgreSQL store: the same [`Store`] contract as SQLite, for
//! several `taskwire-server` instances sharing one database
//! (`--data postgres://…`). Pure Rust: `tokio-postgres` and a
//! `deadpool-postgres` pool, no libpq.
//!
//! **Writes: group commit per instance.** Creates, callbacks and deliveries
//! are jobs on a queue. A writer task (`--pg-writers`, default 1) takes
//! every job waiting (up to `max_batch`), runs them in one transaction and
//! COMMITs once; only then
//! are the changes published and the answers sent. Each accepted callback's
//! transition, history entry, callback id and outbox row are in that
//! transaction, so they commit together, before the answer (the same rule
//! as SQLite).
//!
//! **Concurrent writers** (other writer tasks, other instances) are
//! serialized by the database: a callback reads its task with
//! `SELECT … FOR UPDATE`, so two callbacks for one task run one after the
//! other, each on the other's committed result — versions stay contiguous,
//! and a callback id found in `callbacks` is answered `duplicate-callback`
//! wherever it arrives. The outbox key is UNIQUE as a last guard. A
//! callback id the tenant used on another task is refused; two
//! transactions racing one id on two tasks meet at the `callbacks` key,
//! (tenant, callback id) hashed: the second waits for the first, fails if
//! it committed, and its batch runs again and finds the row
//! ([`callback_ids`]).
//!
//! **No deadlocks by construction.** Every transaction takes its blocking
//! locks in one global order: (0) advisory locks on idempotency and
//! delivery keys, by lock id; (1) task rows, in one `ORDER BY id … FOR
//! UPDATE` statement per batch; (1b) the rows of the task batches whose
//! items it appends history to, by batch id, at the flush
//! (`postgres/batches.rs`); (2) advisory locks on the tenants whose
//! outbox it appends to, by lock id, just before the outbox insert. The
//! sweeper takes its rows with `SKIP LOCKED` (it never waits for a row).
//! A deadlock or serialization failure would still only roll the batch
//! back, and it is retried.
//!
//! **Feed order.** The per-tenant outbox lock is held from the `seq`
//! allocation to the COMMIT, so a tenant's `seq` values become visible in
//! order: a reader paging with `after` never skips a row that commits
//! later with a smaller `seq`.
//!
//! **Batch cursors** (PROTOCOL.md §Batches) are raised once per
//! transaction, under the batch row's lock held to the COMMIT, so that
//! they commit in order on every writer and instance (the argument is in
//! `postgres/batches.rs`).
//!
//! **Cross-instance wake-ups.** Each write transaction ends with
//! `pg_notify('taskwire', …)` listing `version taskId` for every task it
//! changed and `b seq batchId` for every batch cursor it raised; NOTIFY
//! is delivered on COMMIT only. Each instance keeps one
//! dedicated LISTEN connection (not from the pool); for tasks watched on
//! that instance and not yet known at that version, it re-reads the task
//! and its recent history once and publishes it to the hub, however many
//! waiters there are. On a lost LISTEN connection it reconnects and
//! re-reads every watched task, so no waiter misses a commit. A batch
//! line wakes the batch's waiters here, which read the batch themselves;
//! after a reconnect every watched batch's cursor is read again.
//!
//! **Files.** This file: the options, opening (schema, writers, listener)
//! and the [`Store`] methods, which queue a job or call a read. The writer
//! loop, its lock order and retries are in `postgres/writer.rs`; what one
//! transaction writes and its flush in `postgres/batch.rs`; the jobs in
//! `postgres/callback.rs` (with the prefetch) and `postgres/jobs.rs`;
//! batches of tasks (their create, follow and cursor) in
//! `postgres/batches.rs`; the
//! reads and row parsing in `postgres/read.rs`; LISTEN in
//! `postgres/listen.rs`; the sweeps and error sorting in
//! `postgres/sweep.rs` and `postgres/errors.rs`.

mod batch;
mod batch_cancel;
mod batches;
mod callback;
mod errors;
mod jobs;
mod listen;
mod output;
mod read;
mod sweep;
mod work;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use taskwire_core::{Delivery, HistoryEntry, ResumeAnswer, TaskView};
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

use super::postgres_schema;
use super::{
    callback_ids, Acted, Action, BatchAnswer, BatchCancel, BatchCancelled, BatchCreated, Callback,
    CallbackAnswer, Created, Idempotency, NewBatch, NewTask, OutboxEntry, PendingWebhooks, Store,
    StoreError, StoreFuture, Swept, TaskRecord, WebhookClaim, WriteDone,
};
use crate::hub::Hub;
use errors::pool_error;
use listen::listen;
use writer::{order_of, writer, Job, Op};
/// The NOTIFY channel.
pub const CHANNEL: &str = "taskwire";
/// `application_name` of the LISTEN connections (pooled ones are
/// `taskwire-server`).
pub const LISTENER_NAME: &str = "taskwire-listener";
/// Writes queued beyond this answer 503 instead of growing memory.
const QUEUE: usize = 16_384;

/// How an instance connects: `--data postgres://…` and the pool size.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// The connection URL.
    pub url: String,
    /// Pooled connections (writers and reads); the LISTEN connection is extra.
    pub pool: usize,
    /// Writer tasks (each holds a pooled connection while it commits a
    /// batch); at least 1, at most `pool - 1`.
    pub writers: usize,
    /// Most jobs in one transaction (1 disables group commit).
    pub max_batch: usize,
    /// Resume window in versions.
    pub retention: u64,
}

impl PgOptions {
    fn writer_tasks(&self) -> usize {
        self.writers.clamp(1, self.pool.max(2) - 1)
    }
}

/// The PostgreSQL implementation of [`Store`].
pub struct PostgresStore {
    jobs: mpsc::Sender<Job>,
    pool: Pool,
    hub: Arc<Hub>,
    retention: u64,
    listener: JoinHandle<()>,
    epoch: String,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // The writers stop when the queue's sender goes; the listener and
        // its connection stop here.
        self.listener.abort();
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some(pair) => pair,
        None => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

impl PostgresStore {
    /// Connects, creates the schema if needed, starts the writers and the
    /// LISTEN connection (returns once it listens).
    pub async fn open(opts: PgOptions, hub: Arc<Hub>) -> Result<Self, String> {
        let shown = redact(&opts.url);
        let mut config: tokio_postgres::Config = opts
            .url
            .parse()
            .map_err(|e| format!("--data {shown}: {e}"))?;
        config
            .application_name("taskwire-server")
            // Every statement is prepared once per connection; plan it for
            // its actual arrays and the tables' current size each time. A
            // cached generic plan made while the tables were small would
            // keep seq-scanning them as they grow.
            .options("-c plan_cache_mode=force_custom_plan")
            .connect_timeout(Duration::from_secs(10))
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10));
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(opts.pool.max(2))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| format!("--data {shown}: {e}"))?;
        {
            let mut client = pool
                .get()
                .await
                .map_err(|e| format!("--data {shown}: {e}"))?;
            let schema = format!(
                "{}{}{}{}{}",
                postgres_schema::SCHEMA,
                super::quarantine::POSTGRES_SCHEMA,
                callback_ids::POSTGRES,
                super::callback_replays::POSTGRES,
                super::epoch::POSTGRES_SCHEMA
            ) + super::output::POSTGRES_SCHEMA;
            let prepared = postgres_schema::prepare(&mut client, &schema)
                .await
                .map_err(|e| format!("--data {shown}: schema: {e}"))?;
            if prepared.from != 0 && prepared.from < postgres_schema::CURRENT {
                eprintln!(
                    "taskwire-server: {shown}: migrated from schema {} to {} ({} callback events now stored once)",
                    prepared.from,
                    postgres_schema::CURRENT,
                    prepared.callbacks_referenced
                );
            }
        }
        let epoch = {
            let client = pool
                .get()
                .await
                .map_err(|e| format!("--data {shown}: {e}"))?;
            super::epoch::postgres_open(&client)
                .await
                .map_err(|e| format!("--data {shown}: {e}"))?
        };
        let (jobs, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(AsyncMutex::new(rx));
        for _ in 0..opts.writer_tasks() {
            tokio::spawn(writer(
                pool.clone(),
                Arc::clone(&rx),
                Arc::clone(&hub),
                opts.max_batch.max(1),
            ));
        }
        let (ready, listening) = oneshot::channel();
        let mut listen_config = config;
        listen_config.application_name(LISTENER_NAME);
        let listener = tokio::spawn(listen(listen_config, Arc::clone(&hub), ready));
        watch_pool(&hub, &pool);
        match listening.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("--data {shown}: LISTEN: {e}")),
            Err(_) => return Err(format!("--data {shown}: LISTEN: listener stopped")),
        }
        Ok(PostgresStore {
            jobs,
            pool,
            hub,
            retention: opts.retention,
            listener,
            epoch,
        })
    }

    fn write(
        &self,
        op: Op,
    ) -> impl std::future::Future<Output = Result<WriteDone, StoreError>> + Send + 'static {
        let (reply, rx) = oneshot::channel();
        let order = order_of(&op);
        let sent = self.jobs.try_send(Job { op, order, reply });
        async move {
            match sent {
                Ok(()) => rx
                    .await
                    .unwrap_or_else(|_| Err(StoreError::Internal("writer stopped".into()))),
                Err(mpsc::error::TrySendError::Full(_)) => Err(StoreError::Overloaded),
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    Err(StoreError::Internal("writer stopped".into()))
                }
            }
        }
    }

    async fn conn(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

/// Lets `/metrics` read the pool's status at scrape time (through a weak
/// handle: the metrics never keep a stopped store's connections open).
fn watch_pool(hub: &Hub, pool: &Pool) {
    let pool = pool.weak();
    hub.metrics.watch_pool(move || {
        let Some(pool) = pool.upgrade() else {
            return crate::metrics::PoolStatus::default();
        };
        let status = pool.status();
        crate::metrics::PoolStatus {
            max_size: status.max_size,
            size: status.size,
            available: status.available,
            waiting: status.waiting,
        }
    });
}

impl Store for PostgresStore {
    fn epoch(&self) -> &str {
        &self.epoch
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
        Box::pin(batches::replay_batch(self, tenant, idem))
    }

    fn resume_batch(
        &self,
        tenant: String,
        id: String,
        cursor: u64,
        force_snapshot: bool,
    ) -> StoreFuture<'_, BatchAnswer> {
        Box::pin(batches::resume_batch(
            self,
            (tenant, id),
            cursor,
            force_snapshot,
        ))
    }

    fn create(&self, task: NewTask) -> StoreFuture<'_, Created> {
        let done = self.write(Op::Create(task));
        Box::pin(async move { done.await?.created() })
    }

    fn replay(&self, tenant: String, idem: Idempotency) -> StoreFuture<'_, Option<Created>> {
        Box::pin(read::replay(self, tenant, idem))
    }

    fn get(&self, tenant: String, id: String) -> StoreFuture<'_, TaskRecord> {
        Box::pin(read::get(self, tenant, id))
    }

    fn resume(
        &self,
        tenant: String,
        id: String,
        cursor: u64,
        force_snapshot: bool,
    ) -> StoreFuture<'_, ResumeAnswer> {
        Box::pin(read::resume(self, tenant, id, cursor, force_snapshot))
    }

    fn history(
        &self,
        tenant: String,
        id: String,
    ) -> StoreFuture<'_, (TaskView, Vec<HistoryEntry>)> {
        Box::pin(read::history(self, tenant, id))
    }

    fn task_tenant(&self, id: String) -> StoreFuture<'_, Option<String>> {
        Box::pin(read::task_tenant(self, id))
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
        Box::pin(read::notifications(self, tenant, after, limit))
    }

    fn expire_due(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, Swept> {
        Box::pin(sweep::sweep_tasks(self, &super::sweep::TTL, now_ms, limit))
    }

    fn lifecycle_due(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, Swept> {
        Box::pin(sweep::sweep_tasks(
            self,
            &super::sweep::LIFECYCLE,
            now_ms,
            limit,
        ))
    }

    fn pending_webhooks(&self, claim: WebhookClaim) -> StoreFuture<'_, PendingWebhooks> {
        Box::pin(sweep::pending_webhooks(self, claim))
    }

    fn webhook_attempted(&self, seq: u64, sent: bool, next_attempt_ms: f64) -> StoreFuture<'_, ()> {
        Box::pin(sweep::record_attempt(self, seq, sent, next_attempt_ms))
    }

    fn forget_used_callbacks(&self, now_ms: f64) -> StoreFuture<'_, ()> {
        Box::pin(sweep::forget_used_callbacks(self, now_ms))
    }

    fn claim(&self, claim: super::Claim) -> StoreFuture<'_, super::Claimed> {
        let done = self.write(Op::Claim(claim));
        Box::pin(async move { done.await?.claimed() })
    }

    fn queue_depth(&self, now_ms: f64) -> StoreFuture<'_, Vec<super::QueueDepth>> {
        Box::pin(async move { work::queue_depth(&self.conn().await?, now_ms).await })
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
        Box::pin(output::read_output(self, tenant, id, wanted))
    }

    fn outbox_backlog(&self) -> StoreFuture<'_, super::OutboxBacklog> {
        Box::pin(async move { super::backlog::postgres(&self.conn().await?).await })
    }
}

#[cfg(test)]
mod tests;

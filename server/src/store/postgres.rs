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
//! transactions racing one id on two tasks meet at the UNIQUE
//! `(tenant, callback_id)` index: the second waits for the first, fails if
//! it committed, and its batch runs again and finds the row
//! ([`callback_ids`]).
//!
//! **No deadlocks by construction.** Every transaction takes its blocking
//! locks in one global order: (0) advisory locks on idempotency and
//! delivery keys, by lock id; (1) task rows, in one `ORDER BY id … FOR
//! UPDATE` statement per batch; (2) advisory locks on the tenants whose
//! outbox it appends to, by lock id, just before the outbox insert. The sweeper takes its rows with `SKIP LOCKED` (it never
//! waits for a row). A deadlock or serialization failure would still only
//! roll the batch back, and it is retried.
//!
//! **Feed order.** The per-tenant outbox lock is held from the `seq`
//! allocation to the COMMIT, so a tenant's `seq` values become visible in
//! order: a reader paging with `after` never skips a row that commits
//! later with a smaller `seq`.
//!
//! **Cross-instance wake-ups.** Each write transaction ends with
//! `pg_notify('taskwire', …)` listing `version taskId` for every task it
//! changed; NOTIFY is delivered on COMMIT only. Each instance keeps one
//! dedicated LISTEN connection (not from the pool); for tasks watched on
//! that instance and not yet known at that version, it re-reads the task
//! and its recent history once and publishes it to the hub, however many
//! waiters there are. On a lost LISTEN connection it reconnects and
//! re-reads every watched task, so no waiter misses a commit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Transaction,
};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use taskwire_core::wire::{from_json, to_json};
use taskwire_core::{
    check_callback, check_delivery_input, decide_delivery, notification_key, plan_resume, Delivery,
    DeliveryReason, Event, HistoryEntry, Reason, Receipt, ResumeAnswer, ResumePlan, TaskView,
};
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};
use tokio::task::JoinHandle;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, NoTls, Row};

use super::callback_ref::{remembered_event, CallbackRef};
use super::lifecycle::{due_column, judge_event, lease_column, parse_lease, Judged};
use super::postgres_schema;
use super::{
    callback_ids, Acted, Action, Callback, CallbackAnswer, Change, Created, NewTask, OutboxEntry,
    PendingWebhooks, RawJson, Store, StoreError, StoreFuture, Swept, TaskRecord, WebhookClaim,
    WriteDone,
};
use crate::hub::Hub;

mod errors;
mod sweep;

use errors::{pg_message, pool_error};

/// The schema (same tables as SQLite). Run by
/// [`postgres_schema::prepare`] in one transaction under an advisory lock,
/// so instances starting together do not race on `CREATE … IF NOT EXISTS`
/// or on a migration.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id            text PRIMARY KEY,
    tenant        text NOT NULL,
    view          text NOT NULL,
    version       bigint NOT NULL,
    live          boolean NOT NULL,
    expires_at_ms double precision NOT NULL,
    kind          text,
    input         text,
    -- The lifecycle (lifecycle.rs): the current attempt's lease, and when
    -- the sweeper must look at the task next (not the TTL).
    lease         text,
    due_at_ms     double precision
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (expires_at_ms) WHERE live;
CREATE INDEX IF NOT EXISTS tasks_lifecycle_due ON tasks (due_at_ms)
    WHERE live AND due_at_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS history (
    task_id text NOT NULL,
    version bigint NOT NULL,
    event   text NOT NULL,
    PRIMARY KEY (task_id, version)
);
-- A remembered callback id names the history entry holding its event;
-- `event` only when the history holds another one (see callback_ref.rs).
CREATE TABLE IF NOT EXISTS callbacks (
    task_id     text NOT NULL,
    callback_id text NOT NULL,
    version     bigint,
    event       text,
    PRIMARY KEY (task_id, callback_id),
    CONSTRAINT callbacks_event_once CHECK ((version IS NULL) <> (event IS NULL))
);
CREATE TABLE IF NOT EXISTS idempotency (
    tenant  text NOT NULL,
    key     text NOT NULL,
    request text NOT NULL,
    task_id text NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE IF NOT EXISTS deliveries (
    tenant  text NOT NULL,
    key     text NOT NULL,
    receipt text NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE IF NOT EXISTS outbox (
    seq             bigserial PRIMARY KEY,
    tenant          text NOT NULL,
    key             text NOT NULL UNIQUE,
    task_id         text NOT NULL,
    state           text NOT NULL,
    at_ms           double precision NOT NULL,
    sent            boolean NOT NULL DEFAULT false,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_ms double precision NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_tenant ON outbox (tenant, seq);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (next_attempt_ms) WHERE NOT sent;
";

/// The NOTIFY channel.
pub const CHANNEL: &str = "taskwire";
/// `application_name` of the LISTEN connections (pooled ones are
/// `taskwire-server`).
pub const LISTENER_NAME: &str = "taskwire-listener";
/// Writes queued beyond this answer 503 instead of growing memory.
const QUEUE: usize = 16_384;
/// NOTIFY payloads must stay under 8,000 bytes.
const PAYLOAD: usize = 7_000;
/// The LISTEN connection is checked when it has been quiet this long.
const HEALTH_EVERY: Duration = Duration::from_secs(5);

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
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // The writers stop when the queue's sender goes; the listener and
        // its connection stop here.
        self.listener.abort();
    }
}

// A task view (in `NewTask`/`Created`) makes one variant ~400 bytes since
// the lifecycle fields (issue 11); each value lives only while its write
// is queued, so boxing would add an allocation per create to save a few
// hundred bytes per queued write.
#[allow(clippy::large_enum_variant)]
enum Op {
    Create(NewTask),
    Callback(Callback),
    Act(Action),
    Deliver {
        tenant: String,
        id: String,
        key: String,
        now_ms: f64,
    },
}

/// Where a job's first blocking lock sits in the global lock order.
type LockOrder = (u8, i64, String);

struct Job {
    op: Op,
    order: LockOrder,
    reply: oneshot::Sender<Result<WriteDone, StoreError>>,
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

/// A 64-bit advisory lock id for a name (the same on every instance).
fn lock_id(parts: &[&str]) -> i64 {
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

fn order_of(op: &Op) -> LockOrder {
    match op {
        Op::Create(task) => match &task.idempotency {
            Some(idem) => (
                0,
                lock_id(&["idem", &task.tenant, &idem.key]),
                String::new(),
            ),
            None => (2, 0, String::new()),
        },
        Op::Deliver { tenant, key, .. } => (0, lock_id(&["delivery", tenant, key]), String::new()),
        Op::Callback(cb) => (1, 0, cb.task_id.clone()),
        Op::Act(action) => (1, 0, action.task_id.clone()),
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
                "{SCHEMA}{}{}",
                super::quarantine::POSTGRES_SCHEMA,
                callback_ids::POSTGRES
            );
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

impl Store for PostgresStore {
    fn create(&self, task: NewTask) -> StoreFuture<'_, Created> {
        let done = self.write(Op::Create(task));
        Box::pin(async move { done.await?.created() })
    }

    fn get(&self, tenant: String, id: String) -> StoreFuture<'_, TaskRecord> {
        Box::pin(async move {
            let client = self.conn().await?;
            // The tenant is in the query: another tenant's row is never
            // read or parsed (no timing difference from an unknown id).
            let stmt = client
                .prepare_cached(
                    "SELECT tenant, view, kind, input, lease FROM tasks WHERE id = $1 AND tenant = $2",
                )
                .await?;
            let row = client.query_opt(&stmt, &[&id, &tenant]).await?;
            row.map(|r| record(&r, 0))
                .transpose()?
                .ok_or(StoreError::NotFound(id))
        })
    }

    fn resume(
        &self,
        tenant: String,
        id: String,
        cursor: u64,
        force_snapshot: bool,
    ) -> StoreFuture<'_, ResumeAnswer> {
        let retention = self.retention;
        Box::pin(async move {
            let client = self.conn().await?;
            // One statement, one snapshot: the view and the entries agree.
            // The join condition is core's Delta case of plan_resume.
            let stmt = client
                .prepare_cached(
                    "SELECT t.tenant, t.view, h.version, h.event FROM tasks t
                     LEFT JOIN history h ON h.task_id = t.id AND h.version > $2
                          AND t.version > $2 AND t.version - $2 <= $3 AND NOT $4
                     WHERE t.id = $1 AND t.tenant = $5 ORDER BY h.version",
                )
                .await?;
            let rows = client
                .query(
                    &stmt,
                    &[
                        &id,
                        &to_i64(cursor),
                        &to_i64(retention),
                        &force_snapshot,
                        &tenant,
                    ],
                )
                .await?;
            let Some(first) = rows.first() else {
                return Err(StoreError::NotFound(id));
            };
            let owner: String = first.try_get(0)?;
            if owner != tenant {
                return Err(StoreError::NotFound(id));
            }
            let view = parse_view(&first.try_get::<_, String>(1)?)?;
            let plan = if force_snapshot {
                ResumePlan::Snapshot
            } else {
                plan_resume(view.version, cursor, retention)
            };
            Ok(match plan {
                ResumePlan::CaughtUp => ResumeAnswer::CaughtUp { task: Some(view) },
                ResumePlan::Snapshot => ResumeAnswer::Snapshot { task: view },
                ResumePlan::Delta => ResumeAnswer::Delta {
                    events: entries(&rows, 2)?,
                    task: Some(view),
                },
            })
        })
    }

    fn task_tenant(&self, id: String) -> StoreFuture<'_, Option<String>> {
        Box::pin(async move {
            let client = self.conn().await?;
            let stmt = client
                .prepare_cached("SELECT tenant FROM tasks WHERE id = $1")
                .await?;
            let row = client.query_opt(&stmt, &[&id]).await?;
            Ok(row.map(|r| r.try_get(0)).transpose()?)
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
        Box::pin(async move {
            let client = self.conn().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT seq, key, task_id, state, at_ms, tenant, attempts FROM outbox
                     WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                )
                .await?;
            let rows = client
                .query(&stmt, &[&tenant, &to_i64(after), &i64::from(limit)])
                .await?;
            rows.iter().map(sweep::outbox_row).collect()
        })
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
}

/// The writes of one transaction, gathered while its jobs run (later jobs
/// see earlier ones through it) and written in a few set-based statements
/// at the end.
#[derive(Default)]
struct Batch {
    /// Tasks this transaction holds (locked, or created by it), as they are
    /// now.
    tasks: HashMap<String, TaskRecord>,
    created: Vec<String>,
    changed: Vec<String>,
    changed_set: HashSet<String>,
    history: Vec<(String, i64, String)>,
    callbacks: HashMap<(String, String), Event>,
    /// (task, callback id, what to store, tenant) of every id remembered.
    callback_rows: Vec<(String, String, CallbackRef, String)>,
    /// (tenant, callback id) of the batch's callbacks that are remembered
    /// on some task (prefetched, then kept up to date).
    claimed: HashSet<(String, String)>,
    idempotency: HashMap<(String, String), (String, String)>,
    deliveries: HashMap<(String, String), Receipt>,
    outbox: Vec<(String, String, String, String, f64)>,
    changes: Vec<Change>,
    /// Tasks whose row (or absence) and callback ids were read up front
    /// for the batch's callbacks (see [`prefetch`]).
    prefetched: HashSet<String>,
    /// Prefetched rows that did not parse.
    broken: HashMap<String, StoreError>,
}

impl Batch {
    /// Records what core judged for one task (see `lifecycle.rs`): the
    /// row (view and lease) when anything moved, each history entry, and
    /// for a terminal change its outbox row at `at_ms`.
    fn judged(&mut self, record: &TaskRecord, judged: &Judged, at_ms: f64) {
        if !judged.write {
            return;
        }
        let id = &record.view.id;
        let Some(rec) = self.tasks.get_mut(id) else {
            return;
        };
        rec.view = record.view.clone();
        rec.lease = record.lease;
        if self.changed_set.insert(id.clone()) {
            self.changed.push(id.clone());
        }
        for appended in &judged.appended {
            let view = &appended.view;
            self.history.push((
                id.clone(),
                to_i64(appended.entry.version),
                to_json(&appended.entry.event),
            ));
            if appended.notify {
                self.outbox.push((
                    record.tenant.clone(),
                    notification_key(id, view.state, view.version),
                    id.clone(),
                    view.state.as_str().to_string(),
                    at_ms,
                ));
            }
            self.changes.push(Change {
                view: view.clone(),
                entry: appended.entry.clone(),
            });
        }
    }

    /// Writes everything, NOTIFY included, in one pipelined round of
    /// statements (the caller COMMITs).
    async fn flush(&self, tx: &Transaction<'_>) -> Result<(), tokio_postgres::Error> {
        // Prepare first (statement order does not matter there); then the
        // executions go out in this order and run in it.
        let sql = [
            "INSERT INTO tasks (id, tenant, view, version, live, expires_at_ms, kind, input, due_at_ms)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bool[],
                                  $6::float8[], $7::text[], $8::text[], $9::float8[])",
            "UPDATE tasks t SET view = u.view, version = u.version, live = u.live,
                                lease = u.lease, due_at_ms = u.due_at_ms
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bool[], $5::text[], $6::float8[])
                  AS u(id, view, version, live, lease, due_at_ms)
             WHERE t.id = u.id",
            "INSERT INTO history (task_id, version, event)
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])",
            "INSERT INTO callbacks (task_id, callback_id, version, event, tenant)
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[])",
            "INSERT INTO idempotency (tenant, key, request, task_id)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])",
            "INSERT INTO deliveries (tenant, key, receipt)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[])",
            // Function scans run in array order: the locks are taken sorted.
            "SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS l(k)",
            "INSERT INTO outbox (tenant, key, task_id, state, at_ms)
             SELECT t, k, i, s, a FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                                              $5::float8[]) WITH ORDINALITY AS u(t, k, i, s, a, n)
             ORDER BY n",
            "SELECT pg_notify($1, $2)",
        ];
        let mut stmts = Vec::with_capacity(sql.len());
        for s in sql {
            stmts.push(tx.prepare_cached(s).await?);
        }

        let created: Vec<&TaskRecord> = self
            .created
            .iter()
            .filter_map(|id| self.tasks.get(id))
            .collect();
        let c_id: Vec<&str> = created.iter().map(|r| r.view.id.as_str()).collect();
        let c_tenant: Vec<&str> = created.iter().map(|r| r.tenant.as_str()).collect();
        let c_view: Vec<String> = created.iter().map(|r| to_json(&r.view)).collect();
        let c_version: Vec<i64> = created.iter().map(|r| to_i64(r.view.version)).collect();
        let c_live: Vec<bool> = created
            .iter()
            .map(|r| !r.view.state.is_terminal())
            .collect();
        let c_expires: Vec<f64> = created.iter().map(|r| r.view.expires_at_ms).collect();
        let c_kind: Vec<Option<&str>> = created.iter().map(|r| r.kind.as_deref()).collect();
        let c_input: Vec<Option<&str>> = created
            .iter()
            .map(|r| r.input.as_ref().map(RawJson::as_str))
            .collect();
        let c_due: Vec<Option<f64>> = created.iter().map(|r| due_column(r)).collect();

        let created_set: HashSet<&str> = c_id.iter().copied().collect();
        let updated: Vec<&TaskRecord> = self
            .changed
            .iter()
            .filter(|id| !created_set.contains(id.as_str()))
            .filter_map(|id| self.tasks.get(id))
            .collect();
        let u_id: Vec<&str> = updated.iter().map(|r| r.view.id.as_str()).collect();
        let u_view: Vec<String> = updated.iter().map(|r| to_json(&r.view)).collect();
        let u_version: Vec<i64> = updated.iter().map(|r| to_i64(r.view.version)).collect();
        let u_live: Vec<bool> = updated
            .iter()
            .map(|r| !r.view.state.is_terminal())
            .collect();
        let u_lease: Vec<Option<String>> = updated.iter().map(|r| lease_column(r)).collect();
        let u_due: Vec<Option<f64>> = updated.iter().map(|r| due_column(r)).collect();

        let h_task: Vec<&str> = self.history.iter().map(|h| h.0.as_str()).collect();
        let h_version: Vec<i64> = self.history.iter().map(|h| h.1).collect();
        let h_event: Vec<&str> = self.history.iter().map(|h| h.2.as_str()).collect();

        let cb_task: Vec<&str> = self.callback_rows.iter().map(|c| c.0.as_str()).collect();
        let cb_id: Vec<&str> = self.callback_rows.iter().map(|c| c.1.as_str()).collect();
        let cb_version: Vec<Option<i64>> = self.callback_rows.iter().map(|c| c.2.version).collect();
        let cb_event: Vec<Option<&str>> = self
            .callback_rows
            .iter()
            .map(|c| c.2.event.as_deref())
            .collect();
        let cb_tenant: Vec<&str> = self.callback_rows.iter().map(|c| c.3.as_str()).collect();

        let i_tenant: Vec<&str> = self.idempotency.keys().map(|k| k.0.as_str()).collect();
        let i_key: Vec<&str> = self.idempotency.keys().map(|k| k.1.as_str()).collect();
        let i_request: Vec<&str> = self.idempotency.values().map(|v| v.0.as_str()).collect();
        let i_task: Vec<&str> = self.idempotency.values().map(|v| v.1.as_str()).collect();

        let d_tenant: Vec<&str> = self.deliveries.keys().map(|k| k.0.as_str()).collect();
        let d_key: Vec<&str> = self.deliveries.keys().map(|k| k.1.as_str()).collect();
        let d_receipt: Vec<String> = self.deliveries.values().map(to_json).collect();

        let mut tenant_locks: Vec<i64> = self
            .outbox
            .iter()
            .map(|o| lock_id(&["outbox", &o.0]))
            .collect();
        tenant_locks.sort_unstable();
        tenant_locks.dedup();
        let o_tenant: Vec<&str> = self.outbox.iter().map(|o| o.0.as_str()).collect();
        let o_key: Vec<&str> = self.outbox.iter().map(|o| o.1.as_str()).collect();
        let o_task: Vec<&str> = self.outbox.iter().map(|o| o.2.as_str()).collect();
        let o_state: Vec<&str> = self.outbox.iter().map(|o| o.3.as_str()).collect();
        let o_at: Vec<f64> = self.outbox.iter().map(|o| o.4).collect();

        let payloads = notify_payloads(&self.changes);

        let mut calls: Vec<(usize, Vec<&(dyn ToSql + Sync)>)> = Vec::new();
        if !c_id.is_empty() {
            calls.push((
                0,
                vec![
                    &c_id, &c_tenant, &c_view, &c_version, &c_live, &c_expires, &c_kind, &c_input,
                    &c_due,
                ],
            ));
        }
        if !u_id.is_empty() {
            calls.push((
                1,
                vec![&u_id, &u_view, &u_version, &u_live, &u_lease, &u_due],
            ));
        }
        if !h_task.is_empty() {
            calls.push((2, vec![&h_task, &h_version, &h_event]));
        }
        if !cb_task.is_empty() {
            calls.push((
                3,
                vec![&cb_task, &cb_id, &cb_version, &cb_event, &cb_tenant],
            ));
        }
        if !i_tenant.is_empty() {
            calls.push((4, vec![&i_tenant, &i_key, &i_request, &i_task]));
        }
        if !d_tenant.is_empty() {
            calls.push((5, vec![&d_tenant, &d_key, &d_receipt]));
        }
        if !o_key.is_empty() {
            calls.push((6, vec![&tenant_locks]));
            calls.push((7, vec![&o_tenant, &o_key, &o_task, &o_state, &o_at]));
        }
        let channel = CHANNEL;
        for p in &payloads {
            calls.push((8, vec![&channel, p]));
        }
        // try_join_all polls in order: each execution is sent, in order,
        // on its first poll; the server runs them in that order.
        let futures = calls
            .iter()
            .map(|(i, params)| tx.execute(&stmts[*i], params.as_slice()));
        futures_util::future::try_join_all(futures).await?;
        Ok(())
    }
}

/// NOTIFY payloads: lines of `version taskId`, the last version per task,
/// split to stay under the payload limit.
fn notify_payloads(changes: &[Change]) -> Vec<String> {
    let mut last: HashMap<&str, u64> = HashMap::new();
    let mut order = Vec::new();
    for c in changes {
        if last.insert(c.view.id.as_str(), c.view.version).is_none() {
            order.push(c.view.id.as_str());
        }
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    for id in order {
        let line = format!("{} {id}\n", last[id]);
        if !cur.is_empty() && cur.len() + line.len() > PAYLOAD {
            out.push(std::mem::take(&mut cur));
        }
        cur.push_str(&line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn parse_payload(payload: &str, into: &mut HashMap<String, u64>) {
    for line in payload.lines() {
        let Some((version, id)) = line.split_once(' ') else {
            continue;
        };
        let Ok(version) = version.parse::<u64>() else {
            continue;
        };
        let v = into.entry(id.to_string()).or_insert(0);
        *v = (*v).max(version);
    }
}

fn hub_publish(hub: &Hub, batch: &Batch) {
    hub.publish(&batch.changes);
    if !batch.outbox.is_empty() {
        hub.outbox.notify_one();
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
type Sql<T> = Result<Result<T, StoreError>, tokio_postgres::Error>;

type Results = Vec<Result<WriteDone, StoreError>>;

/// A writer task: group commit (see the module docs).
async fn writer(
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
        match commit(&pool, &jobs).await {
            Ok((results, batch)) => finish(&hub, jobs, results, &batch),
            Err(BatchError::RolledBack(_) | BatchError::Retry(_)) if jobs.len() > 1 => {
                // One job's statement failed and took the batch with it:
                // run each alone, so only that one fails.
                for job in jobs {
                    let one = [job];
                    let outcome = commit(&pool, &one).await;
                    let [job] = one;
                    match outcome {
                        Ok((results, batch)) => finish(&hub, vec![job], results, &batch),
                        Err(
                            BatchError::Retry(e)
                            | BatchError::RolledBack(e)
                            | BatchError::Unavailable(e)
                            | BatchError::Unknown(e),
                        ) => {
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
                for job in jobs {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Durable now: wake the watchers, then answer.
fn finish(hub: &Hub, jobs: Vec<Job>, results: Results, batch: &Batch) {
    hub_publish(hub, batch);
    for (job, result) in jobs.into_iter().zip(results) {
        let _ = job.reply.send(result);
    }
}

/// Runs the jobs in one transaction, retrying deadlock/serialization
/// failures (rolled back, so safe to run again).
async fn commit(pool: &Pool, jobs: &[Job]) -> Result<(Results, Batch), BatchError> {
    let mut tries: u64 = 0;
    loop {
        match run_batch(pool, jobs).await {
            Err(BatchError::Retry(_)) if tries < 8 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(tries * 2)).await;
            }
            other => return other,
        }
    }
}

async fn run_batch(pool: &Pool, jobs: &[Job]) -> Result<(Results, Batch), BatchError> {
    let mut client = pool
        .get()
        .await
        .map_err(|e| BatchError::Unavailable(pool_error(e)))?;
    let tx = client.transaction().await.map_err(classify)?;
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
            Op::Callback(cb) => callback(&tx, &mut batch, cb)
                .await
                .map(|r| r.map(WriteDone::Callback)),
            Op::Act(action) => act(&tx, &mut batch, action)
                .await
                .map(|r| r.map(WriteDone::Acted)),
            Op::Deliver {
                tenant,
                id,
                key,
                now_ms,
            } => deliver(&tx, &mut batch, tenant, id, key, *now_ms)
                .await
                .map(|r| r.map(WriteDone::Delivery)),
        };
        results.push(result.map_err(classify)?);
    }
    batch.flush(&tx).await.map_err(classify)?;
    tx.commit()
        .await
        .map_err(|e| BatchError::Unknown(e.into()))?;
    Ok((results, batch))
}

/// Locks the rows of every task the batch's callbacks are about, in id
/// order (one statement), then reads their callback ids (a second
/// statement, pipelined: a fresh READ COMMITTED snapshot taken once the
/// locks are held, so it sees what the previous holders committed).
async fn prefetch(
    tx: &Transaction<'_>,
    b: &mut Batch,
    jobs: &[Job],
) -> Result<(), tokio_postgres::Error> {
    let mut ids: Vec<&str> = Vec::new();
    let mut keys: (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let mut owner_keys: (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for job in jobs {
        if let Op::Callback(cb) = &job.op {
            if !b.tasks.contains_key(&cb.task_id) {
                ids.push(&cb.task_id);
            }
            keys.0.push(&cb.task_id);
            keys.1.push(&cb.callback_id);
            owner_keys.0.push(&cb.tenant);
            owner_keys.1.push(&cb.callback_id);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let lock = tx
        .prepare_cached(
            "SELECT id, tenant, view, kind, input, lease FROM tasks
             WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE",
        )
        .await?;
    // Exact pairs: planned per execution (force_custom_plan), the array's
    // length is known and this is a nested loop over the primary key.
    let seen = tx
        .prepare_cached(
            "SELECT c.task_id, c.callback_id, coalesce(c.event, h.event)
             FROM unnest($1::text[], $2::text[]) AS k(task_id, callback_id)
             JOIN callbacks c ON c.task_id = k.task_id AND c.callback_id = k.callback_id
             LEFT JOIN history h ON h.task_id = c.task_id AND h.version = c.version",
        )
        .await?;
    let owners = tx.prepare_cached(callback_ids::POSTGRES_OWNERS).await?;
    let (rows, seen_rows, owner_rows) = futures_util::future::try_join3(
        tx.query(&lock, &[&ids]),
        tx.query(&seen, &[&keys.0, &keys.1]),
        tx.query(&owners, &[&owner_keys.0, &owner_keys.1]),
    )
    .await?;
    for row in &owner_rows {
        b.claimed.insert((row.try_get(0)?, row.try_get(1)?));
    }
    for row in &rows {
        let id: String = row.try_get(0)?;
        match record(row, 1) {
            Ok(rec) => {
                b.tasks.insert(id, rec);
            }
            Err(e) => {
                b.broken.insert(id, e);
            }
        }
    }
    b.prefetched.extend(ids.iter().map(|id| id.to_string()));
    for row in &seen_rows {
        let task: String = row.try_get(0)?;
        let callback: String = row.try_get(1)?;
        let text: Option<String> = row.try_get(2)?;
        match remembered_event(text, &task, &callback) {
            Ok(event) => {
                b.callbacks.insert((task, callback), event);
            }
            Err(e) => {
                b.broken.insert(task, e);
            }
        }
    }
    Ok(())
}

async fn create(tx: &Transaction<'_>, b: &mut Batch, task: &NewTask) -> Sql<Created> {
    if let Some(idem) = &task.idempotency {
        let (key, request) = (&idem.key, &idem.request);
        let ik = (task.tenant.clone(), key.clone());
        let seen = match b.idempotency.get(&ik) {
            Some(v) => Some(v.clone()),
            None => {
                let lock = tx
                    .prepare_cached("SELECT pg_advisory_xact_lock($1)")
                    .await?;
                let select = tx
                    .prepare_cached(
                        "SELECT request, task_id FROM idempotency WHERE tenant = $1 AND key = $2",
                    )
                    .await?;
                let id = lock_id(&["idem", &task.tenant, key]);
                let (_, row) = futures_util::future::try_join(
                    tx.execute(&lock, &[&id]),
                    tx.query_opt(&select, &[&task.tenant, key]),
                )
                .await?;
                match row {
                    Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
                    None => None,
                }
            }
        };
        if let Some((seen_request, task_id)) = seen {
            if !idem.same_as(&seen_request) {
                return Ok(Err(StoreError::IdempotencyKeyReused(key.clone())));
            }
            let record = match b.tasks.get(&task_id) {
                Some(r) => Some(r.clone()),
                None => match load_own(tx, &task.tenant, &task_id).await? {
                    Ok(r) => r,
                    Err(e) => return Ok(Err(e)),
                },
            };
            return Ok(match record {
                Some(record) => Ok(Created {
                    record,
                    created: false,
                }),
                None => Err(StoreError::Internal(format!(
                    "idempotency row points at missing task {task_id}"
                ))),
            });
        }
        b.idempotency
            .insert(ik, (request.clone(), task.view.id.clone()));
    }
    let record = TaskRecord {
        tenant: task.tenant.clone(),
        view: task.view.clone(),
        kind: task.kind.clone(),
        input: task.input.clone(),
        lease: None,
    };
    b.tasks.insert(task.view.id.clone(), record.clone());
    b.created.push(task.view.id.clone());
    Ok(Ok(Created {
        record,
        created: true,
    }))
}

/// The event a remembered callback id first carried (see callback_ref.rs).
const SEEN_CALLBACK: &str = "SELECT coalesce(c.event, h.event) FROM callbacks c
     LEFT JOIN history h ON h.task_id = c.task_id AND h.version = c.version
     WHERE c.task_id = $1 AND c.callback_id = $2";

async fn callback(tx: &Transaction<'_>, b: &mut Batch, cb: &Callback) -> Sql<CallbackAnswer> {
    let key = (cb.task_id.clone(), cb.callback_id.clone());
    if let Some(e) = b.broken.get(&cb.task_id) {
        return Ok(Err(e.clone()));
    }
    if b.tasks
        .get(&cb.task_id)
        .is_some_and(|r| r.tenant != cb.tenant)
    {
        return Ok(Err(StoreError::NotFound(cb.task_id.clone())));
    }
    let prefetched = b.prefetched.contains(&cb.task_id);
    let (record, seen) = match b.tasks.get(&cb.task_id) {
        // Already locked (or created) by this transaction.
        Some(rec) => {
            let rec = rec.clone();
            let seen = match b.callbacks.get(&key) {
                Some(event) => Some(event.clone()),
                // Prefetched: its callback ids were read with it.
                None if prefetched => None,
                None => {
                    let stmt = tx.prepare_cached(SEEN_CALLBACK).await?;
                    let row = tx.query_opt(&stmt, &[&cb.task_id, &cb.callback_id]).await?;
                    match row.map(|r| r.try_get::<_, Option<String>>(0)).transpose()? {
                        Some(text) => match remembered_event(text, &cb.task_id, &cb.callback_id) {
                            Ok(e) => Some(e),
                            Err(e) => return Ok(Err(e)),
                        },
                        None => None,
                    }
                }
            };
            (rec, seen)
        }
        None if prefetched => return Ok(Err(StoreError::NotFound(cb.task_id.clone()))),
        None => {
            // The row lock serializes every writer of this task, on every
            // instance: whoever comes second reads the first one's commit.
            // The callback id is read by a second statement, pipelined
            // after the lock: under READ COMMITTED it takes a fresh
            // snapshot once the lock is held (a join inside the locking
            // statement would see the callbacks table as it was before
            // the wait).
            let lock = tx
                .prepare_cached(
                    "SELECT tenant, view, kind, input, lease FROM tasks WHERE id = $1 FOR UPDATE",
                )
                .await?;
            let seen_stmt = tx.prepare_cached(SEEN_CALLBACK).await?;
            let (row, seen_row) = futures_util::future::try_join(
                tx.query_opt(&lock, &[&cb.task_id]),
                tx.query_opt(&seen_stmt, &[&cb.task_id, &cb.callback_id]),
            )
            .await?;
            let Some(row) = row else {
                return Ok(Err(StoreError::NotFound(cb.task_id.clone())));
            };
            let rec = match record(&row, 0) {
                Ok(r) if r.tenant == cb.tenant => r,
                Ok(_) => return Ok(Err(StoreError::NotFound(cb.task_id.clone()))),
                Err(e) => return Ok(Err(e)),
            };
            let seen = match seen_row
                .map(|r| r.try_get::<_, Option<String>>(0))
                .transpose()?
            {
                Some(text) => match remembered_event(text, &cb.task_id, &cb.callback_id) {
                    Ok(e) => Some(e),
                    Err(e) => return Ok(Err(e)),
                },
                None => None,
            };
            b.tasks.insert(cb.task_id.clone(), rec.clone());
            (rec, seen)
        }
    };
    if let Some(outcome) = check_callback(seen.as_ref(), &cb.event) {
        let duplicate_callback = outcome.reason == Reason::DuplicateCallback;
        return Ok(Ok(CallbackAnswer::new(
            outcome,
            duplicate_callback,
            &record.view,
        )));
    }
    // Every callback of the batch had its (tenant, id) prefetched, and
    // ids remembered since are added below. A row another transaction
    // commits meanwhile makes the INSERT fail: the batch runs again.
    let owner_key = (cb.tenant.clone(), cb.callback_id.clone());
    if b.claimed.contains(&owner_key) {
        return Ok(Err(StoreError::CallbackIdReused(cb.callback_id.clone())));
    }
    let mut record = record;
    let judged = judge_event(&mut record, &cb.event);
    if let Some(first) = judged.appended.first() {
        // Only ids whose event changed the task are remembered (core fix 1).
        b.callbacks.insert(key, cb.event.clone());
        b.claimed.insert(owner_key);
        b.callback_rows.push((
            cb.task_id.clone(),
            cb.callback_id.clone(),
            CallbackRef::of(&cb.event, &first.entry),
            cb.tenant.clone(),
        ));
    }
    b.judged(&record, &judged, cb.event.at_ms().get());
    Ok(Ok(CallbackAnswer::new(judged.outcome, false, &record.view)))
}

/// A person's request (`cancel`, `decide`) on the tenant's task: the row
/// locked (or already held by this transaction), judged, recorded.
async fn act(tx: &Transaction<'_>, b: &mut Batch, action: &Action) -> Sql<Acted> {
    let mut record = match b.tasks.get(&action.task_id) {
        Some(rec) if rec.tenant == action.tenant => rec.clone(),
        Some(_) => return Ok(Err(StoreError::NotFound(action.task_id.clone()))),
        None => {
            let lock = tx
                .prepare_cached(
                    "SELECT tenant, view, kind, input, lease FROM tasks
                     WHERE id = $1 AND tenant = $2 FOR UPDATE",
                )
                .await?;
            let Some(row) = tx
                .query_opt(&lock, &[&action.task_id, &action.tenant])
                .await?
            else {
                return Ok(Err(StoreError::NotFound(action.task_id.clone())));
            };
            let rec = match record(&row, 0) {
                Ok(r) => r,
                Err(e) => return Ok(Err(e)),
            };
            b.tasks.insert(action.task_id.clone(), rec.clone());
            rec
        }
    };
    let judged = judge_event(&mut record, &action.event);
    b.judged(&record, &judged, action.event.at_ms().get());
    Ok(Ok(Acted {
        answer: CallbackAnswer::new(judged.outcome, false, &record.view),
        task: record.view,
    }))
}

async fn deliver(
    tx: &Transaction<'_>,
    b: &mut Batch,
    tenant: &str,
    id: &str,
    key: &str,
    now_ms: f64,
) -> Sql<Delivery> {
    let (checked, now) = match check_delivery_input(key, now_ms) {
        Ok(x) => x,
        Err(e) => return Ok(Err(StoreError::Invalid(e))),
    };
    let dk = (tenant.to_string(), key.to_string());
    let existing = match b.deliveries.get(&dk) {
        Some(r) => Some(r.clone()),
        None => {
            let lock = tx
                .prepare_cached("SELECT pg_advisory_xact_lock($1)")
                .await?;
            let select = tx
                .prepare_cached("SELECT receipt FROM deliveries WHERE tenant = $1 AND key = $2")
                .await?;
            let lid = lock_id(&["delivery", tenant, key]);
            let (_, row) = futures_util::future::try_join(
                tx.execute(&lock, &[&lid]),
                tx.query_opt(&select, &[&tenant, &key]),
            )
            .await?;
            match row.map(|r| r.try_get::<_, String>(0)).transpose()? {
                Some(text) => match from_json::<Receipt>(&text, "deliveries.receipt") {
                    Ok(r) => Some(r),
                    Err(e) => return Ok(Err(corrupt(e))),
                },
                None => None,
            }
        }
    };
    // A succeeded task never changes again: no lock needed to read it.
    let task = match b.tasks.get(id) {
        Some(r) => Some(r.clone()).filter(|r| r.tenant == tenant),
        None => match load_own(tx, tenant, id).await? {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        },
    };
    let task = task.map(|r| r.view);
    let delivery = match decide_delivery(existing.as_ref(), id, task.as_ref(), &checked, now) {
        Ok(d) => d,
        Err(e) => {
            return Ok(Err(match e.code {
                taskwire_core::ErrorCode::NotFound => StoreError::NotFound(id.to_string()),
                _ => StoreError::Invalid(e),
            }))
        }
    };
    if let (DeliveryReason::Delivered, Some(receipt)) = (delivery.reason, &delivery.receipt) {
        b.deliveries.insert(dk, receipt.clone());
    }
    Ok(Ok(delivery))
}

/// Reads the tenant's task without locking it. The tenant is in the
/// query: another tenant's row is never read or parsed.
async fn load_own(tx: &Transaction<'_>, tenant: &str, id: &str) -> Sql<Option<TaskRecord>> {
    let stmt = tx
        .prepare_cached(
            "SELECT tenant, view, kind, input, lease FROM tasks WHERE id = $1 AND tenant = $2",
        )
        .await?;
    let row = tx.query_opt(&stmt, &[&id, &tenant]).await?;
    Ok(row.map(|r| record(&r, 0)).transpose())
}

/// The LISTEN side (see the module docs). Reports on `ready` once the
/// first LISTEN is in place; then reconnects for ever.
async fn listen(
    config: tokio_postgres::Config,
    hub: Arc<Hub>,
    ready: oneshot::Sender<Result<(), String>>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(50);
    loop {
        let (connected, err) = listen_once(&config, &hub, &mut ready).await;
        if let Some(r) = ready.take() {
            let _ = r.send(Err(err));
            return;
        }
        if connected {
            backoff = Duration::from_millis(50);
        }
        eprintln!("taskwire-server: LISTEN connection lost ({err}); reconnecting");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One LISTEN connection, until it fails. Returns whether it got as far as
/// listening, and why it ended.
async fn listen_once(
    config: &tokio_postgres::Config,
    hub: &Hub,
    ready: &mut Option<oneshot::Sender<Result<(), String>>>,
) -> (bool, String) {
    let (client, mut connection) = match config.connect(NoTls).await {
        Ok(c) => c,
        Err(e) => return (false, pg_message(&e)),
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let _driver = AbortOnDrop(tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n.payload().to_string()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    }));
    if let Err(e) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
        return (false, pg_message(&e));
    }
    let reread = match client
        .prepare(
            "SELECT t.id, t.view, h.version, h.event
             FROM unnest($1::text[], $2::bigint[]) AS w(id, known)
             JOIN tasks t ON t.id = w.id
             LEFT JOIN history h ON h.task_id = t.id AND h.version > GREATEST(w.known, t.version - $3)
             ORDER BY t.id, h.version",
        )
        .await
    {
        Ok(s) => s,
        Err(e) => return (false, pg_message(&e)),
    };
    if let Some(r) = ready.take() {
        let _ = r.send(Ok(()));
    }
    // Whatever committed while nobody here listened (at start, or since
    // the last connection died): re-read every watched task.
    if let Err(e) = refresh(&client, &reread, hub, hub.watched_tasks()).await {
        return (true, e);
    }
    loop {
        let first = match tokio::time::timeout(HEALTH_EVERY, rx.recv()).await {
            Ok(Some(payload)) => payload,
            Ok(None) => return (true, "connection closed".into()),
            Err(_quiet) => {
                let ping = tokio::time::timeout(Duration::from_secs(5), client.simple_query(""));
                match ping.await {
                    Ok(Ok(_)) => continue,
                    Ok(Err(e)) => return (true, pg_message(&e)),
                    Err(_) => return (true, "no answer within 5 s".into()),
                }
            }
        };
        let mut notified = HashMap::new();
        parse_payload(&first, &mut notified);
        while let Ok(more) = rx.try_recv() {
            parse_payload(&more, &mut notified);
        }
        let stale: Vec<(String, Option<u64>)> = hub
            .known_versions(notified.keys().map(String::as_str))
            .into_iter()
            .filter_map(|(id, known)| {
                let known = known?; // not watched here
                known
                    .map_or(true, |k| k < notified[id])
                    .then(|| (id.to_string(), known))
            })
            .collect();
        if !stale.is_empty() {
            if let Err(e) = refresh(&client, &reread, hub, stale).await {
                return (true, e);
            }
        }
    }
}

/// Re-reads watched tasks (view and the history this hub lacks, at most
/// its retention) and publishes them: one read per task, however many
/// waiters.
async fn refresh(
    client: &tokio_postgres::Client,
    reread: &tokio_postgres::Statement,
    hub: &Hub,
    tasks: Vec<(String, Option<u64>)>,
) -> Result<(), String> {
    let retention = i64::try_from(hub.retention()).unwrap_or(i64::MAX);
    for chunk in tasks.chunks(500) {
        let ids: Vec<&str> = chunk.iter().map(|t| t.0.as_str()).collect();
        let known: Vec<i64> = chunk.iter().map(|t| t.1.map_or(-1, to_i64)).collect();
        let rows = client
            .query(reread, &[&ids, &known, &retention])
            .await
            .map_err(|e| pg_message(&e))?;
        let mut start = 0;
        while start < rows.len() {
            let id: &str = rows[start].try_get(0).map_err(|e| pg_message(&e))?;
            let mut end = start + 1;
            while end < rows.len() && rows[end].try_get::<_, &str>(0).ok() == Some(id) {
                end += 1;
            }
            let group = &rows[start..end];
            let read = group[0]
                .try_get::<_, String>(1)
                .map_err(StoreError::from)
                .and_then(|text| parse_view(&text))
                .and_then(|view| Ok((view, entries(group, 2)?)));
            match read {
                Ok((view, entries)) => hub.publish_read(view, entries),
                Err(e) => eprintln!("taskwire-server: LISTEN: task {id}: {e:?}"),
            }
            start = end;
        }
    }
    Ok(())
}

fn record(row: &Row, at: usize) -> Result<TaskRecord, StoreError> {
    let tenant: String = row.try_get(at)?;
    let view: String = row.try_get(at + 1)?;
    let kind: Option<String> = row.try_get(at + 2)?;
    let input: Option<String> = row.try_get(at + 3)?;
    let lease: Option<String> = row.try_get(at + 4)?;
    let input = input
        .map(RawJson::parse)
        .transpose()
        .map_err(|e| StoreError::Internal(format!("tasks.input: {e}")))?;
    Ok(TaskRecord {
        tenant,
        view: parse_view(&view)?,
        kind,
        input,
        lease: parse_lease(lease.as_deref())?,
    })
}

fn parse_view(text: &str) -> Result<TaskView, StoreError> {
    from_json::<TaskView>(text, "tasks.view").map_err(corrupt)
}

/// History entries from the rows' `version, event` columns at `at` (a
/// LEFT JOIN: rows without an entry have NULLs there).
fn entries(rows: &[Row], at: usize) -> Result<Vec<HistoryEntry>, StoreError> {
    let mut out = Vec::new();
    for row in rows {
        let version: Option<i64> = row.try_get(at)?;
        let event: Option<String> = row.try_get(at + 1)?;
        if let (Some(version), Some(event)) = (version, event) {
            out.push(HistoryEntry {
                version: u64::try_from(version)
                    .map_err(|_| StoreError::Internal("history.version < 0".into()))?,
                event: from_json(&event, "history.event").map_err(corrupt)?,
            });
        }
    }
    Ok(out)
}

/// Counters are ≤ 2^53 − 1 (core enforces it), so they fit a bigint.
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn corrupt(e: taskwire_core::Error) -> StoreError {
    StoreError::Corrupt(format!("stored row does not parse: {}", e.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn payloads_round_trip_and_split() {
        let mut notified = HashMap::new();
        parse_payload("3 tsk_a\n5 tsk b\nbad\n", &mut notified);
        parse_payload("2 tsk_a\n", &mut notified);
        assert_eq!(notified["tsk_a"], 3);
        assert_eq!(notified["tsk b"], 5);
        assert_ne!(lock_id(&["a", "bc"]), lock_id(&["ab", "c"]));
    }
}

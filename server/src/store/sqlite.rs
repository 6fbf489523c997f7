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

mod errors;
mod read;
mod sweep;
mod write;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use taskwire_core::{plan_resume, Delivery, ResumeAnswer, ResumePlan};
use tokio::sync::{oneshot, Semaphore};

use super::sqlite_schema;
use super::sweep::{TaskSweep, LIFECYCLE, TTL};
use super::{
    Acted, Action, Callback, CallbackAnswer, Change, Created, NewTask, OutboxEntry,
    PendingWebhooks, Store, StoreError, StoreFuture, Swept, TaskRecord, WebhookClaim, WriteDone,
};
use crate::hub::Hub;
use read::{history_after, load_own_task};
use write::{act, callback, create, deliver};

/// The schema. `view` holds the task's `TaskView` as JSON (parsed back
/// through core, which re-checks its invariants); the other task columns
/// exist for indexes and queries.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tasks (
    id            TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    view          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    live          INTEGER NOT NULL,
    expires_at_ms REAL NOT NULL,
    kind          TEXT,
    input         TEXT,
    -- The lifecycle (lifecycle.rs): the current attempt's lease, and when
    -- the sweeper must look at the task next (not the TTL).
    lease         TEXT,
    due_at_ms     REAL
);
CREATE INDEX IF NOT EXISTS tasks_due ON tasks (expires_at_ms) WHERE live = 1;
CREATE INDEX IF NOT EXISTS tasks_lifecycle_due ON tasks (due_at_ms)
    WHERE live = 1 AND due_at_ms IS NOT NULL;
CREATE TABLE IF NOT EXISTS history (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    event   TEXT NOT NULL,
    PRIMARY KEY (task_id, version)
) WITHOUT ROWID;
-- A remembered callback id names the history entry holding its event;
-- `event` only when the history holds another one (see callback_ref.rs).
CREATE TABLE IF NOT EXISTS callbacks (
    task_id     TEXT NOT NULL,
    callback_id TEXT NOT NULL,
    version     INTEGER,
    event       TEXT,
    -- One task per callback id and tenant (callback_ids.rs); NULL in rows
    -- from before the column existed, which UNIQUE does not compare.
    tenant      TEXT,
    PRIMARY KEY (task_id, callback_id),
    CHECK ((version IS NULL) <> (event IS NULL))
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS callbacks_tenant_callback_id ON callbacks (tenant, callback_id);
CREATE TABLE IF NOT EXISTS idempotency (
    tenant  TEXT NOT NULL,
    key     TEXT NOT NULL,
    request TEXT NOT NULL,
    task_id TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deliveries (
    tenant  TEXT NOT NULL,
    key     TEXT NOT NULL,
    receipt TEXT NOT NULL,
    PRIMARY KEY (tenant, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant          TEXT NOT NULL,
    key             TEXT NOT NULL UNIQUE,
    task_id         TEXT NOT NULL,
    state           TEXT NOT NULL,
    at_ms           REAL NOT NULL,
    sent            INTEGER NOT NULL DEFAULT 0,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_tenant ON outbox (tenant, seq);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (next_attempt_ms) WHERE sent = 0;
";

/// Writes queued beyond this answer 503 instead of growing memory.
const QUEUE: usize = 16_384;
/// Reader connections (and blocking threads) in use at once.
const READERS: usize = 8;

/// The SQLite implementation of [`Store`].
pub struct SqliteStore {
    jobs: SyncSender<Job>,
    readers: Arc<Readers>,
    read_permits: Arc<Semaphore>,
    retention: u64,
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
    /// Outbox rows a reader found unparseable: `seq` and why.
    QuarantineOutbox {
        rows: Vec<(i64, String)>,
        now_ms: f64,
    },
}

struct Job {
    op: Op,
    reply: oneshot::Sender<Result<WriteDone, StoreError>>,
}

impl SqliteStore {
    /// Opens (or creates) `dir/taskwire.sqlite3` and starts the writer.
    /// `max_batch` 1 turns group commit off.
    pub fn open(
        dir: &Path,
        hub: Arc<Hub>,
        retention: u64,
        max_batch: usize,
    ) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("--data {}: {e}", dir.display()))?;
        let path = dir.join("taskwire.sqlite3");
        let mut conn = Connection::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let shown = path.display().to_string();
        // The schema version first: a file from a newer server is refused
        // before anything (even the journal mode) is changed in it.
        conn.execute_batch("PRAGMA busy_timeout = 5000;")
            .map_err(|e| format!("{shown}: {e}"))?;
        let schema = format!("{SCHEMA}{}", super::quarantine::SQLITE_SCHEMA);
        let prepared = sqlite_schema::prepare(&mut conn, &schema, &shown)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .map_err(|e| format!("{shown}: {e}"))?;
        if prepared.from != 0 && prepared.from < sqlite_schema::CURRENT {
            eprintln!(
                "taskwire-server: {shown}: migrated from schema {} to {} ({} callback events now stored once); \
                 the space freed is reused for new rows (VACUUM returns it to the file system)",
                prepared.from,
                sqlite_schema::CURRENT,
                prepared.callbacks_referenced
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
    fn create(&self, task: NewTask) -> StoreFuture<'_, Created> {
        let done = self.write(Op::Create(task));
        Box::pin(async move { done.await?.created() })
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
            let plan = if force_snapshot {
                ResumePlan::Snapshot
            } else {
                plan_resume(view.version, cursor, retention)
            };
            Ok(match plan {
                ResumePlan::CaughtUp => ResumeAnswer::CaughtUp { task: Some(view) },
                ResumePlan::Snapshot => ResumeAnswer::Snapshot { task: view },
                ResumePlan::Delta => ResumeAnswer::Delta {
                    events: history_after(&tx, &id, cursor)?,
                    task: Some(view),
                },
            })
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
}

/// Every reader connection's settings. The page cache is small: a read
/// touches a handful of pages (a primary-key lookup and a range of one
/// task's history), misses are served from the OS page cache, and with
/// SQLite's default (2 MB per connection) the 8 readers' caches filled for
/// tens of minutes as the file grew, which read as RSS rising under a
/// steady load (server/README.md, "Soak"). The writer keeps the default:
/// it holds a batch's dirty pages until COMMIT.
const READER_PRAGMAS: &str =
    "PRAGMA busy_timeout = 5000; PRAGMA query_only = 1; PRAGMA cache_size = -256;";

/// Reader connections, opened on demand and reused.
struct Readers {
    path: PathBuf,
    pool: Mutex<Vec<Connection>>,
}

impl Readers {
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pooled = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let c = Connection::open(&self.path)?;
                c.execute_batch(READER_PRAGMAS)?;
                c
            }
        };
        let out = f(&mut conn);
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(conn);
        out
    }
}

/// The writer thread: group commit (see the module docs).
fn writer(mut conn: Connection, rx: Receiver<Job>, hub: Arc<Hub>, max_batch: usize) {
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
        let results = commit_batch(&mut conn, &mut batch, &mut changes, &mut outbox);
        match results {
            Ok(results) => {
                // Durable now: wake watchers, then answer.
                hub.publish(&changes);
                if outbox {
                    hub.outbox.notify_one();
                }
                for (job, result) in batch.into_iter().zip(results) {
                    let _ = job.reply.send(result);
                }
            }
            Err(e) => {
                for job in batch {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Runs a batch in one transaction, one savepoint per job. Returns each
/// job's result once the COMMIT succeeded.
fn commit_batch(
    conn: &mut Connection,
    batch: &mut [Job],
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<Vec<Result<WriteDone, StoreError>>, StoreError> {
    let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut results = Vec::with_capacity(batch.len());
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
        let result = run(&sp, op, &mut job_changes, &mut job_outbox);
        if result.is_ok() {
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
    Ok(results)
}

fn run(
    tx: &Connection,
    op: Op,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<WriteDone, StoreError> {
    match op {
        Op::Create(task) => create(tx, task).map(WriteDone::Created),
        Op::Callback(cb) => callback(tx, cb, changes, outbox).map(WriteDone::Callback),
        Op::Act(action) => act(tx, action, changes, outbox).map(WriteDone::Acted),
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
        Op::QuarantineOutbox { rows, now_ms } => {
            sweep::quarantine_outbox(tx, rows, now_ms).map(WriteDone::Quarantined)
        }
    }
}

/// Counters are ≤ 2^53 − 1 (core enforces it), so they fit SQLite's i64.
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn corrupt(e: taskwire_core::Error) -> StoreError {
    StoreError::Corrupt(format!("stored row does not parse: {}", e.message))
}

//! The storage interface. HTTP handlers, the sweeper and the webhook
//! sender talk only to [`Store`]. Two implementations: [`sqlite`] (the
//! default, one instance) and [`postgres`] (`--data postgres://…`, any
//! number of instances on one database: row locks, LISTEN/NOTIFY feeding
//! the hub). [`open`] picks one from the config.
//!
//! Contract every implementation keeps:
//! - All rules come from `taskwire-core` (`TaskView::step`,
//!   `expire_step`, `check_callback`, `decide_delivery`, `plan_resume`).
//! - A write is atomic: the task row, its history entry, the callback id
//!   and the outbox row commit together, and the future resolves only
//!   after that commit is durable.
//! - After the commit, every change is published to the hub, in version
//!   order per task, so held long-polls and SSE streams wake without
//!   polling.

mod callback_ref;
pub mod postgres;
mod postgres_schema;
pub mod sqlite;
mod sqlite_schema;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use taskwire_core::{
    Delivery, Error as CoreError, Event, HistoryEntry, Notification, Outcome, ResumeAnswer,
    TaskView,
};

/// Opens the store `config.data` names: a `postgres://` (or
/// `postgresql://`) URL selects PostgreSQL, anything else is the SQLite
/// directory.
pub async fn open(
    config: &crate::Config,
    hub: Arc<crate::hub::Hub>,
) -> Result<Arc<dyn Store>, String> {
    match config.postgres_url() {
        Some(url) => {
            let opts = postgres::PgOptions {
                url: url.to_string(),
                pool: config.pool,
                writers: config.pg_writers,
                max_batch: config.max_batch,
                retention: config.retention,
            };
            Ok(Arc::new(postgres::PostgresStore::open(opts, hub).await?))
        }
        None => Ok(Arc::new(sqlite::SqliteStore::open(
            &config.data,
            hub,
            config.retention,
            config.max_batch,
        )?)),
    }
}

/// A boxed store future (object-safe, so handlers hold `Arc<dyn Store>`).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreError {
    /// No such task for this tenant (or at all).
    NotFound(String),
    /// Rejected by a core rule (`invalid-request`).
    Invalid(CoreError),
    /// The idempotency key was used with another create body.
    IdempotencyKeyReused(String),
    /// Too many writes queued: try again shortly (503).
    Overloaded,
    /// The database failed (disk, corruption): a 500.
    Internal(String),
}

/// What a store's writer hands back for one write job. Both stores queue
/// writes to a writer that batches them into transactions; the job's
/// caller unwraps the variant it asked for.
pub(crate) enum WriteDone {
    Created(Created),
    Callback(CallbackAnswer),
    Delivery(Delivery),
    Expired(usize),
    Unit,
}

impl WriteDone {
    /// A writer that answers a job with another job's result is a bug.
    fn unexpected() -> StoreError {
        StoreError::Internal("writer answered another job".into())
    }

    pub(crate) fn created(self) -> Result<Created, StoreError> {
        match self {
            WriteDone::Created(c) => Ok(c),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn callback(self) -> Result<CallbackAnswer, StoreError> {
        match self {
            WriteDone::Callback(a) => Ok(a),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn delivery(self) -> Result<Delivery, StoreError> {
        match self {
            WriteDone::Delivery(d) => Ok(d),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn expired(self) -> Result<usize, StoreError> {
        match self {
            WriteDone::Expired(n) => Ok(n),
            _ => Err(Self::unexpected()),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Internal(e.to_string())
    }
}

/// A task as stored: its view plus what the creator attached.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// The tenant that owns it.
    pub tenant: String,
    /// Its current fields.
    pub view: TaskView,
    /// Free label given at creation.
    pub kind: Option<String>,
    /// Opaque input given at creation.
    pub input: Option<Value>,
}

impl TaskRecord {
    /// The wire shape: the `TaskView` plus `kind` and `input` when given.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(&self.view).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut v {
            if let Some(kind) = &self.kind {
                map.insert("kind".into(), Value::String(kind.clone()));
            }
            if let Some(input) = &self.input {
                map.insert("input".into(), input.clone());
            }
        }
        v
    }
}

/// A validated create request.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// Owner.
    pub tenant: String,
    /// The task at version 0, built by `taskwire_core::create_task`.
    pub view: TaskView,
    /// Free label.
    pub kind: Option<String>,
    /// Opaque input.
    pub input: Option<Value>,
    /// `Idempotency-Key` and the canonical body it was sent with.
    pub idempotency: Option<(String, String)>,
}

/// The answer to a create.
#[derive(Debug, Clone)]
pub struct Created {
    /// The task as it is now.
    pub record: TaskRecord,
    /// False when an idempotent replay returned an existing task.
    pub created: bool,
}

/// A verified executor callback.
#[derive(Debug, Clone)]
pub struct Callback {
    /// The task it is about (any tenant: callbacks are signed, not bearer).
    pub task_id: String,
    /// `webhook-id`, scoped to the task.
    pub callback_id: String,
    /// The event.
    pub event: Event,
}

/// What a callback did: the wire answer of `POST …/callbacks`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallbackAnswer {
    /// The task changed.
    pub changed: bool,
    /// The event repeated something known.
    pub duplicate: bool,
    /// The callback id was already applied with this event.
    pub duplicate_callback: bool,
    /// The task just became terminal (its outbox row is committed).
    pub notify: bool,
    /// Core's reason (`progress`, `duplicate-result`, …).
    pub reason: taskwire_core::Reason,
    /// The task's version after the callback.
    pub version: u64,
    /// The task's state after the callback.
    pub state: taskwire_core::State,
}

impl CallbackAnswer {
    /// Builds the answer from core's outcome.
    pub fn new(outcome: Outcome, duplicate_callback: bool, view: &TaskView) -> Self {
        CallbackAnswer {
            changed: outcome.changed,
            duplicate: outcome.duplicate,
            duplicate_callback,
            notify: outcome.notify,
            reason: outcome.reason,
            version: view.version,
            state: view.state,
        }
    }
}

/// A committed change, as the hub hands it to waiters.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The task after the change.
    pub view: TaskView,
    /// The history entry the change appended.
    pub entry: HistoryEntry,
}

/// One outbox row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxEntry {
    /// Commit order, per server (feeds page by it).
    pub seq: u64,
    /// `taskId:state:version`, unique.
    pub key: String,
    /// The notification.
    #[serde(flatten)]
    pub notification: Notification,
    /// The owning tenant (not on the wire).
    #[serde(skip)]
    pub tenant: String,
    /// Webhook delivery attempts so far (not on the wire).
    #[serde(skip)]
    pub attempts: u32,
}

/// The storage interface (see the module docs for the contract).
pub trait Store: Send + Sync + 'static {
    /// Creates a task, or replays an idempotent create.
    fn create(&self, task: NewTask) -> StoreFuture<'_, Created>;

    /// The tenant's task.
    fn get(&self, tenant: String, id: String) -> StoreFuture<'_, TaskRecord>;

    /// A resume answer for a client at `cursor` (a snapshot when
    /// `force_snapshot`), read consistently (view and entries together).
    fn resume(
        &self,
        tenant: String,
        id: String,
        cursor: u64,
        force_snapshot: bool,
    ) -> StoreFuture<'_, ResumeAnswer>;

    /// Applies a verified callback; resolves after the commit.
    fn callback(&self, callback: Callback) -> StoreFuture<'_, CallbackAnswer>;

    /// Delivers a succeeded task's result under an idempotency key.
    fn deliver(
        &self,
        tenant: String,
        id: String,
        key: String,
        now_ms: f64,
    ) -> StoreFuture<'_, Delivery>;

    /// The tenant's outbox after `after`, oldest first.
    fn notifications(
        &self,
        tenant: String,
        after: u64,
        limit: u32,
    ) -> StoreFuture<'_, Vec<OutboxEntry>>;

    /// Expires up to `limit` live tasks whose `expiresAtMs <= now_ms`
    /// (core's `expire_step`), each with its notification; returns how
    /// many.
    fn expire_due(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, usize>;

    /// Outbox rows not yet posted to the notify webhook whose next attempt
    /// is due.
    fn pending_webhooks(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, Vec<OutboxEntry>>;

    /// Records a webhook attempt: sent, or the time of the next try.
    fn webhook_attempted(&self, seq: u64, sent: bool, next_attempt_ms: f64) -> StoreFuture<'_, ()>;
}

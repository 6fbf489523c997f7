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
//! - A callback id is remembered for one task of its tenant: on another
//!   task it is refused, atomically even when two race ([`callback_ids`]).
//! - After the commit, every change is published to the hub, in version
//!   order per task, so held long-polls and SSE streams wake without
//!   polling.
//! - A sweep (the TTL sweeper, the notify sender's outbox read) handles
//!   each row on its own: a row it cannot act on is quarantined
//!   ([`quarantine`]) and reported, and the other rows go on.

pub mod callback_ids;
mod callback_ref;
pub(crate) mod lifecycle;
pub mod postgres;
mod postgres_schema;
pub mod quarantine;
pub mod sqlite;
mod sqlite_schema;
mod sweep;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use quarantine::Quarantined;
use serde::Serialize;
pub use sweep::{PendingWebhooks, Swept, TenantScope, WebhookClaim};
use taskwire_core::wire::to_json;
use taskwire_core::{
    Delivery, Error as CoreError, Event, HistoryEntry, Notification, Outcome, ResumeAnswer,
    TaskView,
};

pub use crate::exact_json::RawJson;

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
    /// The callback id is remembered on another task of the tenant.
    CallbackIdReused(String),
    /// Too many writes queued: try again shortly (503).
    Overloaded,
    /// The storage cannot serve now, through no fault of the request: disk
    /// full, read-only or failing, the file cannot be opened, locked by
    /// another process, the database connection lost or shutting down.
    /// A 503 `storage-unavailable`: retrying later can succeed.
    Unavailable(String),
    /// A stored row does not parse, or a write breaks a constraint (the
    /// rows disagree): corruption, a 500. Sweeps quarantine such a row
    /// ([`quarantine`]) instead of failing.
    Corrupt(String),
    /// Anything else the database refused: a bug, a 500.
    Internal(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::NotFound(id) => write!(f, "no task {id}"),
            StoreError::Invalid(e) => f.write_str(&e.message),
            StoreError::IdempotencyKeyReused(key) => write!(f, "idempotency key {key} reused"),
            StoreError::CallbackIdReused(id) => {
                write!(f, "callback id {id} is remembered on another task")
            }
            StoreError::Overloaded => f.write_str("too many writes queued"),
            StoreError::Unavailable(m) | StoreError::Corrupt(m) | StoreError::Internal(m) => {
                f.write_str(m)
            }
        }
    }
}

/// What a store's writer hands back for one write job. Both stores queue
/// writes to a writer that batches them into transactions; the job's
/// caller unwraps the variant it asked for.
// A task view (in `NewTask`/`Created`) makes one variant ~400 bytes since
// the lifecycle fields (issue 11); each value lives only while its write
// is queued, so boxing would add an allocation per create to save a few
// hundred bytes per queued write.
#[allow(clippy::large_enum_variant)]
pub(crate) enum WriteDone {
    Created(Created),
    Callback(CallbackAnswer),
    Acted(Acted),
    Delivery(Delivery),
    Expired(Swept),
    Quarantined(Vec<Quarantined>),
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

    pub(crate) fn acted(self) -> Result<Acted, StoreError> {
        match self {
            WriteDone::Acted(a) => Ok(a),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn delivery(self) -> Result<Delivery, StoreError> {
        match self {
            WriteDone::Delivery(d) => Ok(d),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn expired(self) -> Result<Swept, StoreError> {
        match self {
            WriteDone::Expired(swept) => Ok(swept),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn quarantined(self) -> Result<Vec<Quarantined>, StoreError> {
        match self {
            WriteDone::Quarantined(rows) => Ok(rows),
            _ => Err(Self::unexpected()),
        }
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
    /// Opaque input given at creation, as the exact JSON text sent (so
    /// numbers beyond double precision come back as they were).
    pub input: Option<RawJson>,
    /// The current attempt's lease (`tasks.lease`): operational, not
    /// versioned and not on the wire (see [`lifecycle`]). Read where the
    /// task is written; `None` on read-only paths, which do not need it.
    pub lease: Option<taskwire_core::Lease>,
}

impl TaskRecord {
    /// The wire shape, as JSON text: the `TaskView` plus `kind` and
    /// `input` when given (`input` byte for byte as it was sent).
    pub fn to_json(&self) -> String {
        let mut out = to_json(&self.view);
        // A TaskView is always a non-empty JSON object: reopen it.
        if out.ends_with('}') && (self.kind.is_some() || self.input.is_some()) {
            out.pop();
            if let Some(kind) = &self.kind {
                out.push_str(",\"kind\":");
                out.push_str(&to_json(kind));
            }
            if let Some(input) = &self.input {
                out.push_str(",\"input\":");
                out.push_str(input.as_str());
            }
            out.push('}');
        }
        out
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
    /// Opaque input, exactly as sent.
    pub input: Option<RawJson>,
    /// `Idempotency-Key` and the body it was sent with.
    pub idempotency: Option<Idempotency>,
}

/// An `Idempotency-Key` with the request it names, for comparing a
/// replay with the first create.
#[derive(Debug, Clone)]
pub struct Idempotency {
    /// The key (per tenant).
    pub key: String,
    /// The request in its exact canonical form (what is stored).
    pub request: String,
    /// The request as servers before exact comparison stored it (numbers
    /// as doubles), to compare with rows they wrote.
    pub legacy_request: String,
}

/// Marks a stored request written in the exact canonical form; rows
/// without it were written by earlier servers (see [`Idempotency`]).
pub const EXACT_REQUEST: &str = "exact:";

impl Idempotency {
    /// Whether a stored request names the same create as this one.
    pub fn same_as(&self, stored: &str) -> bool {
        if stored.starts_with(EXACT_REQUEST) {
            stored == self.request
        } else {
            stored == self.legacy_request
        }
    }
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
    /// The tenant whose secret signed it: the task must be this tenant's.
    pub tenant: String,
    /// The task it is about, named by the path and the signed body.
    pub task_id: String,
    /// `webhook-id`: remembered for the task (a redelivery is a
    /// duplicate) and refused on the tenant's other tasks.
    pub callback_id: String,
    /// The event.
    pub event: Event,
}

/// A person's request on a task (`cancel`, `decide`), made through the
/// client API: the event carries the actor the server took from the
/// caller's credential.
#[derive(Debug, Clone)]
pub struct Action {
    /// The caller's tenant: the task must be this tenant's.
    pub tenant: String,
    /// The task.
    pub task_id: String,
    /// The event (`Event::Cancel` or `Event::Decide`).
    pub event: Event,
}

/// What a person's request did, and the task after it.
#[derive(Debug, Clone)]
pub struct Acted {
    /// Core's judgement (as for a callback).
    pub answer: CallbackAnswer,
    /// The task as it is now.
    pub task: TaskView,
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
    /// A person asked to cancel the task (it is `cancelling`): the
    /// executor should stop its work and answer `ack_cancel` (or
    /// `cannot_cancel`). Executors that heartbeat learn it within one
    /// heartbeat.
    pub cancel_requested: bool,
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
            cancel_requested: view.state == taskwire_core::State::Cancelling,
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

    /// The tenant that owns task `id`, if it exists: callbacks read it
    /// before their body, to know which secrets to check.
    fn task_tenant(&self, id: String) -> StoreFuture<'_, Option<String>>;

    /// Applies a verified callback; resolves after the commit. A callback
    /// id the tenant already used on another task is
    /// [`StoreError::CallbackIdReused`] (see [`callback_ids`]).
    fn callback(&self, callback: Callback) -> StoreFuture<'_, CallbackAnswer>;

    /// Applies a person's request (`cancel`, `decide`) to the tenant's
    /// task; resolves after the commit. A repeat is core's duplicate.
    fn act(&self, action: Action) -> StoreFuture<'_, Acted>;

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
    /// (core's `expire_step`), each with its notification. Each row is
    /// handled on its own: one that does not parse, or that core's step
    /// cannot move, is quarantined and the others are expired.
    fn expire_due(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, Swept>;

    /// Moves up to `limit` live tasks whose lease, grace period or
    /// execution deadline ran out by `now_ms` (`due_at_ms`, core's
    /// `sweep_step`: `lapse`, `abandon`, `timeout`), each handled on its
    /// own as [`Store::expire_due`] does. Exactly once across instances.
    fn lifecycle_due(&self, now_ms: f64, limit: u32) -> StoreFuture<'_, Swept>;

    /// Outbox rows due for a notify post (see [`WebhookClaim`]). Rows
    /// that do not parse are quarantined, not returned.
    fn pending_webhooks(&self, claim: WebhookClaim) -> StoreFuture<'_, PendingWebhooks>;

    /// Records a webhook attempt: sent, or the time of the next try.
    fn webhook_attempted(&self, seq: u64, sent: bool, next_attempt_ms: f64) -> StoreFuture<'_, ()>;
}

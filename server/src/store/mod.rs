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

mod backlog;
mod batch_cancel;
pub mod batches;
mod callback;
pub mod callback_ids;
mod callback_ref;
pub mod callback_replays;
mod decide;
pub mod epoch;
mod error;
pub(crate) mod lifecycle;
pub mod outage;
mod outbox;
pub mod output;
pub mod postgres;
mod postgres_schema;
pub mod quarantine;
mod rows;
pub mod sqlite;
mod sqlite_schema;
mod sweep;
mod task;
pub mod work;
mod write_done;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use backlog::OutboxBacklog;
pub use batch_cancel::{BatchCancel, BatchCancelled};
pub use batches::{BatchAnswer, BatchCreated, NewBatch};
pub use callback::{Acted, Action, Callback, CallbackAnswer, SignedRequest};
pub use error::StoreError;
pub use outbox::OutboxEntry;
pub use output::{OutputAppend, OutputWanted};
pub use quarantine::Quarantined;
pub use sweep::{PendingWebhooks, Swept, TenantScope, WebhookClaim};
pub use task::{Created, Idempotency, NewTask, TaskRecord, EXACT_REQUEST};
use taskwire_core::{Delivery, HistoryEntry, ResumeAnswer, TaskView};
pub use work::{Claim, Claimed, KindLimit, KindLimits, QueueDepth};
pub(crate) use write_done::WriteDone;

/// Defined by the hub, which hands changes to waiters; still importable
/// from here, where the stores make them.
pub use crate::hub::Change;
pub use taskwire_wire::exact::RawJson;

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
            sqlite::StartChecks {
                new_database: config.new_database,
                integrity: !config.skip_integrity_check,
            },
        )?)),
    }
}

/// A boxed store future (object-safe, so handlers hold `Arc<dyn Store>`).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The storage interface (see the module docs for the contract).
pub trait Store: Send + Sync + 'static {
    /// The epoch of the store's history ([`epoch`]), read when it opened:
    /// every task view and answer carries it.
    fn epoch(&self) -> &str;

    /// Creates a task, or replays an idempotent create.
    fn create(&self, task: NewTask) -> StoreFuture<'_, Created>;

    /// The task an earlier create under `idem`'s key made, read without
    /// the writer (a create refused by the rate quota is still answered
    /// as a replay): `None` when the key is new, and
    /// [`StoreError::IdempotencyKeyReused`] when it was sent with another
    /// body.
    fn replay(&self, tenant: String, idem: Idempotency) -> StoreFuture<'_, Option<Created>>;

    /// Creates a batch: every item, whole or nothing, or replays an
    /// idempotent batch create (store/batches.rs).
    fn create_batch(&self, batch: NewBatch) -> StoreFuture<'_, BatchCreated>;

    /// The batch an earlier create under `idem`'s key made, read without
    /// the writer (as [`Store::replay`] for a task).
    fn replay_batch(
        &self,
        tenant: String,
        idem: Idempotency,
    ) -> StoreFuture<'_, Option<BatchCreated>>;

    /// The follow answer of the tenant's batch for a client at `cursor`
    /// (every item a snapshot when `force_snapshot`), read consistently.
    fn resume_batch(
        &self,
        tenant: String,
        id: String,
        cursor: u64,
        force_snapshot: bool,
    ) -> StoreFuture<'_, BatchAnswer>;

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

    /// The tenant's task with its whole history, oldest first, read
    /// consistently: what its timeline is made of (PROTOCOL.md
    /// §Timeline).
    fn history(&self, tenant: String, id: String)
        -> StoreFuture<'_, (TaskView, Vec<HistoryEntry>)>;

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

    /// Cancels every task of the tenant's batch that is not terminal, each
    /// as one cancel of it would; resolves after the one commit. An
    /// unknown batch, or another tenant's, is [`StoreError::BatchNotFound`].
    fn cancel_batch(&self, cancel: BatchCancel) -> StoreFuture<'_, BatchCancelled>;

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

    /// Forgets the signed callback requests remembered as used whose
    /// timestamp can no longer be accepted at `now_ms`
    /// ([`callback_replays::forget_before`]); run by the sweeper.
    fn forget_used_callbacks(&self, now_ms: f64) -> StoreFuture<'_, ()>;

    /// The notify outbox's backlog, for `/metrics` ([`OutboxBacklog`]).
    fn outbox_backlog(&self) -> StoreFuture<'_, OutboxBacklog>;

    /// Claims up to `claim.max` queued tasks for a worker ([`work`]): each
    /// one's next attempt opened by core's `start`, in one transaction,
    /// and published like any change. A claim's signed request used
    /// before is [`StoreError::ClaimReplayed`].
    fn claim(&self, claim: Claim) -> StoreFuture<'_, Claimed>;

    /// The work queue per kind, for `/metrics` ([`QueueDepth`]).
    fn queue_depth(&self, now_ms: f64) -> StoreFuture<'_, Vec<QueueDepth>>;

    /// Judges an executor's output append by core's rules and, when it
    /// appended, stores the text gained; resolves after the commit, which
    /// appends arriving together share ([`output`]). Wakes the task's
    /// output followers. Makes no task version.
    fn append_output(&self, append: OutputAppend) -> StoreFuture<'_, taskwire_core::Appended>;

    /// What a follower of the tenant's task that holds `wanted` lacks
    /// (the task and the stream read together).
    fn read_output(
        &self,
        tenant: String,
        id: String,
        wanted: OutputWanted,
    ) -> StoreFuture<'_, taskwire_core::output::Catchup>;
}

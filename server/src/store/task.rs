//! What the store holds of a task ([`TaskRecord`]) and how one is created:
//! the validated request ([`NewTask`]), its `Idempotency-Key`
//! ([`Idempotency`]) and the answer ([`Created`]).

use taskwire_core::TaskView;
use taskwire_wire::to_json;

use taskwire_wire::exact::RawJson;

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
    /// versioned and not on the wire (see [`super::lifecycle`]). Read where the
    /// task is written; `None` on read-only paths, which do not need it.
    pub lease: Option<taskwire_core::Lease>,
    /// The batch it is an item of (PROTOCOL.md §Batches), if any: read
    /// for the answers (`batchId`); writes find it in the row themselves.
    pub batch: Option<String>,
}

impl TaskRecord {
    /// The wire shape, as JSON text: the `TaskView` plus `kind` and
    /// `input` when given (`input` byte for byte as it was sent), and the
    /// store's `epoch` (PROTOCOL.md §Epoch).
    pub fn to_json(&self, epoch: &str) -> String {
        let mut out = to_json(&self.view);
        // A TaskView is always a non-empty JSON object: reopen it.
        if out.ends_with('}') {
            out.pop();
            // Before `kind` and `input`: `input` stays last, as it was.
            out.push_str(",\"epoch\":");
            out.push_str(&to_json(epoch));
            if let Some(batch) = &self.batch {
                out.push_str(",\"batchId\":");
                out.push_str(&to_json(batch));
            }
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
    /// The tenant's `max-open-tasks` quota, if any: the store refuses the
    /// create ([`super::StoreError::OpenTaskQuota`]) when the tenant
    /// already has this many non-terminal tasks, counted in the create's
    /// own transaction. An idempotent replay is answered before the count.
    pub open_task_limit: Option<u64>,
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

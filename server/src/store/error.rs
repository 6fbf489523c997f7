//! Why a store call failed: [`StoreError`], which `error.rs` turns into
//! the HTTP answer (code and status).

use taskwire_core::Error as CoreError;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreError {
    /// No such task for this tenant (or at all).
    NotFound(String),
    /// No such batch for this tenant (or at all).
    BatchNotFound(String),
    /// Rejected by a core rule (`invalid-request`).
    Invalid(CoreError),
    /// The idempotency key was used with another create body.
    IdempotencyKeyReused(String),
    /// The callback id is remembered on another task of the tenant.
    CallbackIdReused(String),
    /// A claim's signed request (this `webhook-id`) was used before: it
    /// claims nothing (409 `claim-replayed`).
    ClaimReplayed(String),
    /// The tenant already has `max` open tasks, its `max-open-tasks`
    /// quota (429 `open-task-quota`); nothing was written.
    OpenTaskQuota {
        /// Whose quota.
        tenant: String,
        /// The quota.
        max: u64,
        /// The tasks the refused create would have opened (a batch's
        /// items; 1 for a task).
        wanted: u64,
    },
    /// Too many writes queued: try again shortly (503).
    Overloaded,
    /// The storage cannot serve now, through no fault of the request: disk
    /// full, read-only or failing, the file cannot be opened, locked by
    /// another process, the database connection lost or shutting down.
    /// A 503 `storage-unavailable`: retrying later can succeed.
    Unavailable(String),
    /// A stored row does not parse, or a write breaks a constraint (the
    /// rows disagree): corruption, a 500. Sweeps quarantine such a row
    /// ([`super::quarantine`]) instead of failing.
    Corrupt(String),
    /// Anything else the database refused: a bug, a 500.
    Internal(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::NotFound(id) => write!(f, "no task {id}"),
            StoreError::BatchNotFound(id) => write!(f, "no batch {id}"),
            StoreError::Invalid(e) => f.write_str(&e.message),
            StoreError::IdempotencyKeyReused(key) => write!(f, "idempotency key {key} reused"),
            StoreError::CallbackIdReused(id) => {
                write!(f, "callback id {id} is remembered on another task")
            }
            StoreError::ClaimReplayed(id) => write!(f, "claim {id} was used before"),
            StoreError::OpenTaskQuota {
                tenant,
                max,
                wanted,
            } => {
                write!(
                    f,
                    "tenant {tenant}: {wanted} more would pass {max} open tasks"
                )
            }
            StoreError::Overloaded => f.write_str("too many writes queued"),
            StoreError::Unavailable(m) | StoreError::Corrupt(m) | StoreError::Internal(m) => {
                f.write_str(m)
            }
        }
    }
}

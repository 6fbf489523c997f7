//! # taskwire-core
//!
//! The deterministic heart of taskwire: the task state machine, the three
//! idempotency layers, cursor resume and the client mirror. The same code
//! runs natively in the reference server and as WebAssembly in the
//! browser, so a client replays exactly what the server did.
//!
//! It is sans-IO: no clock (time arrives in events and arguments), no
//! randomness (maps use a fixed hasher; jitter comes from a seed), no I/O,
//! no wasm dependencies.
//!
//! ## Map
//! - [`create_task`], [`apply_event`], [`expire_task`]: the pure state
//!   machine ([`transition`] documents the rules).
//! - [`Book`]: many tasks with callback dedup, the notification outbox,
//!   resume and idempotent delivery.
//! - [`plan_resume`], [`ResumeAnswer`]: what a reconnecting client gets.
//! - [`Mirror`]: one task as a client knows it; rejects stale answers.
//! - [`Follow`]: a client's watch loop (requests, backoff, SSE fallback,
//!   status) as a sans-IO state machine over a [`Mirror`].
//! - [`wire`]: JSON text in and out, with errors that name the field.
//!
//! ## Deliberate fixes to the seed design
//! The seed (`AsyncBook` in TypeScript) is ported rule for rule, except
//! for these, each a bug a user would hit:
//! 1. A callback id is remembered only when its event changed the task.
//!    Otherwise a `succeed` that arrives before its `start` burns its id
//!    and the redelivery after the start is dropped: the result is lost.
//! 2. Callback ids are scoped to their task: the same id on another task is
//!    not a duplicate.
//! 3. The same callback id with a different event is `callback-conflict`,
//!    not a silent `duplicate-callback`.
//! 4. An event is validated completely before any state logic: known
//!    `type`, `atMs` finite and ≥ 0, `progress` an integer in 0..=100,
//!    non-blank `resultRef`/`resultHash`, non-blank callback id. Invalid
//!    input is an error and nothing is recorded. (The seed expires a task
//!    on an invalid late event, and answers `not-running` for an invalid
//!    progress on a queued task.) In Rust this is enforced by types: an
//!    [`Event`] can only hold valid values.
//! 5. A success clears the `error` left by an earlier retried failure.
//! 6. A `succeed` with a different `resultHash` on a succeeded task is
//!    `result-conflict`; the same hash is `duplicate-result`.
//! 7. Creating an id that already exists is `task-exists`, and the existing
//!    task is untouched (the seed overwrote it).
//! 8. A resume cursor ahead of the task's version gets a `snapshot`
//!    instead of `caught-up`.
//! 9. A delivery key reused for another task never reveals the other
//!    task's receipt.
//! 10. [`Book::expire_due`] expires every live task whose `expiresAtMs` has
//!     passed, each with its one notification.
//! 11. Creation inputs whose `expiresAtMs` would not be finite are rejected.
//!
//! Two further differences are about representation, not rules:
//! - Transitions take the task by value and append to its history in
//!   place: O(1) amortized per event instead of the seed's full copy.
//! - Counters (`version`, `attempts`, `maxAttempts`, cursors) are integers
//!   up to 2^53 − 1, the range in which JavaScript counts exactly; the seed
//!   would accept `2^60` attempts and then fail to count them.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod book;
pub mod delivery;
pub mod error;
pub mod event;
pub mod follow;
mod hash;
pub mod json;
pub mod mirror;
pub mod resume;
pub mod task;
pub mod transition;
pub mod value;
pub mod wire;

pub use book::{check_callback, check_callback_id, notification_key, Applied, Book, Notification};
pub use delivery::{check_delivery_input, decide_delivery, Delivery, DeliveryReason, Receipt};
pub use error::{Error, ErrorCode};
pub use event::{Event, EventKind};
pub use follow::{Follow, FollowConfig, FollowEvent};
pub use mirror::{MergeOutcome, Mirror, Next, RejectReason, Rejection};
pub use resume::{plan_resume, ResumeAnswer, ResumeMode, ResumePlan, DEFAULT_RETENTION_VERSIONS};
pub use task::{create_task, CreateTask, HistoryEntry, State, Task, TaskView};
pub use transition::{apply_event, expire_task, Outcome, Reason, Step, Transition};
pub use value::{Millis, NonBlank, Percent, MAX_SAFE_INTEGER};

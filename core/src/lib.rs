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
//!   machine ([`transition`] documents the rules and the full lifecycle:
//!   cancel, hold for approval, leases, `unknown`, the execution
//!   deadline).
//! - [`TaskView::step_with`] and the sweeper steps
//!   ([`TaskView::sweep_step`], [`TaskView::next_due`]): what a store
//!   calls, given the stored [`Lease`]; a [`Step`] says what to write.
//! - [`Book`]: many tasks with callback dedup, the notification outbox,
//!   resume, idempotent delivery and both sweepers.
//! - [`plan_resume`], [`ResumeAnswer`]: what a reconnecting client gets.
//! - [`Mirror`]: one task as a client knows it; rejects stale answers.
//! - [`BatchAnswer`], [`BatchMirror`]: a batch's answers, and the batch
//!   as a client knows it (one [`Mirror`] per task, and the batch cursor).
//! - [`output`]: live output (issue 27): [`OutputLog`] judges an
//!   executor's appended chunks, [`OutputMirror`] assembles them on the
//!   page.
//! - [`steps`] (feature `steps`, not in the page's build): a task's plan,
//!   its steps and their checkpoints (issue 26; PROTOCOL.md §Steps). The
//!   rules depart from seed 001 in one place: progress derived from the
//!   steps also holds across a retry (seed 000's retry resets it to 0,
//!   which a task without a plan still does), since the finished steps
//!   stay finished and a new attempt starts after them.
//! - [`Follow`]: a client's watch loop (requests, backoff, SSE fallback,
//!   status) as a sans-IO state machine over a [`Mirror`] or a
//!   [`BatchMirror`].
//! - [`json`]: the JSON tree, its readers (errors name the field) and the
//!   page's writers; the text parser and the serde bridge are the
//!   `taskwire-wire` crate, built on this one.
//! - [`js`], [`text`]: JavaScript's number rules and messages built
//!   without `core::fmt`, the two leaves everything else uses.
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
//! ## The lifecycle beyond the seed (issue 11)
//! Seeds 001 to 004 describe cancellation, approval, leases and unknown
//! outcomes; [`transition`] ports their rules. Where a rule had to be
//! decided beyond them, or departs from them, this is why (each a bug a
//! user would otherwise hit):
//! 1. **`cancel_ineffective`, a sixth new state.** When the executor says
//!    a cancel cannot take effect (`cannot_cancel`), staying `cancelling`
//!    would tell the page "stopping" about work that goes on, and a
//!    terminal state would claim it ended (002 §八). The task stays live;
//!    whatever the work does next ends it `cancelled`.
//! 2. **Any end after a cancel is `cancelled`**, a retryable `fail`
//!    included: otherwise a task the user cancelled is re-queued and runs
//!    again. A `succeed` after a cancel keeps its result for compensation
//!    (`succeeded-after-cancel`) and delivery refuses it (`not-succeeded`).
//!    A lease that lapses after a cancel cancels at once, as a cancel of
//!    an `unknown` task does.
//! 3. **`approve` and `request_changes` grant one more start**
//!    (`continuations`): `maxAttempts` budgets failures, so a task with
//!    `maxAttempts: 1` could otherwise never continue after its approval
//!    and would sit queued until its TTL. `reject` fails the task
//!    (`error: "rejected: …"`).
//! 4. **One `decide` event** carries `decision`: `approve`,
//!    `request_changes` or `reject`, the client API's own shape. A decision
//!    is current only on the version it was made on: older *and newer*
//!    versions are `stale-decision`. On a terminal task, a repeat is
//!    `duplicate-decision` and anything else `terminal-conflict`.
//! 5. **Fencing comes first, even on terminal tasks**: a zombie's late
//!    `succeed` on a task that succeeded is `stale-attempt`, not
//!    `result-conflict` (which would page a human about nothing). A stale
//!    event at or after the TTL does not expire the task either: a fenced
//!    attempt changes nothing. On a queued task only the `start` of the
//!    next attempt is current.
//! 6. **No lease without `leaseMs`.** A `start` without it (every seed
//!    executor) opens none and never lapses; a server that fills in a
//!    default `leaseMs` must do so only for executors that heartbeat, or
//!    seed executors go `unknown` mid-task.
//! 7. **Leases only grow**: every `heartbeat` *and* `progress` of the
//!    current attempt extends the lease to at least `atMs + leaseMs`, so
//!    a reordered, older heartbeat never shortens it and a worker that
//!    reports progress is never taken for dead. A `start` while `unknown`
//!    is a duplicate, not a sign of life: only fresh reports recover.
//! 8. **The grace period counts from the lease's end**, which the stored
//!    (lapsed) lease keeps, so it does not depend on when a sweeper ran;
//!    `abandon` is judged on it, like `lapse`. `autoRequeue: false` at
//!    creation keeps no grace period: the task waits in `unknown`.
//! 9. **The execution deadline counts from creation and covers every live
//!    state**, queueing and waiting for approval included (004: the
//!    tracking deadline includes the queue); like the TTL, any event at or
//!    after it ends the task first, recorded at `deadlineAtMs`, so the
//!    outcome never depends on when the sweeper ran. The earlier of the
//!    two clocks wins; an `expire` is judged at `max(atMs, expiresAtMs)`
//!    (it says the TTL ran out), so its replay agrees.
//! 10. **A continuation is not a failure** (issue 26). A decision keeps
//!     `progress`, and the next `start` keeps it too (the seed's start
//!     resets it, but every seed path back to `queued` already did), so
//!     a page's bar does not drop from 89 to 0 around an approval. The
//!     decision, and the first report that names the current attempt,
//!     clear an `error` an earlier failure or lapse left (the seed keeps
//!     it until a success, which a seed executor, whose reports carry no
//!     `attempt`, still sees): otherwise "lease lapsed" stays on a task
//!     whose next attempt runs fine.
//!
//! Two further differences are about representation, not rules:
//! - Transitions take the task by value and append to its history in
//!   place: O(1) amortized per event instead of the seed's full copy.
//! - Counters (`version`, `attempts`, `maxAttempts`, cursors) are integers
//!   up to 2^53 − 1, the range in which JavaScript counts exactly; the seed
//!   would accept `2^60` attempts and then fail to count them.

//!
//! ## `no_std`
//! Without the `std` feature (on by default) the crate is `no_std` with
//! `alloc`, and has no [`Book`]: the browser build, whose page then
//! carries no std panic machinery and no `core::fmt`. So every module
//! imports what it uses of `alloc` (`String`, `Vec`, …) instead of
//! relying on the std prelude, and uses `core::` paths, not `std::`;
//! floats are judged by [`value`]'s own helpers (`f64::fract` and
//! `f64::round` are std's).

#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// ASCII is appended as `&str` (`push_str("{")`), not as a `char`: a
// `char` is encoded as UTF-8 at each push, and that encoder cost the
// browser page 0.2 KB gzip (docs/package.md).
#![allow(clippy::single_char_add_str)]

extern crate alloc;

pub mod batch;
#[cfg(feature = "std")]
pub mod book;
pub mod delivery;
pub mod error;
pub mod event;
pub mod follow;
#[cfg(feature = "std")]
mod hash;
pub mod js;
pub mod json;
pub mod lease;
#[cfg(feature = "steps")]
pub mod ledger;
pub mod mirror;
#[cfg(feature = "output")]
pub mod output;
pub mod resume;
#[cfg(feature = "steps")]
pub mod steps;
pub mod task;
pub mod text;
#[cfg(feature = "steps")]
pub mod timeline;
pub mod transition;
pub mod value;
pub mod work;

pub use batch::{BatchAnswer, BatchMirror};
#[cfg(feature = "std")]
pub use book::{
    check_callback, check_callback_id, notification_key, Applied, Book, Notification, Swept,
};
pub use delivery::{check_delivery_input, decide_delivery, Delivery, DeliveryReason, Receipt};
pub use error::{Error, ErrorCode};
pub use event::{DecisionKind, Event, EventKind};
pub use follow::{Follow, FollowConfig, FollowEvent};
pub use lease::{Lease, LeaseChange};
pub use mirror::{MergeOutcome, Mirror, Next, RejectReason, Rejection, UpdateReason};
#[cfg(feature = "output")]
pub use output::{
    AppendReason, Appended, Catchup, Chunk, OutputLog, OutputMirror, OutputUpdate, StreamName,
};
pub use resume::{
    answer_from_recent, plan_resume, same_epoch, worth_holding, EpochAnswer, ResumeAnswer,
    ResumeMode, ResumePlan, DEFAULT_RETENTION_VERSIONS,
};
pub use task::{create_task, CreateTask, Decision, HistoryEntry, State, Task, TaskView};
pub use transition::{apply_event, expire_task, Outcome, Reason, Step, Transition};
pub use value::{Millis, NonBlank, Percent, MAX_SAFE_INTEGER};
pub use work::{
    check_report_clock, claim_start, claimable, runs_workflow, ClaimRequest, Directive,
};

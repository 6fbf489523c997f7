//! # taskwire-worker
//!
//! A worker for a taskwire server (PROTOCOL.md §Workers): it claims
//! queued tasks of the kinds it has handlers for, runs each as a [`Job`],
//! and reports for it through signed callbacks. The handler is a plain
//! async function; it never sees a signature, a retry, a heartbeat or a
//! lease (Temporal's activities are the model).
//!
//! ```no_run
//! use std::time::Duration;
//! use taskwire_worker::{Done, Worker};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let worker = Worker::builder("http://127.0.0.1:8080", "demo", "whsec_…")
//!     .concurrency(4)
//!     .build()?;
//! worker.handle("summary", |job| async move {
//!     for step in 0..8u8 {
//!         job.check()?; // before each tool call
//!         tokio::time::sleep(Duration::from_millis(100)).await;
//!         job.check()?; // and after
//!         job.progress((step + 1) * 12, Some(&format!("step-{step}"))).await?;
//!     }
//!     Ok(Done::result(format!("blob://{}", job.id()), "sha256:…"))
//! })?;
//! let running = tokio::spawn({
//!     let worker = worker.clone();
//!     async move { worker.run().await }
//! });
//! // … on SIGTERM:
//! worker.shutdown(Duration::from_secs(10)).await;
//! # running.await??; Ok(()) }
//! ```
//!
//! What the worker does for the handler:
//!
//! - **Claims** `max = free slots` tasks at a time, held up to `waitMs`.
//! - **Heartbeats** every third of the lease. Every answer's `next` is
//!   obeyed: `cancel` and `stop` fire the job's [`CancellationToken`]
//!   (`tokio_util`), and [`Job::stop_reason`] says which
//!   ([`StopReason`]). A cancel so reaches a running job within one
//!   heartbeat. `reason` strings are never read for a decision.
//! - **Reports** the handler's outcome: `succeed`, `fail` (retryable or
//!   not, by [`ErrorClass`]), `ack_cancel` after a cancel, nothing after a
//!   `stop`. Every event carries the attempt (fencing).
//! - **Resends** a report after a network error, 408, 429 or 503 with the
//!   same callback id and body, signed afresh, with backoff and jitter,
//!   until the lease could no longer be alive; then the job's signal
//!   fires ([`StopReason::LeaseLost`]).
//! - **Keeps time** with the server: `atMs` and `webhook-timestamp` are
//!   the local clock plus the offset measured from each claim's `nowMs`
//!   (and the `Date` header on a refused timestamp), so a clock 10 minutes
//!   off keeps working.
//! - **Shuts down** gracefully ([`Worker::shutdown`]): unfinished tasks are
//!   handed back as retryable failures, for another worker to take.
//!
//! [`Job::vendor`] runs a vendor's asynchronous job by seed 004's rule:
//! submit once under an idempotency key, poll with bounded backoff, never
//! resubmit a submit whose outcome is unknown.
//!
//! [`CancellationToken`]: tokio_util::sync::CancellationToken

mod budget;
mod claim;
mod clock;
mod connect;
mod error;
mod http;
mod job;
mod output;
mod report;
#[cfg(test)]
mod report_vectors;
mod run;
mod sign;
mod steps;
mod vendor;
mod wire;
mod worker;

pub use budget::OverBudget;
pub use claim::RunError;
pub use clock::{system_clock, Clock};
pub use error::{
    classify, ConfigError, ErrorClass, FatalError, HttpStatusError, JobError, RetryableError,
};
pub use job::{Done, Job};
pub use output::{Output, FLUSH_AFTER, FLUSH_UNITS};
pub use report::StopReason;
pub use steps::{StepOutput, StepRefused};
/// What [`Job::spend`] reserves, and what a call used.
pub use taskwire_core::{ledger::Amount, steps::Usage};
pub use vendor::{Lookup, PollOptions, Status, SubmitError, Vendor};
pub use worker::{Worker, WorkerBuilder};

/// The crate's tokio-util, for [`tokio_util::sync::CancellationToken`].
pub use tokio_util;

//! What a handler gets: the claimed task, its cancellation signal, and the
//! reports a job makes itself (`progress`, `hold`).

use std::sync::Arc;

use serde::de::DeserializeOwned;
use taskwire_core::{Event, NonBlank, Percent, TaskView};
use tokio_util::sync::CancellationToken;

use crate::error::JobError;
use crate::output::Output;
use crate::report::{Kind, ReportError, Reporter, StopReason};
use crate::wire::Claimed;

/// How a job ended well: with a result, or held for a person's decision.
/// Made by [`Done::result`], or returned by [`Job::hold`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done(pub(crate) Ending);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    Result {
        result_ref: String,
        result_hash: String,
    },
    Held,
    /// The budget ran out: `exhaust`, with the partial result if any.
    Exhausted {
        partial: Option<(String, String)>,
    },
}

impl Done {
    /// The job produced its result: reported as `succeed`. `result_ref`
    /// says where it is stored, `result_hash` is its content hash (the
    /// same hash means the same result); both must not be blank.
    pub fn result(result_ref: impl Into<String>, result_hash: impl Into<String>) -> Self {
        Done(Ending::Result {
            result_ref: result_ref.into(),
            result_hash: result_hash.into(),
        })
    }

    /// The task's budget ran out (a [`crate::OverBudget`] refusal): the
    /// task ends `failed` with the error `budget-exhausted`, keeping the
    /// partial result named here, if any (PROTOCOL.md §Budgets and side
    /// effects). Reported as `exhaust`.
    pub fn budget_exhausted(partial: Option<(String, String)>) -> Self {
        Done(Ending::Exhausted { partial })
    }
}

/// One attempt at one claimed task, handed to the handler of its kind.
///
/// Cheap to clone (shared). The handler checks [`Job::check`] before and
/// after each tool call (seed 001), or selects on [`Job::token`], so that
/// a cancel stops it within one heartbeat.
#[derive(Clone)]
pub struct Job {
    inner: Arc<Inner>,
}

struct Inner {
    task: Claimed,
    reporter: Arc<Reporter>,
    /// The steps this attempt finished, with their checkpoints: the
    /// claimed task says only what earlier attempts did, and a step run
    /// twice in one attempt must not run twice (`Job::step`).
    finished_steps: std::sync::Mutex<Vec<(String, taskwire_core::steps::Checkpoint)>>,
}

impl Job {
    pub(crate) fn new(task: Claimed, reporter: Arc<Reporter>) -> Self {
        Job {
            inner: Arc::new(Inner {
                task,
                reporter,
                finished_steps: std::sync::Mutex::default(),
            }),
        }
    }

    /// The steps this attempt finished (see `Inner::finished_steps`).
    pub(crate) fn finished_steps(
        &self,
    ) -> std::sync::MutexGuard<'_, Vec<(String, taskwire_core::steps::Checkpoint)>> {
        // A panic while held cannot leave the list half-written: one push.
        self.inner
            .finished_steps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.inner.task.view.id
    }

    /// The task's kind (`""` for a task created without one).
    pub fn kind(&self) -> &str {
        &self.inner.task.kind
    }

    /// The attempt this job runs: the claimed task's `attempts`. Every
    /// report carries it, so a replaced attempt cannot overwrite the new
    /// one's result.
    pub fn attempt(&self) -> u64 {
        self.inner.reporter.attempt
    }

    /// The task as claimed, read by core: `decision` (with its reason)
    /// after a person decided on a held artifact, `artifact_ref` and
    /// `artifact_hash` of that artifact, `error` of the last failed
    /// attempt, `deadline_at_ms`, …
    pub fn task(&self) -> &TaskView {
        &self.inner.task.view
    }

    /// The task as the server sent it, as JSON text (with `kind`, `input`
    /// and `lease`).
    pub fn task_json(&self) -> &str {
        &self.inner.task.raw
    }

    /// The task's `input` exactly as sent (numbers keep their digits), or
    /// `None` when it has none.
    pub fn input_json(&self) -> Option<&str> {
        self.inner.task.input.as_deref()
    }

    /// The task's `input` read as `T`. A missing or malformed input is a
    /// final error naming the field (`input.pages: …`): no attempt fixes
    /// it.
    pub fn input<T: DeserializeOwned>(&self) -> Result<T, JobError> {
        let text = self.input_json().unwrap_or("null");
        taskwire_wire::from_json_serde::<T>(text, "input").map_err(|e| JobError::fatal(e.message))
    }

    /// The cancellation signal: fires on a cancel, when the attempt is
    /// over, when the lease is lost, or at the end of a shutdown's grace.
    /// [`Job::stop_reason`] tells which. After [`Job::cannot_cancel`] the
    /// job has a fresh token: take it again.
    pub fn token(&self) -> CancellationToken {
        self.inner.reporter.signal.token()
    }

    /// Why the signal fired, or `None` while it has not.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.inner.reporter.signal.why()
    }

    /// Waits until the signal fires; its reason.
    pub async fn cancelled(&self) -> StopReason {
        self.token().cancelled_owned().await;
        self.stop_reason().unwrap_or(StopReason::Stop)
    }

    /// `Err` (class [`crate::ErrorClass::Cancelled`]) once the signal
    /// fired: call it before and after each tool call, with `?`.
    pub fn check(&self) -> Result<(), JobError> {
        if self.token().is_cancelled() {
            Err(JobError::cancelled())
        } else {
            Ok(())
        }
    }

    /// An idempotency key for an external write: `"<taskId>:<step>:<action>"`,
    /// the same in every attempt, so a vendor that deduplicates by it
    /// performs the write once however often the task is retried.
    pub fn key(&self, step: &str, action: &str) -> String {
        format!("{}:{step}:{action}", self.id())
    }

    /// Reports progress (0 to 100) and the job's own resume point, which
    /// also renews the lease. Returns the cancellation error if the answer
    /// said to stop, so `job.progress(50, None).await?` stops the handler.
    pub async fn progress(&self, percent: u8, cursor: Option<&str>) -> Result<(), JobError> {
        let cursor = cursor.unwrap_or_default().to_string();
        let sent = self
            .inner
            .reporter
            .report(Kind::Renewing, |at_ms, attempt| {
                Ok(Event::Progress {
                    at_ms,
                    progress: Percent::new(f64::from(percent), "progress")?,
                    cursor: cursor.clone(),
                    attempt: Some(attempt),
                })
            })
            .await;
        match sent {
            Ok(_) | Err(ReportError::Ended) => self.check(),
            Err(e) => {
                self.check()?;
                Err(report_error("progress", e))
            }
        }
    }

    /// Answers a cancel the work cannot honour (an external write already
    /// under way): `cannot_cancel` with an optional reason for the person
    /// who asked. The task shows `cancel_ineffective`, the job goes on
    /// with a fresh [`Job::token`], and whatever it ends with ends the
    /// task `cancelled` (a result is kept for compensation, never
    /// delivered). Only after the signal fired for a cancel: otherwise a
    /// final error.
    pub async fn cannot_cancel(&self, reason: Option<&str>) -> Result<(), JobError> {
        let why = self.stop_reason();
        match self.inner.reporter.cannot_cancel(reason).await {
            Ok(true) => self.check(),
            Ok(false) => Err(JobError::fatal(format!(
                "cannot_cancel: only after a cancel, but the job's stop reason is {}",
                why.map_or("none", StopReason::as_str)
            ))),
            Err(ReportError::Ended) => Err(JobError::cancelled()),
            Err(e) => {
                self.check()?;
                Err(report_error("cannot_cancel", e))
            }
        }
    }

    /// Ends the job waiting for a person: `hold` with the artifact to
    /// decide on (`artifact_ref`, its content hash `artifact_hash`) and an
    /// optional question. The task goes to `waiting_approval`; after
    /// `approve` or `request_changes` it is claimed again, and the next
    /// attempt reads [`TaskView::decision`]. Return its `Done`:
    /// `return job.hold(r, h, Some("ok?")).await;`
    pub async fn hold(
        &self,
        artifact_ref: &str,
        artifact_hash: &str,
        question: Option<&str>,
    ) -> Result<Done, JobError> {
        self.inner.reporter.flush_outputs().await;
        let sent = self
            .inner
            .reporter
            .report(Kind::Last, |at_ms, attempt| {
                Ok(Event::Hold {
                    at_ms,
                    artifact_ref: NonBlank::new(artifact_ref, "artifactRef")?,
                    artifact_hash: NonBlank::new(artifact_hash, "artifactHash")?,
                    question: question.map(str::to_string),
                    attempt: Some(attempt),
                })
            })
            .await;
        match sent {
            Ok(_) => Ok(Done(Ending::Held)),
            Err(ReportError::Ended) => Err(JobError::cancelled()),
            Err(e) => Err(report_error("hold", e)),
        }
    }

    /// A writer on the task's output stream `name` (`draft`, `log`;
    /// PROTOCOL.md §Live output): `job.output("draft")?.write(token)`.
    /// Small writes are batched (see [`Output`]); what is buffered is sent
    /// before the attempt's last report. The same name gives the same
    /// writer. An invalid name is a final error naming `stream`.
    pub fn output(&self, name: &str) -> Result<Output, JobError> {
        Output::open(&self.inner.reporter, name)
    }

    /// The server's time now (ms), as this worker knows it.
    pub(crate) fn server_now_ms(&self) -> f64 {
        self.inner.reporter.now_ms()
    }

    pub(crate) fn reporter(&self) -> &Arc<Reporter> {
        &self.inner.reporter
    }
}

/// A report the server refused: a bad value from the handler, or a
/// server that does not accept this worker. No attempt fixes either.
pub(crate) fn report_error(what: &str, e: ReportError) -> JobError {
    JobError::fatal(format!("{what} report: {e}"))
}

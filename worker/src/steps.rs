//! Steps with checkpoints (PROTOCOL.md §Steps): [`Job::step`] runs one
//! step of the task's plan at most once across attempts. A step a
//! previous attempt finished is not run again: its checkpoint (where its
//! output is, and the output's hash) comes from the claimed task, so a
//! new attempt after a lapse, a retry or an approval starts at the first
//! step not yet finished. The rules (what a report does, that a finished
//! step never moves) are core's; this only reports them.

use std::future::Future;

use taskwire_core::steps::{Checkpoint, StepReport, StepStatus, Usage};
use taskwire_core::{Event, NonBlank};

use crate::error::JobError;
use crate::job::Job;
use crate::report::{Kind, ReportError};
use crate::wire::Reply;

/// A step report the server judged and refused (PROTOCOL.md §Steps):
/// `reason` is `unknown-step` (the plan has no such step), `no-plan` (the
/// task was created without one) or `step-conflict` (a finished step
/// never moves). Its answer still says `continue` (the attempt is alive),
/// so [`Job::step`] reads whether the report was taken: a step whose
/// `running` is refused is never run. A final error: the handler's `?`
/// fails the task with it; `JobError::source` downcasts to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRefused {
    /// The step's name.
    pub step: String,
    /// The server's reason.
    pub reason: String,
}

impl std::fmt::Display for StepRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step \"{}\" refused: {}", self.step, self.reason)
    }
}

impl std::error::Error for StepRefused {}

/// What a step produced: its checkpoint (the facts the next step starts
/// from: seed 001 §6) and, optionally, what it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOutput {
    output_ref: String,
    output_hash: String,
    usage: Option<Usage>,
}

impl StepOutput {
    /// The step's output: where it is stored and its content hash.
    pub fn new(output_ref: impl Into<String>, output_hash: impl Into<String>) -> Self {
        StepOutput {
            output_ref: output_ref.into(),
            output_hash: output_hash.into(),
            usage: None,
        }
    }

    /// With what the step used (tokens, cost, tool calls).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// One step report's fields besides the step's name.
struct Report<'a> {
    status: StepStatus,
    label: Option<&'a str>,
    usage: Option<Usage>,
    checkpoint: Option<Checkpoint>,
}

impl Default for Report<'_> {
    fn default() -> Self {
        Report {
            status: StepStatus::Running,
            label: None,
            usage: None,
            checkpoint: None,
        }
    }
}

impl Job {
    /// The checkpoint of step `name`, when this attempt finished it, or
    /// an earlier one did, as the claimed task says.
    pub fn step_checkpoint(&self, name: &str) -> Option<Checkpoint> {
        if let Some((_, done)) = self.finished_steps().iter().find(|(n, _)| n == name) {
            return Some(done.clone());
        }
        let plan = self.task().plan.as_ref()?;
        plan.checkpoints()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c.clone())
    }

    /// True when this attempt finished step `name`, or the claimed task
    /// says it is finished (succeeded or skipped). [`Job::step`] runs
    /// neither again: a
    /// succeeded step answers its checkpoint, and a skipped one (it has
    /// none) is refused (`step-conflict`, [`StepRefused`]), so branch on
    /// this first where another executor may skip steps.
    pub fn step_done(&self, name: &str) -> bool {
        if self.finished_steps().iter().any(|(n, _)| n == name) {
            return true;
        }
        self.task().plan.as_ref().is_some_and(|plan| {
            plan.steps
                .iter()
                .any(|s| s.name == name && s.status.is_final())
        })
    }

    /// Runs step `name` of the task's plan, unless an earlier attempt
    /// finished it: then its checkpoint is returned and `run` is not
    /// called. Otherwise reports it `running` (which renews the lease),
    /// runs it, and reports it `succeeded` with its checkpoint, or
    /// `failed` when `run` fails (the error is returned as is, and the
    /// attempt ends as the handler's error says). A cancel stops it with
    /// the cancellation error, like [`Job::progress`].
    ///
    /// ```ignore
    /// let facts = job.step("extract", || async {
    ///     Ok(StepOutput::new("blob://t/extract", "sha256:…"))
    /// }).await?;
    /// ```
    pub async fn step<F, Fut>(&self, name: &str, run: F) -> Result<Checkpoint, JobError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<StepOutput, JobError>>,
    {
        self.run_step(name, None, run).await
    }

    /// [`Job::step`], its `running` report carrying `label`: what a page
    /// shows while the step runs ("3/8: extracting key points").
    pub async fn step_labelled<F, Fut>(
        &self,
        name: &str,
        label: &str,
        run: F,
    ) -> Result<Checkpoint, JobError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<StepOutput, JobError>>,
    {
        self.run_step(name, Some(label), run).await
    }

    async fn run_step<F, Fut>(
        &self,
        name: &str,
        label: Option<&str>,
        run: F,
    ) -> Result<Checkpoint, JobError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<StepOutput, JobError>>,
    {
        if let Some(done) = self.step_checkpoint(name) {
            return Ok(done);
        }
        let name = NonBlank::new(name, "step").map_err(|e| JobError::fatal(e.message))?;
        let running = Report {
            status: StepStatus::Running,
            label,
            ..Report::default()
        };
        self.report_step(&name, running, || ()).await?;
        let ran = run().await.and_then(|output| {
            let checkpoint = Checkpoint {
                output_ref: NonBlank::new(output.output_ref, "outputRef")
                    .map_err(|e| JobError::fatal(e.message))?,
                output_hash: NonBlank::new(output.output_hash, "outputHash")
                    .map_err(|e| JobError::fatal(e.message))?,
            };
            Ok((checkpoint, output.usage))
        });
        let (checkpoint, usage) = match ran {
            Ok(done) => done,
            Err(e) => {
                // Best effort: the attempt's own end (its `fail`) follows.
                // A blank checkpoint fails the step too, never leaves it
                // `running`.
                let failed = Report {
                    status: StepStatus::Failed,
                    ..Report::default()
                };
                let _ = self.report_step(&name, failed, || ()).await;
                return Err(e);
            }
        };
        let succeeded = Report {
            status: StepStatus::Succeeded,
            checkpoint: Some(checkpoint.clone()),
            usage,
            label: None,
        };
        self.report_step(&name, succeeded, || {
            self.finished_steps()
                .push((name.as_str().to_string(), checkpoint.clone()));
        })
        .await?;
        Ok(checkpoint)
    }

    /// Sends one step report. `Ok` when the job goes on; else the
    /// cancellation, the refusal ([`StepRefused`]) or why it could not be
    /// sent. `recorded` is called when the server holds the report, before
    /// a cancel carried by the same answer is returned: a handler that goes
    /// on after `cannot_cancel` must not run a recorded step again.
    async fn report_step(
        &self,
        name: &NonBlank,
        report: Report<'_>,
        recorded: impl FnOnce(),
    ) -> Result<(), JobError> {
        let Report {
            status,
            label,
            usage,
            checkpoint,
        } = report;
        let sent = self
            .reporter()
            .report(Kind::Renewing, |at_ms, attempt| {
                Ok(Event::Step {
                    at_ms,
                    report: StepReport {
                        name: name.clone(),
                        status,
                        label: label.map(str::to_string),
                        usage,
                        checkpoint: checkpoint.clone(),
                    },
                    attempt: Some(attempt),
                })
            })
            .await;
        match sent {
            Ok(Reply {
                refused: Some(reason),
                ..
            }) => {
                self.check()?;
                Err(JobError::from(StepRefused {
                    step: name.as_str().to_string(),
                    reason,
                }))
            }
            Ok(_) => {
                recorded();
                self.check()
            }
            Err(ReportError::Ended) => self.check(),
            Err(e) => {
                self.check()?;
                Err(JobError::fatal(format!("step report: {e}")))
            }
        }
    }
}

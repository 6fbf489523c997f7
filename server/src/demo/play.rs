//! The demo workers' handler: a plain job function of the
//! `taskwire-worker` library, as a tenant would write one. The library
//! claims the task (the attempt's `start`), heartbeats, resends, and
//! reports the outcome; the handler plays the task's plan
//! ([`super::plans`]) and answers cancels:
//!
//! - a cancel met where the work can still stop ends the job (the library
//!   acknowledges it, `ack_cancel`);
//! - past the point of no return the job answers `cannot_cancel` once and
//!   goes on ([`super::plans::Step::cancellable`]);
//! - a `hold` ends the job; after the person's decision the task is
//!   claimed again, and the plan follows from the decision;
//! - a job that takes over a killed worker's task goes on from the
//!   task's checkpoint (the furthest step a job of it set out to report,
//!   see [`Script::reach`]), and says whom it replaces.

use std::sync::Arc;
use std::time::Duration;

use taskwire_worker::{Done, ErrorClass, Job, JobError, StopReason};
use tokio::time::Instant;

use super::link::Link;
use super::plans::{draft_hash, draft_ref, Action, Step, Workload, LONG_CANNOT_CANCEL};
use super::scripts::{Script, Scripts};
use super::workers::Workers;

/// What every handler of a tenant's workers shares.
pub struct Ctx {
    /// The demo's tasks: what to play for each.
    pub scripts: Arc<Scripts>,
    /// Holdings and notes.
    pub workers: Arc<Workers>,
    /// The tenant's relay to the server (it loses answers on request).
    pub link: Link,
}

/// Plays one claimed attempt of a demo task, as worker `worker`.
pub async fn run(ctx: Arc<Ctx>, worker: String, job: Job) -> Result<Done, JobError> {
    let Some(script) = ctx.scripts.get(job.id()) else {
        return Err(JobError::fatal(
            "not a task the demo made, or one it forgot (its workers run only what its \
             workloads made, for 10 minutes past their plan)",
        ));
    };
    let attempt = job.attempt();
    if let Workload::Report { .. } = script.workload {
        script.control.hold(attempt, &worker);
        let outcome = super::report::play(&job, script.speed).await;
        script.control.release(attempt);
        if outcome.is_ok() || job.stop_reason() == Some(StopReason::Cancel) {
            ctx.scripts.remove(job.id());
        }
        return outcome;
    }
    script.control.hold(attempt, &worker);
    if let Some((dead_attempt, dead)) = script.control.take_killed() {
        let text = format!(
            "{worker} took the task over from the killed {dead} (attempt {dead_attempt}): \
             attempt {attempt} goes on from its checkpoint, {} %",
            script.checkpoint()
        );
        ctx.workers.note(&script.tenant, job.id(), "replaced", text);
    }
    let plan = script.workload.plan(job.task(), script.checkpoint());
    // An attempt that ends well ends the task, unless it holds a draft
    // for a decision (the task is then claimed again).
    let holds = matches!(plan.last().map(|s| &s.action), Some(Action::Hold(_)));
    let mut player = Player {
        ctx: &ctx,
        script: &script,
        job: &job,
        worker: &worker,
        refused_cancel: false,
        t0: Instant::now(),
    };
    let outcome = player.play(&plan).await;
    script.control.release(attempt);
    let done_with = match &outcome {
        Ok(_) => !holds,
        Err(e) => match e.class() {
            ErrorClass::Final => true,
            ErrorClass::Cancelled => job.stop_reason() == Some(StopReason::Cancel),
            _ => false,
        },
    };
    if done_with {
        ctx.scripts.remove(job.id());
    }
    outcome
}

/// The text of draft `n` of the summary: what the reviewer approves.
pub fn draft_text(n: u32) -> String {
    let tone = if n == 1 { "" } else { ", shorter, as asked" };
    format!(
        "Draft {n} of the summary of doc-1{tone}. The change adds a state column to \
         invoices and a worker that fills it; billing-api and invoice-worker are \
         affected. Run the migration dry-run and the rollback test before release."
    )
}

struct Player<'a> {
    ctx: &'a Ctx,
    script: &'a Script,
    job: &'a Job,
    worker: &'a str,
    /// `cannot_cancel` was answered for this attempt's cancel.
    refused_cancel: bool,
    t0: Instant,
}

impl Player<'_> {
    /// Plays `plan`, this attempt's, step by step, to its last report.
    async fn play(&mut self, plan: &[Step]) -> Result<Done, JobError> {
        for (i, step) in plan.iter().enumerate() {
            self.wait_until(self.t0 + self.scaled(step.at), step.cancellable)
                .await?;
            let next_cancellable = plan.get(i + 1).map_or(true, |s| s.cancellable);
            match &step.action {
                Action::Progress {
                    percent,
                    lose_answer,
                } => {
                    if *lose_answer {
                        self.ctx.link.lose_next_answer(self.job.id(), "progress");
                    }
                    self.script.reach(*percent);
                    let cursor = format!("c{percent}");
                    if let Err(e) = self.job.progress(*percent, Some(&cursor)).await {
                        if self.job.stop_reason().is_none() {
                            return Err(e);
                        }
                        self.answer_signal(next_cancellable).await?;
                    }
                }
                Action::Hold(n) => {
                    // The draft itself, for the reviewer to read (live
                    // output: it bumps no version, so the seed's timeline
                    // keeps its versions); whole before the hold.
                    let draft = self.job.output("draft")?;
                    draft.write(&draft_text(*n)).await?;
                    draft.flush().await?;
                    let question = format!("Publish draft {n} of the summary?");
                    return self
                        .job
                        .hold(&draft_ref(*n), &draft_hash(*n), Some(&question))
                        .await;
                }
                Action::Succeed {
                    result_ref,
                    result_hash,
                    lose_answer,
                } => {
                    if *lose_answer {
                        self.ctx.link.lose_next_answer(self.job.id(), "succeed");
                    }
                    return Ok(Done::result(result_ref, result_hash));
                }
                Action::Fail { error, retryable } => {
                    return Err(if *retryable {
                        JobError::retryable(error)
                    } else {
                        JobError::fatal(error)
                    });
                }
            }
        }
        Err(JobError::fatal("the demo's plan ended without a result"))
    }

    /// Waits until `at`, answering the job's signal if it fires.
    async fn wait_until(&mut self, at: Instant, cancellable: bool) -> Result<(), JobError> {
        loop {
            self.answer_signal(cancellable).await?;
            let token = self.job.token();
            if token.is_cancelled() {
                // Answered already (`cannot_cancel`): the work goes on.
                tokio::time::sleep_until(at).await;
                return Ok(());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(at) => return Ok(()),
                _ = token.cancelled() => {}
            }
        }
    }

    /// `Err` when the job must stop: a cancel where the work can still
    /// stop, or any other signal (stop, lease lost). A cancel past the
    /// point of no return is answered `cannot_cancel` once.
    async fn answer_signal(&mut self, cancellable: bool) -> Result<(), JobError> {
        match self.job.stop_reason() {
            None => Ok(()),
            Some(StopReason::Cancel) if !cancellable => {
                if !self.refused_cancel {
                    self.refused_cancel = true;
                    self.job.cannot_cancel(Some(LONG_CANNOT_CANCEL)).await?;
                    let text = format!("{} cannot stop: {LONG_CANNOT_CANCEL}", self.worker);
                    self.ctx.workers.note(
                        &self.script.tenant,
                        self.job.id(),
                        "cannot-cancel",
                        text,
                    );
                }
                Ok(())
            }
            Some(_) => Err(JobError::cancelled()),
        }
    }

    fn scaled(&self, demo_ms: u64) -> Duration {
        Duration::from_secs_f64(demo_ms as f64 / self.script.speed / 1000.0)
    }
}

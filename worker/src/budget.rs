//! Budgets and side effects (PROTOCOL.md §Budgets and side effects; seed
//! 001 §5, §8): [`Job::spend`] reserves before a call and settles after
//! it, and [`Job::effect`] makes an external write under its idempotency
//! key and records it once. The rules (whether a reservation fits, which
//! record of a key wins) are core's, judged by the server; this only
//! reports and reads the answers.

use std::future::Future;

use taskwire_core::ledger::{Amount, EffectInput, ReserveInput};
use taskwire_core::steps::Usage;
use taskwire_core::{Event, NonBlank};

use crate::error::JobError;
use crate::job::Job;
use crate::report::{Kind, ReportError};
use crate::wire::Reply;

/// A reservation the task's budget cannot cover (`over-budget`), or one
/// the server refused for another reason (`reason`). The call was not
/// made. A final error: the handler may degrade (a smaller context, an
/// optional step skipped), or end the task with what it has through
/// [`crate::Done::budget_exhausted`]. `JobError::source` downcasts to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverBudget {
    /// The reservation's id.
    pub reservation: String,
    /// The server's reason (`over-budget`, `not-running`, …).
    pub reason: String,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "reservation \"{}\" refused: {}",
            self.reservation, self.reason
        )
    }
}

impl std::error::Error for OverBudget {}

fn non_blank(value: &str, field: &str) -> Result<NonBlank, JobError> {
    NonBlank::new(value, field).map_err(|e| JobError::fatal(e.message))
}

impl Job {
    /// Runs one paid call within the task's budget: reserves `estimate`
    /// (the call's ceiling: give the model the same `max_tokens`), runs
    /// `call`, and settles what it reports it used, releasing the rest.
    /// A call that fails settles nothing used, releasing the whole
    /// reservation, and its error is returned.
    ///
    /// `name` names the call within the attempt (`"draft"`,
    /// `"draft-retry-1"`): the reservation's id is `"<attempt>:<name>"`,
    /// so a resent report is a duplicate and a new attempt reserves
    /// afresh. A refused reservation is an [`OverBudget`] error, and the
    /// call is not made.
    pub async fn spend<T, F, Fut>(
        &self,
        name: &str,
        step: Option<&str>,
        estimate: Amount,
        call: F,
    ) -> Result<T, JobError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(T, Usage), JobError>>,
    {
        let id = non_blank(&format!("{}:{name}", self.attempt()), "reservation")?;
        let step = step.map(|s| non_blank(s, "step")).transpose()?;
        self.check()?;
        let reserve = |at_ms, attempt| {
            Ok(Event::Reserve {
                at_ms,
                reservation: ReserveInput {
                    id: id.clone(),
                    step: step.clone(),
                    amount: estimate,
                },
                attempt: Some(attempt),
            })
        };
        match self.send(reserve).await? {
            Reply {
                refused: Some(reason),
                ..
            } => {
                return Err(JobError::from(OverBudget {
                    reservation: id.as_str().to_string(),
                    reason,
                }))
            }
            _ => self.check()?,
        }
        let ran = call().await;
        let used = match &ran {
            Ok((_, usage)) => *usage,
            Err(_) => Usage::default(),
        };
        let settle = |at_ms, attempt| {
            Ok(Event::Settle {
                at_ms,
                reservation: id.clone(),
                usage: used,
                attempt: Some(attempt),
            })
        };
        let settled = self.send(settle).await;
        let (value, _) = ran?;
        settled?;
        Ok(value)
    }

    /// Makes one external write at most once for the task: `write` gets
    /// the idempotency key [`Job::key`]`(step, action)` (the same in
    /// every attempt: pass it to the outside system, which must
    /// deduplicate by it) and returns the id of what it wrote. The write
    /// is then recorded under `(step, action)`, and the id recorded
    /// first is returned: a write made again after a crash between the
    /// write and its record answers with the first one's id.
    ///
    /// A write the claimed task already records is not made again.
    pub async fn effect<F, Fut>(
        &self,
        step: &str,
        action: &str,
        write: F,
    ) -> Result<String, JobError>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<String, JobError>>,
    {
        if let Some(known) = self.recorded_effect(step, action) {
            return Ok(known);
        }
        let (step_name, action_name) = (non_blank(step, "step")?, non_blank(action, "action")?);
        self.check()?;
        let resource_id = write(self.key(step, action)).await?;
        let input = EffectInput {
            step: step_name,
            action: action_name,
            resource_id: non_blank(&resource_id, "resourceId")?,
        };
        let record = |at_ms, attempt| {
            Ok(Event::Effect {
                at_ms,
                effect: input.clone(),
                attempt: Some(attempt),
            })
        };
        let reply = self.send(record).await?;
        if let Some(reason) = reply.refused {
            return Err(JobError::fatal(format!(
                "side effect {step}/{action} ({resource_id}) not recorded: {reason}"
            )));
        }
        Ok(reply.resource_id.unwrap_or(resource_id))
    }

    /// The resource id the claimed task records under `(step, action)`.
    pub fn recorded_effect(&self, step: &str, action: &str) -> Option<String> {
        let ledger = self.task().ledger.as_deref()?;
        ledger.effect(step, action).map(|e| e.resource_id.clone())
    }

    /// Sends one renewing report and reads its answer; a report the job
    /// can no longer make (its attempt ended) is the cancellation or stop
    /// the signal holds.
    async fn send(
        &self,
        make: impl Fn(taskwire_core::Millis, u64) -> Result<Event, taskwire_core::Error>,
    ) -> Result<Reply, JobError> {
        match self.reporter().report(Kind::Renewing, make).await {
            Ok(reply) => Ok(reply),
            Err(ReportError::Ended) => {
                self.check()?;
                Err(JobError::cancelled())
            }
            Err(e) => {
                self.check()?;
                Err(crate::job::report_error("budget", e))
            }
        }
    }
}

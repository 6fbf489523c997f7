//! Steps inside a task (issue 26; seed 001 §2–4, §6): a plan of named
//! steps fixed for the task's life, each moved by its executor through
//! `pending → running → succeeded | failed | skipped`, and the
//! checkpoints a new attempt starts from.
//!
//! - **The plan** is a `workflowVersion` and ordered, distinct step
//!   names, given at creation or by the first attempt's `start`. Once set
//!   it is fixed (001 §3: 「部署新代码不能悄悄改变正在运行的旧任务」): a
//!   `start` naming another plan, or naming one on a task that started
//!   without, is refused (`plan-conflict`) and the task is untouched, so
//!   a worker running newer code cannot take over an older task.
//! - **A step report** (the `step` event) moves one step and is fenced by
//!   `attempt` like every executor event. Each change is one task
//!   version, so resume, snapshots, the mirror and batches follow steps
//!   as they follow progress.
//! - **Steps never go back**: `succeeded` and `skipped` are final, also
//!   across attempts and continuations; nothing returns to `pending`. A
//!   `failed` step may be run again by a later report (`running`, then an
//!   end), which is how a retried attempt goes on.
//! - **Checkpoints** (001 §6): a `succeeded` report may carry
//!   `outputRef` + `outputHash`, the facts to continue from (never the
//!   prompt). The same report again is a duplicate; another checkpoint
//!   for a succeeded step is `step-conflict`, as a different result for a
//!   succeeded task is `result-conflict`.
//! - **Progress** follows the steps when the executor reports none: it is
//!   raised to the share of finished (succeeded or skipped) steps, and a
//!   retry keeps at least that share instead of falling to 0.
//!
//! Not in the page's build (feature `steps`): the browser client follows
//! a task that has a plan through snapshots
//! ([`crate::ResumePlan::answer`]), whose `steps` fields it ignores.

mod json;
#[cfg(test)]
mod tests;

pub(crate) use json::{
    opt as write_opt, read_plan, read_report, read_task_plan, ref_and_hash, write_plan,
    write_report, write_task_plan,
};

use crate::value::NonBlank;
use alloc::{string::String, vec::Vec};

/// The most steps a plan may name: a plan is carried in every snapshot
/// of its task, so it must stay small.
pub const MAX_STEPS: usize = 200;

/// Where a step is. `pending` is where every step of a plan starts; no
/// report moves a step back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepStatus {
    /// Not started yet.
    Pending,
    /// An attempt is running it.
    Running,
    /// Done, possibly with a checkpoint. Final.
    Succeeded,
    /// The attempt that ran it failed at it; a later report may run it
    /// again.
    Failed,
    /// Deliberately not run (a deterministic branch of the workflow).
    /// Final.
    Skipped,
}

impl StepStatus {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::Running => "running",
            StepStatus::Succeeded => "succeeded",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
        }
    }

    /// Succeeded or skipped: no report moves it again.
    pub const fn is_final(self) -> bool {
        matches!(self, StepStatus::Succeeded | StepStatus::Skipped)
    }
}

/// What a step used, as its executor reports it (001 §2 `consumed`): the
/// step's own totals so far, not an increment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Model tokens.
    pub tokens: u64,
    /// Cost, in cents.
    pub cost_cents: u64,
    /// External tool calls.
    pub tool_calls: u64,
}

/// A succeeded step's output: where it is and its content hash (001 §6:
/// the facts to continue from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Where the step's output is stored.
    pub output_ref: NonBlank,
    /// Its content hash: the same hash is the same output.
    pub output_hash: NonBlank,
}

/// A plan as given at creation or in a `start`, validated: a non-blank
/// `workflowVersion` and 1 to [`MAX_STEPS`] distinct, non-blank names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanInput {
    workflow_version: NonBlank,
    names: Vec<NonBlank>,
}

impl PlanInput {
    /// Checks the plan; the error names the field (`steps[2]`).
    pub fn new(workflow_version: NonBlank, names: Vec<NonBlank>) -> Result<Self, crate::Error> {
        if let Err((index, why)) = json::check_names(&names) {
            let field = match index {
                Some(i) => crate::text::join(&["steps[", &crate::text::decimal(i as u64), "]: "]),
                None => String::from("steps: "),
            };
            return Err(crate::Error::invalid(field + &why));
        }
        Ok(PlanInput {
            workflow_version,
            names,
        })
    }

    /// The plan a creation input names, if any: `workflowVersion` and
    /// `steps` both or neither, each checked (the error names the field).
    pub fn from_input(
        workflow_version: Option<&str>,
        steps: Option<&[String]>,
    ) -> Result<Option<Self>, crate::Error> {
        let (version, steps) = match (workflow_version, steps) {
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(crate::Error::invalid(
                    "steps: required with workflowVersion",
                ))
            }
            (None, Some(_)) => {
                return Err(crate::Error::invalid(
                    "workflowVersion: required with steps",
                ))
            }
            (Some(v), Some(s)) => (v, s),
        };
        let version = NonBlank::new(version, "workflowVersion")?;
        let mut names = Vec::with_capacity(steps.len());
        for (i, name) in steps.iter().enumerate() {
            let field = crate::text::join(&["steps[", &crate::text::decimal(i as u64), "]"]);
            names.push(NonBlank::new(name.as_str(), &field)?);
        }
        PlanInput::new(version, names).map(Some)
    }

    /// The workflow version.
    pub fn workflow_version(&self) -> &str {
        &self.workflow_version
    }

    /// The step names, in order.
    pub fn names(&self) -> &[NonBlank] {
        &self.names
    }

    /// The plan a task keeps: every step pending.
    pub fn to_plan(&self) -> Plan {
        Plan {
            workflow_version: self.workflow_version.as_str().into(),
            steps: self.names.iter().map(|n| StepRecord::pending(n)).collect(),
        }
    }
}

/// One step as the task keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    /// Its name in the plan.
    pub name: String,
    /// Where it is.
    pub status: StepStatus,
    /// The attempt that last moved it.
    pub attempt: Option<u64>,
    /// What the page shows for it ("extracting key points").
    pub label: Option<String>,
    /// What it used, as last reported.
    pub usage: Option<Usage>,
    /// Its output, once succeeded with one.
    pub checkpoint: Option<Checkpoint>,
}

impl StepRecord {
    fn pending(name: &str) -> Self {
        StepRecord {
            name: name.into(),
            status: StepStatus::Pending,
            attempt: None,
            label: None,
            usage: None,
            checkpoint: None,
        }
    }
}

/// A task's plan and where each of its steps is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The workflow version the task runs under, fixed for its life.
    pub workflow_version: String,
    /// The steps, in the plan's order.
    pub steps: Vec<StepRecord>,
}

impl Plan {
    /// True when `input` is this plan (same version, same names in the
    /// same order).
    pub fn is(&self, input: &PlanInput) -> bool {
        self.workflow_version == input.workflow_version.as_str()
            && self.steps.len() == input.names.len()
            && self
                .steps
                .iter()
                .zip(&input.names)
                .all(|(s, n)| s.name == n.as_str())
    }

    /// The same plan with every step pending: where a replay starts.
    pub fn restarted(&self) -> Plan {
        Plan {
            workflow_version: self.workflow_version.clone(),
            steps: self
                .steps
                .iter()
                .map(|s| StepRecord::pending(&s.name))
                .collect(),
        }
    }

    /// Percent of the steps finished (succeeded or skipped), rounded
    /// down: what overall progress is raised to.
    pub fn percent_done(&self) -> u8 {
        let done = self.steps.iter().filter(|s| s.status.is_final()).count();
        // `steps` is never empty (PlanInput::new), and done <= len.
        (done * 100 / self.steps.len().max(1)) as u8
    }

    /// The succeeded steps' checkpoints, in plan order: what a new
    /// attempt continues from (PROTOCOL.md §Steps).
    pub fn checkpoints(&self) -> impl Iterator<Item = (&str, &Checkpoint)> {
        self.steps
            .iter()
            .filter(|s| s.status == StepStatus::Succeeded)
            .filter_map(|s| s.checkpoint.as_ref().map(|c| (s.name.as_str(), c)))
    }

    /// The first step not finished yet (neither succeeded nor skipped):
    /// where a new attempt starts. `None` when every step is finished.
    pub fn resume_at(&self) -> Option<&str> {
        self.steps
            .iter()
            .find(|s| !s.status.is_final())
            .map(|s| s.name.as_str())
    }
}

/// What a `step` event reports: one step's new status, with what it
/// used, a label, and (for `succeeded`) its checkpoint. Valid by
/// construction: the status is never `pending`, and a checkpoint comes
/// only with `succeeded`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// The step, by its name in the plan.
    pub name: NonBlank,
    /// Its new status (never `pending`).
    pub status: StepStatus,
    /// What the page shows for it.
    pub label: Option<String>,
    /// What it used so far.
    pub usage: Option<Usage>,
    /// Its output (`succeeded` only).
    pub checkpoint: Option<Checkpoint>,
}

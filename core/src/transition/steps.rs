//! The `step` event and a plan given by `start` (PROTOCOL.md §Steps;
//! [`crate::steps`] states the rules).
//!
//! A step report is judged like `progress`: only while an attempt holds
//! the task (`running`, `unknown`, `cancelling`, `cancel_ineffective`),
//! after fencing, and a report of the current attempt is a sign of life
//! (it brings an `unknown` task back to `running`, renews the lease and
//! clears an error an earlier attempt left).

use super::{Outcome, Reason};
use crate::steps::{PlanInput, StepRecord, StepReport};
use crate::task::{State, TaskView};

/// What a report does to the step it names.
enum Move {
    /// It says what the step already says: no version.
    Repeat,
    /// It would move a final step, or give a succeeded step another
    /// checkpoint: refused.
    Conflict,
    /// It moves the step (or relabels a running one).
    Apply,
}

fn judge_move(step: &StepRecord, report: &StepReport, attempt: u64) -> Move {
    let same_status = step.status == report.status;
    if step.status.is_final() {
        // Skipped carries no checkpoint; succeeded must name the same one
        // (or none, when it was recorded without).
        return if same_status && report.checkpoint == step.checkpoint {
            Move::Repeat
        } else {
            Move::Conflict
        };
    }
    let same_label = report.label.is_none() || report.label == step.label;
    let same_usage = report.usage.is_none() || report.usage == step.usage;
    if same_status && step.attempt == Some(attempt) && same_label && same_usage {
        Move::Repeat
    } else {
        Move::Apply
    }
}

impl TaskView {
    /// `start` with a plan, or without: a plan is taken only by the
    /// first attempt's start on a task that has none; another plan than
    /// the task's (or one on a task that started without) is
    /// `plan-conflict`, and the start is refused.
    pub(super) fn start_planned(&mut self, plan: Option<&PlanInput>) -> Outcome {
        if let Some(plan) = plan {
            let fits = match &self.plan {
                Some(kept) => kept.is(plan),
                None => self.attempts == 0,
            };
            if !fits {
                return Outcome::unchanged(Reason::PlanConflict, false);
            }
        }
        let outcome = self.start();
        if outcome.changed {
            if self.plan.is_none() {
                self.plan = plan.map(|p| p.to_plan().into());
            }
            self.charge_dead_attempts();
        }
        outcome
    }

    /// A `step` event. `current`: it names its attempt (see `report`).
    pub(super) fn step_report(&mut self, report: &StepReport, current: bool) -> Outcome {
        if !self.state.holds_attempt() {
            return Outcome::unchanged(Reason::NotRunning, false);
        }
        let attempt = self.attempts;
        let Some(plan) = self.plan.as_mut() else {
            return Outcome::unchanged(Reason::NoPlan, false);
        };
        let Some(step) = plan.steps.iter_mut().find(|s| s.name == *report.name) else {
            return Outcome::unchanged(Reason::UnknownStep, false);
        };
        match judge_move(step, report, attempt) {
            Move::Repeat => return Outcome::unchanged(Reason::DuplicateStep, true),
            Move::Conflict => return Outcome::unchanged(Reason::StepConflict, false),
            Move::Apply => {}
        }
        step.status = report.status;
        step.attempt = Some(attempt);
        if report.label.is_some() {
            step.label.clone_from(&report.label);
        }
        if report.usage.is_some() {
            step.usage = report.usage;
        }
        if report.checkpoint.is_some() {
            step.checkpoint.clone_from(&report.checkpoint);
        }
        let done = plan.percent_done();
        self.progress = self.progress.max(done);
        self.report_taken(current);
        Outcome::changed(Reason::StepRecorded, false)
    }

    /// A report of the attempt (a step, a reservation, a settlement, an
    /// effect) was taken: the attempt is alive, so an `unknown` task is
    /// `running` again, and one naming its attempt (`current`) clears an
    /// error an earlier attempt left.
    pub(super) fn report_taken(&mut self, current: bool) {
        if self.state == State::Unknown {
            self.state = State::Running;
        }
        self.clear_error_if(current);
    }

    /// After a retry or an abandoned attempt set progress to 0: the
    /// finished steps stay finished, so progress keeps their share.
    pub(super) fn keep_steps_progress(&mut self) {
        if let Some(plan) = &self.plan {
            self.progress = self.progress.max(plan.percent_done());
        }
    }
}

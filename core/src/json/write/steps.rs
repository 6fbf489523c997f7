//! The hand-written writers of steps (PROTOCOL.md §Steps), byte for byte
//! the serde writers' (`steps/json.rs`). Only in builds with the `steps`
//! feature: the page's build has neither the fields nor this code.

use super::{ToJson, Writer};
use crate::steps::{Checkpoint, Plan, PlanInput, StepRecord, StepReport, Usage};

impl ToJson for Usage {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("tokens", &self.tokens);
        w.field("costCents", &self.cost_cents);
        w.field("toolCalls", &self.tool_calls);
        w.close();
    }
}

fn checkpoint(w: &mut Writer, c: Option<&Checkpoint>) {
    if let Some(c) = c {
        w.field("outputRef", c.output_ref.as_str());
        w.field("outputHash", c.output_hash.as_str());
    }
}

impl ToJson for StepRecord {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("name", &self.name);
        w.field("status", self.status.as_str());
        w.some("attempt", &self.attempt);
        w.some("label", &self.label);
        w.some("usage", &self.usage);
        checkpoint(w, self.checkpoint.as_ref());
        w.close();
    }
}

/// A task's plan, after its other fields.
pub(super) fn task_plan(w: &mut Writer, plan: Option<&Plan>) {
    if let Some(plan) = plan {
        w.field("workflowVersion", &plan.workflow_version);
        w.field("steps", &plan.steps);
    }
}

/// A plan given in a `start`, after its `leaseMs`.
pub(super) fn start_plan(w: &mut Writer, plan: Option<&PlanInput>) {
    if let Some(plan) = plan {
        w.field("workflowVersion", plan.workflow_version());
        let names: alloc::vec::Vec<&str> = plan.names().iter().map(|n| n.as_str()).collect();
        w.field("steps", &names);
    }
}

/// A `step` event's own fields.
pub(super) fn report(w: &mut Writer, report: &StepReport) {
    w.field("name", report.name.as_str());
    w.field("status", report.status.as_str());
    w.some("label", &report.label);
    w.some("usage", &report.usage);
    checkpoint(w, report.checkpoint.as_ref());
}

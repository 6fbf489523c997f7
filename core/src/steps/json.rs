//! Steps on the wire. A plan given at creation or in a `start` is
//! `"workflowVersion":"2026-09-17.1","steps":["load","classify"]`; the
//! task view carries it as `"workflowVersion"` and `"steps":[{"name":…,
//! "status":…, "attempt"?, "label"?, "usage"?, "outputRef"?,
//! "outputHash"?}]`. A `step` event's own fields are flat:
//! `name`, `status`, `label?`, `usage?`, `outputRef?`, `outputHash?`.

use alloc::vec::Vec;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use super::{Checkpoint, PlanInput, StepRecord, StepReport, StepStatus, Usage, MAX_STEPS};
use crate::json::{self, Fields, FromJson, Gather, Path, Placeholder, Value};
use crate::text::{decimal, join, quoted};
use crate::value::NonBlank;

const STATUSES: [(&str, StepStatus); 5] = [
    ("pending", StepStatus::Pending),
    ("running", StepStatus::Running),
    ("succeeded", StepStatus::Succeeded),
    ("failed", StepStatus::Failed),
    ("skipped", StepStatus::Skipped),
];

impl FromJson for StepStatus {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        json::variant(value, at, &STATUSES)
    }
}

impl Placeholder for StepStatus {
    fn placeholder() -> Self {
        StepStatus::Pending
    }
}

impl Serialize for StepStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl FromJson for Usage {
    /// `{"tokens":…,"costCents":…,"toolCalls":…}`, each a counter
    /// (an integer ≥ 0); an absent one is 0.
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        Ok(Usage {
            tokens: f.get("tokens")?.unwrap_or(0),
            cost_cents: f.get("costCents")?.unwrap_or(0),
            tool_calls: f.get("toolCalls")?.unwrap_or(0),
        })
    }
}

impl Serialize for Usage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Usage", 3)?;
        st.serialize_field("tokens", &self.tokens)?;
        st.serialize_field("costCents", &self.cost_cents)?;
        st.serialize_field("toolCalls", &self.tool_calls)?;
        st.end()
    }
}

/// Writes `value` under `name`, or skips the field when it is `None`.
pub(crate) fn opt<S: SerializeStruct, T: Serialize>(
    s: &mut S,
    name: &'static str,
    value: Option<T>,
) -> Result<(), S::Error> {
    match value {
        Some(v) => s.serialize_field(name, &v),
        None => s.skip_field(name),
    }
}

impl Serialize for StepRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Step", 7)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("status", &self.status)?;
        opt(&mut st, "attempt", self.attempt)?;
        opt(&mut st, "label", self.label.as_ref())?;
        opt(&mut st, "usage", self.usage.as_ref())?;
        let c = self.checkpoint.as_ref();
        opt(&mut st, "outputRef", c.map(|c| &c.output_ref))?;
        opt(&mut st, "outputHash", c.map(|c| &c.output_hash))?;
        st.end()
    }
}

/// The checkpoint fields of a step (in the view) or a `succeeded` report:
/// both or neither.
fn checkpoint(g: &mut Gather<'_, '_, '_, '_>) -> Option<Checkpoint> {
    ref_and_hash(g, ["outputRef", "outputHash"])
}

/// A reference and its content hash under `keys` (`outputRef` +
/// `outputHash`, or an `exhaust`'s `resultRef` + `resultHash`): both or
/// neither, the error naming the missing one.
pub(crate) fn ref_and_hash(
    g: &mut Gather<'_, '_, '_, '_>,
    [ref_key, hash_key]: [&str; 2],
) -> Option<Checkpoint> {
    let output_ref: Option<NonBlank> = g.opt(ref_key);
    let output_hash: Option<NonBlank> = g.opt(hash_key);
    match (output_ref, output_hash) {
        (Some(output_ref), Some(output_hash)) => Some(Checkpoint {
            output_ref,
            output_hash,
        }),
        (Some(_), None) => {
            g.fail(hash_key, &crate::text::join(&["required with ", ref_key]));
            None
        }
        (None, Some(_)) => {
            g.fail(ref_key, &crate::text::join(&["required with ", hash_key]));
            None
        }
        (None, None) => None,
    }
}

impl FromJson for StepRecord {
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mut g = Gather::new(&f, None);
        let name: NonBlank = g.req("name");
        let record = StepRecord {
            name: name.into_string(),
            status: g.req("status"),
            attempt: g.opt("attempt"),
            label: g.opt("label"),
            usage: g.opt("usage"),
            checkpoint: checkpoint(&mut g),
        };
        if record.checkpoint.is_some() && record.status != StepStatus::Succeeded {
            g.fail("outputRef", "only a succeeded step has a checkpoint");
        }
        g.finish(record)
    }
}

/// The fields of a `step` event (after `type` and `atMs`): `name`,
/// `status` (not `pending`), `label?`, `usage?`, and for `succeeded`
/// only `outputRef` + `outputHash` (both or neither).
pub(crate) fn read_report(g: &mut Gather<'_, '_, '_, '_>) -> StepReport {
    let name: NonBlank = g.req("name");
    let status: StepStatus = g.req("status");
    if status == StepStatus::Pending {
        g.fail("status", "a report never moves a step back to \"pending\"");
    }
    let label = g.opt("label");
    let usage = g.opt("usage");
    let checkpoint = checkpoint(g);
    if checkpoint.is_some() && status != StepStatus::Succeeded {
        g.fail("outputRef", "only a succeeded step has a checkpoint");
    }
    StepReport {
        name,
        status,
        label,
        usage,
        checkpoint,
    }
}

/// Writes a `step` event's own fields.
pub(crate) fn write_report<S: SerializeStruct>(
    st: &mut S,
    report: &StepReport,
) -> Result<(), S::Error> {
    st.serialize_field("name", &report.name)?;
    st.serialize_field("status", &report.status)?;
    opt(st, "label", report.label.as_ref())?;
    opt(st, "usage", report.usage.as_ref())?;
    let c = report.checkpoint.as_ref();
    opt(st, "outputRef", c.map(|c| &c.output_ref))?;
    opt(st, "outputHash", c.map(|c| &c.output_hash))
}

/// A plan given in an object (a `start` event, a creation input):
/// `workflowVersion` and `steps` (names), both or neither, checked field
/// by field (`steps[2]: "load" is named twice`).
pub(crate) fn read_plan(
    g: &mut Gather<'_, '_, '_, '_>,
    f: &Fields<'_, '_, '_>,
) -> Option<PlanInput> {
    let version: Option<NonBlank> = g.opt("workflowVersion");
    let names: Option<Vec<NonBlank>> = g.opt("steps");
    match (version, names) {
        (None, None) => None,
        (Some(_), None) => {
            g.fail("steps", "required with workflowVersion");
            None
        }
        (None, Some(_)) => {
            g.fail("workflowVersion", "required with steps");
            None
        }
        (Some(version), Some(names)) => match check_names(&names) {
            Ok(()) => PlanInput::new(version, names).ok(),
            Err((i, why)) => {
                let base = f.at();
                let list = Path::Key(&base, "steps");
                let at = match i {
                    Some(i) => Path::Index(&list, i),
                    None => list,
                };
                g.fail_with(json::invalid(why, at));
                None
            }
        },
    }
}

/// [`PlanInput::new`]'s rules, with the failing index for the error's
/// path.
pub(super) fn check_names(
    names: &[NonBlank],
) -> Result<(), (Option<usize>, alloc::string::String)> {
    if names.is_empty() || names.len() > MAX_STEPS {
        let why = join(&[
            "must name 1 to ",
            &decimal(MAX_STEPS as u64),
            " steps, got ",
            &decimal(names.len() as u64),
        ]);
        return Err((None, why));
    }
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            return Err((Some(i), join(&[&quoted(name), " is named twice"])));
        }
    }
    Ok(())
}

/// Writes a plan given in a `start`: `workflowVersion`, then `steps`.
pub(crate) fn write_plan<S: SerializeStruct>(
    st: &mut S,
    plan: Option<&PlanInput>,
) -> Result<(), S::Error> {
    opt(st, "workflowVersion", plan.map(|p| &p.workflow_version))?;
    opt(st, "steps", plan.map(|p| &p.names))
}

/// Writes a task's plan: `workflowVersion`, then `steps` (records).
pub(crate) fn write_task_plan<S: SerializeStruct>(
    st: &mut S,
    plan: Option<&super::Plan>,
) -> Result<(), S::Error> {
    opt(st, "workflowVersion", plan.map(|p| &p.workflow_version))?;
    opt(st, "steps", plan.map(|p| &p.steps))
}

/// Reads a task's plan from its view's fields; `None` when it has none.
pub(crate) fn read_task_plan(g: &mut Gather<'_, '_, '_, '_>) -> Option<super::Plan> {
    let workflow_version: Option<NonBlank> = g.opt("workflowVersion");
    let steps: Option<Vec<StepRecord>> = g.opt("steps");
    match (workflow_version, steps) {
        (Some(v), Some(steps)) if !steps.is_empty() => Some(super::Plan {
            workflow_version: v.into_string(),
            steps,
        }),
        (None, None) => None,
        _ => {
            g.fail(
                "steps",
                "a task's plan needs workflowVersion and 1 or more steps",
            );
            None
        }
    }
}

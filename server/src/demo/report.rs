//! The demo's report: a task made of steps, each paid model call within a
//! budget, and an external write recorded once (issue 26, seed 001): what
//! `Job::step`, `Job::spend` and `Job::effect` of the worker library do,
//! played by the demo's workers like any tenant's handler would.
//!
//! Four steps: `read`, `analyze` and `draft` each make one model call,
//! reserved before it and settled after (PROTOCOL.md §Budgets and side
//! effects); `publish` posts the report to a pretend tracker under its
//! idempotency key. With the tight budget the draft's call does not fit:
//! the task ends `failed` with the error `budget-exhausted`, keeping the
//! analysis as its partial result (001 §7: 「结束并交付部分结果」). A cancel
//! during a call ends it there: the call settles nothing used, the step is
//! `failed`, and the task's timeline carries the cancel report.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use taskwire_wire::to_json;
use taskwire_worker::{Amount, Done, Job, JobError, OverBudget, StepOutput, Usage};

use super::plans::Workload;
use super::tokens::DemoCaller;
use super::{created, options, start_workload, Scripted, TaskIds};
use crate::error::ApiError;
use crate::routes::tasks::LifecycleOptions;
use crate::AppState;

/// The report's input.
#[derive(Serialize)]
struct ReportInput {
    tight: bool,
    workload: &'static str,
}

/// `POST /v1/demo/workloads/report`: `{"speed", "tight"?}`, `tight` for
/// a budget its third call does not fit.
pub async fn start(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (options, speed) = options(raw)?;
    let tight = options.tight.unwrap_or(false);
    let task = Scripted {
        kind: "report",
        ttl_ms: 3_600_000.0,
        input: to_json(&ReportInput {
            tight,
            workload: "report",
        }),
        workload: Workload::Report { tight },
    };
    let ids = start_workload(&state, tenant, speed, vec![task]).await?;
    Ok(created(TaskIds { task_ids: ids }))
}

/// The report's workflow version: its plan is fixed for its life.
pub const WORKFLOW: &str = "demo-report-2026-12";

/// Its steps, with the label the page shows while each runs.
pub const STEPS: [(&str, &str); 4] = [
    ("read", "1/4: reading the change"),
    ("analyze", "2/4: analysing its impact"),
    ("draft", "3/4: drafting the report"),
    ("publish", "4/4: publishing it"),
];

/// One step's model call: the tokens reserved (the call's ceiling), the
/// tokens it uses, and how long it runs in demo milliseconds.
struct Call {
    reserve: u64,
    uses: u64,
    ms: u64,
}

/// The calls of `read`, `analyze` and `draft`; `publish` makes none.
const CALLS: [Call; 3] = [
    Call {
        reserve: 1_200,
        uses: 900,
        ms: 2_000,
    },
    Call {
        reserve: 2_000,
        uses: 1_700,
        ms: 3_000,
    },
    Call {
        reserve: 2_400,
        uses: 2_100,
        ms: 4_000,
    },
];

/// How long publishing takes, in demo milliseconds.
const PUBLISH_MS: u64 = 800;

/// The budget: room for every call (4,700 tokens used of 6,000), or with
/// `tight` only for the first two (2,600 used; the draft's 2,400 more
/// do not fit in 3,000).
pub fn budget_tokens(tight: bool) -> u64 {
    if tight {
        3_000
    } else {
        6_000
    }
}

/// The longest the report runs, in demo milliseconds.
pub fn longest() -> u64 {
    CALLS.iter().map(|c| c.ms).sum::<u64>() + PUBLISH_MS
}

/// The report's plan and budget on top of the workload's `base` options.
pub fn lifecycle(tight: bool, base: &LifecycleOptions) -> LifecycleOptions {
    LifecycleOptions {
        workflow_version: Some(WORKFLOW.to_string()),
        steps: Some(STEPS.iter().map(|(name, _)| name.to_string()).collect()),
        budget: Some(taskwire_core::ledger::Budget {
            max_tokens: Some(budget_tokens(tight)),
            max_cost_cents: None,
        }),
        ..base.clone()
    }
}

/// Plays one attempt of a report: the steps an earlier attempt finished
/// are not run again (their checkpoints come with the claim).
pub async fn play(job: &Job, speed: f64) -> Result<Done, JobError> {
    let mut last: Option<(String, String)> = None;
    for (i, (name, label)) in STEPS.into_iter().enumerate() {
        let ran = job
            .step_labelled(name, label, || async {
                match CALLS.get(i) {
                    Some(call) => model_call(job, name, call, speed).await?,
                    None => publish(job, speed).await?,
                }
                Ok(StepOutput::new(
                    format!("blob://reports/{}/{name}", job.id()),
                    format!("sha256:{name}"),
                ))
            })
            .await;
        match ran {
            Ok(checkpoint) => {
                last = Some((
                    checkpoint.output_ref.to_string(),
                    checkpoint.output_hash.to_string(),
                ));
            }
            Err(e) if e.source().is_some_and(|s| s.is::<OverBudget>()) => {
                // What the finished steps made is the partial result.
                return Ok(Done::budget_exhausted(last));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Done::result(
        format!("blob://reports/{}", job.id()),
        "sha256:report",
    ))
}

/// One model call within the budget: reserved, run (a wait that a cancel
/// cuts short), settled.
async fn model_call(job: &Job, step: &str, call: &Call, speed: f64) -> Result<(), JobError> {
    let estimate = Amount {
        tokens: call.reserve,
        cost_cents: 0,
    };
    job.spend(step, Some(step), estimate, || async {
        wait(job, call.ms, speed).await?;
        let used = Usage {
            tokens: call.uses,
            cost_cents: call.uses / 500,
            tool_calls: 0,
        };
        Ok(((), used))
    })
    .await
}

/// Posts the report to the pretend tracker under its idempotency key: the
/// tracker names the post after the key, as one that deduplicates would.
async fn publish(job: &Job, speed: f64) -> Result<(), JobError> {
    wait(job, PUBLISH_MS, speed).await?;
    job.effect("publish", "post-report", |key| async move {
        // FNV-1a of the key: the same key, the same post.
        let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Ok(format!("REP-{:06x}", hash & 0xff_ffff))
    })
    .await?;
    Ok(())
}

/// Waits `demo_ms` (divided by `speed`), or until the job's signal fires.
async fn wait(job: &Job, demo_ms: u64, speed: f64) -> Result<(), JobError> {
    let token = job.token();
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs_f64(demo_ms as f64 / speed / 1000.0)) => Ok(()),
        _ = token.cancelled() => Err(JobError::cancelled()),
    }
}

//! `--demo`: the static demo page, the demo's workers, and the
//! `/v1/demo/*` endpoints (not part of PROTOCOL.md; see server/README.md).
//!
//! The workers are deliberately outsiders: they run on the
//! `taskwire-worker` library and claim the demo's tasks from this
//! server's work queue over real loopback HTTP, signing with the tenant's
//! callback secret, exactly as a tenant's own workers would. The network
//! between them ([`link`]) loses a few answers on purpose, so the library
//! redelivers (same `webhook-id`) and the demo shows the server absorbing
//! duplicates (`GET /v1/demo/stats`).
//!
//! Everything is scoped to the caller's tenant and bounded ([`limits`]):
//! one tenant can neither see nor cut another's connections, nor grow the
//! server without limit by starting workloads.
//!
//! - [`plans`]: what each workload's jobs report, and when;
//! - [`play`]: the workers' handler, which plays a plan and answers
//!   cancels;
//! - [`fleet`]: the workers, per tenant, and the page's kills;
//! - [`link`]: the relay between the workers and the server;
//! - [`scripts`]: what the demo made each task for;
//! - [`workers`]: who holds each demo task, and the workers' notes;
//! - [`limits`]: per-tenant counters, caps and the start rate;
//! - [`files`]: the static page, regular files under the root only;
//! - [`tokens`]: who the page is, and its browser tokens.

pub mod batch;
pub mod files;
pub mod fleet;
pub mod limits;
pub mod link;
pub mod made;
pub mod plans;
pub mod play;
pub mod report;
pub mod scripts;
pub mod tokens;
pub mod workers;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::{Deserialize, Serialize};
use taskwire_wire::{from_json_serde_bytes, to_json};

pub use self::limits::Demo;
use self::limits::{MAX_SPEED, MIN_SPEED, TENANT_RUNNING};
use self::plans::Workload;
use self::scripts::Script;
use self::tokens::DemoCaller;
use self::workers::Note;
use crate::error::{quoted, ApiError};
use crate::routes::tasks::{new_task_view, store_new_task, LifecycleOptions};
use crate::routes::{body, check_id, limited};
use crate::stats::CallbackCounts;
use crate::wire_json::WireJson;
use crate::AppState;
use taskwire_wire::exact::RawJson;

/// Adds the demo routes and the static-file fallback.
pub fn routes(app: Router<AppState>) -> Router<AppState> {
    app.route("/v1/demo/workloads/summary", limited(post(summary)))
        .route("/v1/demo/workloads/batch", limited(post(batch)))
        .route("/v1/demo/workloads/long", limited(post(long)))
        .route("/v1/demo/workloads/report", limited(post(report::start)))
        .route("/v1/demo/tasks/{id}/kill-worker", post(kill_worker))
        .route("/v1/demo/drop-connections", post(drop_connections))
        .route("/v1/demo/stats", get(stats))
        .route("/v1/demo/tokens", limited(post(tokens::mint)))
        .fallback(files::static_file)
}

/// A workload's body: `{"speed": n}`, and for the summary
/// `"approval": false` to play the seed's timeline without the hold.
#[derive(Debug, Default, Deserialize)]
struct Options {
    speed: Option<f64>,
    approval: Option<bool>,
    /// The batch's size (`workloads/batch` only).
    items: Option<f64>,
    /// A budget too small for the report's third call (`workloads/report`
    /// only).
    tight: Option<bool>,
}

/// The body's options (optional; an empty body is speed 1), and its speed.
fn options(raw: Result<Bytes, BytesRejection>) -> Result<(Options, f64), ApiError> {
    let raw = body(raw)?;
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok((Options::default(), 1.0));
    }
    let options = from_json_serde_bytes::<Options>(&raw, "body")?;
    let speed = options.speed.unwrap_or(1.0);
    if !(speed.is_finite() && (MIN_SPEED..=MAX_SPEED).contains(&speed)) {
        return Err(ApiError::invalid(format!(
            "body.speed: must be a number from {MIN_SPEED} to {MAX_SPEED}, got {speed}"
        )));
    }
    Ok((options, speed))
}

fn speed(raw: Result<Bytes, BytesRejection>) -> Result<f64, ApiError> {
    Ok(options(raw)?.1)
}

fn scaled(ms: u64, speed: f64) -> f64 {
    ms as f64 / speed
}

/// One task of a workload: its kind, TTL (ms), input (JSON text) and
/// what the demo's workers play for it.
struct Scripted {
    kind: &'static str,
    ttl_ms: f64,
    input: String,
    workload: Workload,
}

// The bodies below keep their keys in name order: the order the page and
// the stored inputs have always had.

/// A summary task's input.
#[derive(Serialize)]
struct SummaryInput {
    approval: bool,
    doc: &'static str,
    workload: &'static str,
}

/// The long job's input.
#[derive(Serialize)]
struct LongInput {
    steps: u32,
    workload: &'static str,
}

/// A started workload of single tasks.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TaskIds {
    task_ids: Vec<String>,
}

/// A started batch workload.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BatchStarted<'a> {
    batch_id: &'a str,
    cursor: u64,
    scenarios: Vec<&'static str>,
    task_ids: Vec<&'a str>,
}

/// A killed worker: which attempt and worker went silent.
#[derive(Serialize)]
struct Killed {
    attempt: u64,
    killed: bool,
    worker: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Dropped {
    dropped: bool,
    held_requests: usize,
}

/// `GET /v1/demo/stats`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DemoStats {
    /// `byReason`, `callbacks`, `deduplicated`.
    #[serde(flatten)]
    callbacks: CallbackCounts,
    held_requests: usize,
    notes: Vec<Note>,
    retention: u64,
    workloads: Workloads,
}

#[derive(Serialize)]
struct Workloads {
    limit: usize,
    running: usize,
}

/// Admits a workload (all of its tasks or none, see [`limits`]), starts
/// the tenant's workers if they do not run yet, and creates its tasks for
/// the tenant, each with its script. Returns the ids.
async fn start_workload(
    state: &AppState,
    tenant: String,
    speed: f64,
    tasks: Vec<Scripted>,
) -> Result<Vec<String>, ApiError> {
    let runs: Vec<Duration> = tasks
        .iter()
        .map(|t| Duration::from_secs_f64(scaled(t.workload.longest(), speed) / 1000.0))
        .collect();
    let slots = state.demo.admit(&tenant, &runs)?;
    state.demo.fleets.ensure(state, &tenant).await?;
    // A killed worker's task is re-queued seconds after its lease lapses.
    let lifecycle = LifecycleOptions {
        unknown_grace_ms: Some(fleet::grace_ms(speed)),
        ..Default::default()
    };
    let mut ids = Vec::with_capacity(tasks.len());
    for (task, slot) in tasks.into_iter().zip(slots) {
        let input = RawJson::parse(task.input)
            .map_err(|e| ApiError::internal(format!("demo input: {e}")))?;
        let kind = Some(task.kind.to_string());
        let options = match task.workload {
            Workload::Report { tight } => report::lifecycle(tight, &lifecycle),
            _ => lifecycle.clone(),
        };
        let view = new_task_view(state, "body", (task.ttl_ms, 3), options, &kind)?;
        // The script first: a held claim may take the task the moment it
        // is stored.
        let id = view.id.clone();
        let script = Script::new(
            &state.demo.workers,
            (&tenant, &id),
            task.workload,
            speed,
            Arc::new(vec![slot]),
        );
        state.demo.scripts.insert(&id, script);
        let stored = store_new_task(state, tenant.clone(), None, view, kind, Some(input)).await;
        if let Err(e) = stored {
            state.demo.scripts.remove(&id);
            return Err(e);
        }
        state.demo.made.task(&id);
        ids.push(id);
    }
    Ok(ids)
}

async fn summary(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (options, speed) = options(raw)?;
    // The draft waits for a person unless the caller asks for the seed's
    // unbroken timeline.
    let approval = options.approval.unwrap_or(true);
    let task = Scripted {
        kind: "summary",
        ttl_ms: 3_600_000.0,
        input: to_json(&SummaryInput {
            approval,
            doc: "doc-1",
            workload: "summary",
        }),
        workload: Workload::Summary { approval },
    };
    let ids = start_workload(&state, tenant, speed, vec![task]).await?;
    Ok(created(TaskIds { task_ids: ids }))
}

/// The moderation batch: `{"speed", "items"}` (1 to 500 items, 500 when
/// not given), created as one batch and played by a worker pool
/// ([`batch`]).
async fn batch(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let (options, speed) = options(raw)?;
    let count = match options.items {
        None => batch::MAX_ITEMS,
        Some(n) if n.fract() == 0.0 && (1.0..=batch::MAX_ITEMS as f64).contains(&n) => n as usize,
        Some(n) => {
            return Err(ApiError::invalid(format!(
                "body.items: must be an integer from 1 to {}, got {n}",
                batch::MAX_ITEMS
            )))
        }
    };
    let started = batch::start(&state, tenant, speed, count).await?;
    let ids: Vec<&str> = started
        .batch
        .tasks
        .iter()
        .map(|t| t.view.id.as_str())
        .collect();
    Ok(created(BatchStarted {
        batch_id: &started.batch.id,
        cursor: started.batch.cursor,
        scenarios: started.scenarios,
        task_ids: ids,
    }))
}

async fn long(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let speed = speed(raw)?;
    let task = Scripted {
        kind: "long",
        ttl_ms: 3_600_000.0,
        input: to_json(&LongInput {
            steps: 40,
            workload: "long",
        }),
        workload: Workload::Long,
    };
    let ids = start_workload(&state, tenant, speed, vec![task]).await?;
    Ok(created(TaskIds { task_ids: ids }))
}

/// Kills the worker holding one of the caller's demo tasks, as its
/// process would die: every job it held dies with it, their leases lapse
/// (`unknown`), the server re-queues the tasks after their grace, and
/// another worker takes each over (see [`fleet`]).
async fn kill_worker(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    Path(id): Path<String>,
) -> Result<WireJson<Killed>, ApiError> {
    check_id("path.id", &id)?;
    let (attempt, worker) = state.demo.workers.kill(&tenant, &id)?;
    let workers = &state.demo.workers;
    let Some(fresh) = state.demo.fleets.kill(&state, &tenant, &worker).await? else {
        return Err(ApiError::conflict(
            "no-worker",
            format!(
                "path.id: the worker {} holding task {} was killed already",
                quoted(&worker),
                quoted(&id)
            ),
        ));
    };
    for (task, lost) in workers
        .killed_with(&worker)
        .into_iter()
        .chain([(id.clone(), attempt)])
    {
        let text = format!(
            "{worker} killed while it held attempt {lost}: no more heartbeats, its lease \
             lapses; {fresh} starts in its place"
        );
        workers.note(&tenant, &task, "killed", text);
    }
    Ok(WireJson(Killed {
        attempt,
        killed: true,
        worker,
    }))
}

/// Cuts the caller's held long-polls and SSE streams, and only theirs.
async fn drop_connections(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
) -> WireJson<Dropped> {
    let held = state.hub.drop_connections_of(&tenant);
    WireJson(Dropped {
        dropped: true,
        held_requests: held,
    })
}

/// The caller's own counters: its workloads' callbacks by reason, its
/// held requests and demo tasks, and the server's resume window.
async fn stats(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
) -> WireJson<DemoStats> {
    WireJson(DemoStats {
        callbacks: state.demo.stats(&tenant).callback_counts(),
        held_requests: state.hub.held_by(&tenant),
        // What the workers did that no task history shows (a worker
        // killed and replaced, a cancel that could not take effect).
        notes: state.demo.workers.notes(&tenant),
        // The page explains a snapshot as "gap N > retention".
        retention: state.retention,
        workloads: Workloads {
            limit: TENANT_RUNNING,
            running: state.demo.running(&tenant),
        },
    })
}

fn created(body: impl Serialize) -> Response {
    (StatusCode::CREATED, WireJson(body)).into_response()
}

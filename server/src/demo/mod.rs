//! `--demo`: the static demo page, an executor inside the server, and the
//! `/v1/demo/*` endpoints (not part of PROTOCOL.md; see server/README.md).
//!
//! The executor is deliberately an outsider: it posts **signed callbacks
//! over real HTTP** to this server's own callback endpoint, exactly as an
//! external executor would, including redeliveries (same `webhook-id`) and
//! a duplicate success (new `webhook-id`, same hash), so the demo shows
//! the server absorbing them (`GET /v1/demo/stats`).
//!
//! Everything is scoped to the caller's tenant and bounded ([`limits`]):
//! one tenant can neither see nor cut another's connections, nor grow the
//! server without limit by starting workloads.
//!
//! - [`plans`]: what each workload's executor sends, and when;
//! - [`limits`]: per-tenant counters, caps and the start rate;
//! - [`files`]: the static page, regular files under the root only;
//! - [`tokens`]: who the page is, and its browser tokens.

pub mod files;
pub mod limits;
pub mod plans;
pub mod tokens;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use taskwire_core::wire::from_json_serde_bytes;

pub use self::limits::Demo;
use self::limits::{Slot, MAX_SPEED, MIN_SPEED, TENANT_RUNNING};
use self::plans::{Step, EXPIRING_TTL_MS};
use self::tokens::DemoCaller;
use crate::error::ApiError;
use crate::exact_json::RawJson;
use crate::routes::tasks::create_for;
use crate::routes::{body, limited, now_ms, now_secs};
use crate::signature::{callback_body, signed_headers};
use crate::stats::Stats;
use crate::{client, AppState};

/// Adds the demo routes and the static-file fallback.
pub fn routes(app: Router<AppState>) -> Router<AppState> {
    app.route("/v1/demo/workloads/summary", limited(post(summary)))
        .route("/v1/demo/workloads/batch", limited(post(batch)))
        .route("/v1/demo/workloads/long", limited(post(long)))
        .route("/v1/demo/drop-connections", post(drop_connections))
        .route("/v1/demo/stats", get(stats))
        .route("/v1/demo/tokens", limited(post(tokens::mint)))
        .fallback(files::static_file)
}

#[derive(Debug, Deserialize)]
struct Speed {
    speed: Option<f64>,
}

/// `{"speed": n}` (optional; an empty body is speed 1).
fn speed(raw: Result<Bytes, BytesRejection>) -> Result<f64, ApiError> {
    let raw = body(raw)?;
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(1.0);
    }
    let speed = from_json_serde_bytes::<Speed>(&raw, "body")?
        .speed
        .unwrap_or(1.0);
    if !(speed.is_finite() && (MIN_SPEED..=MAX_SPEED).contains(&speed)) {
        return Err(ApiError::invalid(format!(
            "body.speed: must be a number from {MIN_SPEED} to {MAX_SPEED}, got {speed}"
        )));
    }
    Ok(speed)
}

fn scaled(ms: u64, speed: f64) -> f64 {
    ms as f64 / speed
}

/// One task of a workload: its kind, TTL (ms), input and plan.
struct Scripted {
    kind: &'static str,
    ttl_ms: f64,
    input: Value,
    plan: Vec<Step>,
}

/// Admits a workload (all of its tasks or none, see [`limits`]), creates
/// its tasks for the tenant and starts their executors. Returns the ids.
async fn start_workload(
    state: &AppState,
    tenant: String,
    speed: f64,
    tasks: Vec<Scripted>,
) -> Result<Vec<String>, ApiError> {
    let runs: Vec<Duration> = tasks
        .iter()
        .map(|t| Duration::from_secs_f64(scaled(plans::duration(&t.plan), speed) / 1000.0))
        .collect();
    let slots = state.demo.admit(&tenant, &runs)?;
    let stats = state.demo.stats(&tenant);
    let mut ids = Vec::with_capacity(tasks.len());
    for (task, slot) in tasks.into_iter().zip(slots) {
        let input = RawJson::parse(task.input.to_string())
            .map_err(|e| ApiError::internal(format!("demo input: {e}")))?;
        let (record, _) = create_for(
            state,
            tenant.clone(),
            None,
            (task.ttl_ms, 3),
            Default::default(),
            Some(task.kind.into()),
            Some(input),
        )
        .await?;
        let id = record.view.id;
        run(state, &stats, &tenant, &id, task.plan, speed, slot);
        ids.push(id);
    }
    Ok(ids)
}

async fn summary(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let speed = speed(raw)?;
    let task = Scripted {
        kind: "summary",
        ttl_ms: 3_600_000.0,
        input: json!({"doc": "doc-1", "workload": "summary"}),
        plan: plans::summary_plan(),
    };
    let ids = start_workload(&state, tenant, speed, vec![task]).await?;
    Ok(created(json!({"taskIds": ids})))
}

async fn batch(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let speed = speed(raw)?;
    let scenarios = [
        ("quota-then-success", 3_600_000.0, plans::quota_plan()),
        ("invalid-input", 3_600_000.0, plans::invalid_plan()),
        (
            "expires",
            scaled(EXPIRING_TTL_MS, speed),
            plans::expiring_plan(),
        ),
    ];
    let names: Vec<&str> = scenarios.iter().map(|s| s.0).collect();
    let tasks = scenarios
        .into_iter()
        .map(|(scenario, ttl_ms, plan)| Scripted {
            kind: "moderation",
            ttl_ms,
            input: json!({"workload": "batch", "scenario": scenario}),
            plan,
        })
        .collect();
    let ids = start_workload(&state, tenant, speed, tasks).await?;
    Ok(created(json!({"taskIds": ids, "scenarios": names})))
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
        input: json!({"workload": "long", "steps": 40}),
        plan: plans::long_plan(),
    };
    let ids = start_workload(&state, tenant, speed, vec![task]).await?;
    Ok(created(json!({"taskIds": ids})))
}

/// Cuts the caller's held long-polls and SSE streams, and only theirs.
async fn drop_connections(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
) -> Json<Value> {
    let held = state.hub.drop_connections_of(&tenant);
    Json(json!({"dropped": true, "heldRequests": held}))
}

/// The caller's own counters: its workloads' callbacks by reason, its
/// held requests and demo tasks, and the server's resume window.
async fn stats(State(state): State<AppState>, DemoCaller(tenant): DemoCaller) -> Json<Value> {
    let mut v = state.demo.stats(&tenant).callbacks_json();
    if let Value::Object(map) = &mut v {
        map.insert("heldRequests".into(), state.hub.held_by(&tenant).into());
        map.insert(
            "workloads".into(),
            json!({"running": state.demo.running(&tenant), "limit": TENANT_RUNNING}),
        );
        // The page explains a snapshot as "gap N > retention".
        map.insert("retention".into(), state.retention.into());
    }
    Json(v)
}

fn created(body: Value) -> Response {
    (StatusCode::CREATED, Json(body)).into_response()
}

/// Plays a plan: one task per workload, sleeping between steps, each
/// callback signed with the tenant's secrets and posted over loopback HTTP
/// to this server. A plan's callback ids are made the task's own (a
/// tenant's callback id is refused on its other tasks). Counts each answer
/// in the tenant's `stats`; gives `slot` back at the end.
///
/// The executor behaves as PROTOCOL.md §Lifecycle asks of one: every
/// event names its `attempt` (each `start` of the plan opens the next),
/// so the server's default lease applies; while it waits between steps it
/// sends a `heartbeat` every third of the lease, so a slow demo never
/// lapses; and when an answer says `cancelRequested` it stops the plan
/// and acknowledges (`ack_cancel`).
fn run(
    state: &AppState,
    stats: &Arc<Stats>,
    tenant: &str,
    task: &str,
    plan: Vec<Step>,
    speed: f64,
    slot: Slot,
) {
    let state = state.clone();
    let stats = Arc::clone(stats);
    let tenant = tenant.to_string();
    let task = task.to_string();
    let beat_every = Duration::from_millis((state.config.lease_ms / 3).max(1));
    tokio::spawn(async move {
        let _slot = slot;
        let post = |callback_id: String, event: Value| {
            let (state, stats, tenant, task) = (&state, &stats, &tenant, &task);
            async move {
                match send_callback(state, tenant, task, &callback_id, &event).await {
                    Ok(answer) => {
                        stats.callback_named(answer["reason"].as_str().unwrap_or(""));
                        answer["cancelRequested"] == true
                    }
                    Err(e) => {
                        eprintln!("taskwire-server: demo executor: {task}: {e}");
                        false
                    }
                }
            }
        };
        let t0 = tokio::time::Instant::now();
        let mut attempt = 0u64;
        let mut beats = 0u64;
        let mut last_sent = t0;
        // A redelivery resends the very same body under the same id.
        let mut sent: HashMap<String, Value> = HashMap::new();
        for step in plan {
            let at = t0 + Duration::from_secs_f64(scaled(step.at, speed) / 1000.0);
            while attempt > 0 && last_sent + beat_every < at {
                tokio::time::sleep_until(last_sent + beat_every).await;
                beats += 1;
                let beat = json!({"type": "heartbeat", "atMs": now_ms(), "attempt": attempt});
                last_sent = tokio::time::Instant::now();
                if post(format!("{task}-hb-{beats}"), beat).await {
                    return acknowledge(&post, &task, attempt).await;
                }
            }
            tokio::time::sleep_until(at).await;
            let event = match sent.get(&step.callback_id) {
                Some(event) => event.clone(),
                None => {
                    let mut event = step.event;
                    if event["type"] == "start" {
                        attempt += 1;
                    }
                    if let Value::Object(map) = &mut event {
                        map.insert("atMs".into(), json!(now_ms()));
                        if attempt > 0 {
                            map.insert("attempt".into(), json!(attempt));
                        }
                    }
                    sent.insert(step.callback_id.clone(), event.clone());
                    event
                }
            };
            last_sent = tokio::time::Instant::now();
            if post(format!("{task}-{}", step.callback_id), event).await {
                return acknowledge(&post, &task, attempt).await;
            }
        }
    });
}

/// The executor stops on a cancel request and says so.
async fn acknowledge<F, Fut>(post: &F, task: &str, attempt: u64)
where
    F: Fn(String, Value) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let ack = json!({"type": "ack_cancel", "atMs": now_ms(), "attempt": attempt});
    post(format!("{task}-ack-cancel"), ack).await;
}

/// Posts one signed callback; returns the server's answer.
async fn send_callback(
    state: &AppState,
    tenant: &str,
    task: &str,
    callback_id: &str,
    event: &Value,
) -> Result<Value, String> {
    let body = callback_body(task, event);
    let secrets = state.keyring.secrets_of(tenant);
    let signed = signed_headers(secrets, callback_id, now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("content-type", "application/json"));
    let addr = state.addr.to_string();
    let reply = client::request(
        &addr,
        "POST",
        &format!("/v1/tasks/{task}/callbacks"),
        &headers,
        body,
    )
    .await
    .map_err(|e| e.to_string())?;
    if reply.status == 200 {
        Ok(reply.json())
    } else {
        Err(format!("callback answered {}", reply.status))
    }
}

//! `--demo`: the static demo page, an executor inside the server, and the
//! `/v1/demo/*` endpoints (not part of PROTOCOL.md; see server/README.md).
//!
//! The executor is deliberately an outsider: it posts **signed callbacks
//! over real HTTP** to this server's own callback endpoint, exactly as an
//! external executor would, including redeliveries (same `webhook-id`) and
//! a duplicate success (new `webhook-id`, same hash), so the demo shows
//! the server absorbing them (`GET /v1/demo/stats`).

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use taskwire_core::wire::from_json_serde_bytes;

use crate::auth::Tenant;
use crate::error::ApiError;
use crate::routes::tasks::create_for;
use crate::routes::{body, limited, now_ms, now_secs};
use crate::signature::{callback_body, signed_headers};
use crate::{client, AppState, Config};

/// Adds the demo routes and the static-file fallback.
pub fn routes(app: Router<AppState>) -> Router<AppState> {
    app.route("/v1/demo/workloads/summary", limited(post(summary)))
        .route("/v1/demo/workloads/batch", limited(post(batch)))
        .route("/v1/demo/workloads/long", limited(post(long)))
        .route("/v1/demo/drop-connections", post(drop_connections))
        .route("/v1/demo/stats", get(stats))
        .fallback(static_file)
}

/// One scheduled callback: when (ms of demo time), which id, what event.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Demo time in milliseconds (divided by `speed`).
    pub at: u64,
    /// The `webhook-id`.
    pub callback_id: String,
    /// The event, without `atMs` (stamped when sent).
    pub event: Value,
}

fn step(at: u64, callback_id: &str, event: Value) -> Step {
    Step {
        at,
        callback_id: callback_id.to_string(),
        event,
    }
}

fn start(worker: &str) -> Value {
    json!({"type": "start", "worker": worker})
}

fn progress(p: u64) -> Value {
    json!({"type": "progress", "progress": p, "cursor": format!("c{p}")})
}

fn succeed(result_ref: &str, hash: &str) -> Value {
    json!({"type": "succeed", "resultRef": result_ref, "resultHash": hash})
}

fn fail(error: &str, retryable: bool) -> Value {
    json!({"type": "fail", "error": error, "retryable": retryable})
}

/// The seed's 24.3 s summary: versions 1..=5, plus a redelivery of the
/// 55 % callback (same id) and a duplicate success (new id, same hash).
pub fn summary_plan() -> Vec<Step> {
    let doc = "blob://summaries/doc-1";
    vec![
        step(1_200, "sum-1", start("summarizer-1")),
        step(6_400, "sum-2", progress(25)),
        step(13_100, "sum-3", progress(55)),
        step(13_600, "sum-3", progress(55)), // redelivery: duplicate-callback
        step(20_700, "sum-4", progress(82)),
        step(24_300, "sum-5", succeed(doc, "sha256:ab12")),
        step(24_800, "sum-5b", succeed(doc, "sha256:ab12")), // duplicate-result
    ]
}

/// Batch task 1: fails on quota (retryable), runs again and succeeds; the
/// second start is redelivered (duplicate-callback).
pub fn quota_plan() -> Vec<Step> {
    vec![
        step(500, "q-1", start("moderator-1")),
        step(1_500, "q-2", progress(40)),
        step(2_000, "q-3", fail("quota exceeded", true)),
        step(3_000, "q-4", start("moderator-2")),
        step(3_400, "q-4", start("moderator-2")), // redelivery
        step(4_000, "q-5", progress(60)),
        step(
            5_500,
            "q-6",
            succeed("blob://moderation/item-1", "sha256:cd34"),
        ),
    ]
}

/// Batch task 2: fails for good on invalid input.
pub fn invalid_plan() -> Vec<Step> {
    vec![
        step(800, "i-1", start("moderator-1")),
        step(1_000, "i-1", start("moderator-1")), // redelivery
        step(2_500, "i-2", fail("invalid input: image is empty", false)),
    ]
}

/// Batch task 3 (TTL `EXPIRING_TTL_MS`): starts, reports 30 %, goes
/// silent; the sweeper expires it, and a late success is absorbed.
pub fn expiring_plan() -> Vec<Step> {
    vec![
        step(1_000, "e-1", start("moderator-3")),
        step(2_000, "e-2", progress(30)),
        step(
            8_000,
            "e-3",
            succeed("blob://moderation/item-3", "sha256:ef56"),
        ),
    ]
}

/// The expiring batch task's TTL in demo milliseconds.
pub const EXPIRING_TTL_MS: u64 = 6_000;

/// 40 progress steps over ~20 s: a client cut off for a while is more than
/// `retention` versions behind and needs a snapshot.
pub fn long_plan() -> Vec<Step> {
    let mut plan = vec![step(300, "l-start", start("indexer-1"))];
    for k in 1..=40u64 {
        plan.push(step(300 + k * 500, &format!("l-{k}"), progress(k * 2)));
    }
    plan.push(step(
        20_800,
        "l-done",
        succeed("blob://index/doc-1", "sha256:9a7b"),
    ));
    plan
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
    if !(speed.is_finite() && (0.01..=1000.0).contains(&speed)) {
        return Err(ApiError::invalid(format!(
            "body.speed: must be a number from 0.01 to 1000, got {speed}"
        )));
    }
    Ok(speed)
}

fn scaled(ms: u64, speed: f64) -> f64 {
    ms as f64 / speed
}

async fn summary(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let speed = speed(raw)?;
    let input = json!({"doc": "doc-1", "workload": "summary"});
    let (task, _) = create_for(
        &state,
        tenant.clone(),
        None,
        3_600_000.0,
        3,
        Some("summary".into()),
        Some(input),
    )
    .await?;
    let id = id_of(&task)?;
    run(&state, &tenant, &id, summary_plan(), speed);
    Ok(created(json!({"taskIds": [id]})))
}

async fn batch(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let speed = speed(raw)?;
    let mut ids = Vec::new();
    let plans = [
        ("quota-then-success", 3_600_000.0, quota_plan()),
        ("invalid-input", 3_600_000.0, invalid_plan()),
        ("expires", scaled(EXPIRING_TTL_MS, speed), expiring_plan()),
    ];
    for (scenario, ttl, plan) in plans {
        let input = json!({"workload": "batch", "scenario": scenario});
        let (task, _) = create_for(
            &state,
            tenant.clone(),
            None,
            ttl,
            3,
            Some("moderation".into()),
            Some(input),
        )
        .await?;
        let id = id_of(&task)?;
        run(&state, &tenant, &id, plan, speed);
        ids.push(id);
    }
    Ok(created(json!({
        "taskIds": ids,
        "scenarios": ["quota-then-success", "invalid-input", "expires"],
    })))
}

async fn long(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let speed = speed(raw)?;
    let input = json!({"workload": "long", "steps": 40});
    let (task, _) = create_for(
        &state,
        tenant.clone(),
        None,
        3_600_000.0,
        3,
        Some("long".into()),
        Some(input),
    )
    .await?;
    let id = id_of(&task)?;
    run(&state, &tenant, &id, long_plan(), speed);
    Ok(created(json!({"taskIds": [id]})))
}

async fn drop_connections(State(state): State<AppState>, _tenant: Tenant) -> Json<Value> {
    let watched = state.hub.watched();
    state.hub.drop_connections();
    Json(json!({"dropped": true, "watchedTasks": watched}))
}

async fn stats(State(state): State<AppState>, _tenant: Tenant) -> Json<Value> {
    let mut v = state.stats.to_json();
    if let Value::Object(map) = &mut v {
        map.insert("watchedTasks".into(), state.hub.watched().into());
        // The page explains a snapshot as "gap N > retention".
        map.insert("retention".into(), state.retention.into());
    }
    Json(v)
}

fn id_of(task: &Value) -> Result<String, ApiError> {
    task["id"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| ApiError::internal("created task has no id"))
}

fn created(body: Value) -> Response {
    (StatusCode::CREATED, Json(body)).into_response()
}

/// Plays a plan: one task per workload, sleeping between steps, each
/// callback signed with the tenant's secrets and posted over loopback HTTP
/// to this server. A plan's callback ids are made the task's own (a
/// tenant's callback id is refused on its other tasks).
fn run(state: &AppState, tenant: &str, task: &str, plan: Vec<Step>, speed: f64) {
    let state = state.clone();
    let tenant = tenant.to_string();
    let task = task.to_string();
    tokio::spawn(async move {
        let t0 = tokio::time::Instant::now();
        // A redelivery resends the very same body under the same id.
        let mut sent: HashMap<String, Value> = HashMap::new();
        for step in plan {
            let at = t0 + Duration::from_secs_f64(scaled(step.at, speed) / 1000.0);
            tokio::time::sleep_until(at).await;
            let event = sent
                .entry(step.callback_id.clone())
                .or_insert_with(|| {
                    let mut event = step.event;
                    if let Value::Object(map) = &mut event {
                        map.insert("atMs".into(), json!(now_ms()));
                    }
                    event
                })
                .clone();
            let callback_id = format!("{task}-{}", step.callback_id);
            if let Err(e) = send_callback(&state, &tenant, &task, &callback_id, &event).await {
                eprintln!("taskwire-server: demo executor: {task}: {e}");
            }
        }
    });
}

async fn send_callback(
    state: &AppState,
    tenant: &str,
    task: &str,
    callback_id: &str,
    event: &Value,
) -> Result<(), String> {
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
        Ok(())
    } else {
        Err(format!("callback answered {}", reply.status))
    }
}

/// Serves `--demo-dir` at `/` (GET only); anything else is the JSON 404.
async fn static_file(State(state): State<AppState>, method: Method, uri: Uri) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return ApiError::not_found("path: no such route").into_response();
    }
    let Some(path) = demo_path(&state.config, uri.path()) else {
        return ApiError::not_found("path: no such route").into_response();
    };
    match tokio::fs::read(&path).await {
        Ok(bytes) => {
            let mut res = bytes.into_response();
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type(&path)),
            );
            res.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            res
        }
        Err(_) => ApiError::not_found("path: no such route").into_response(),
    }
}

/// Maps a URL path to a file: `/pkg/…` into `--demo-pkg-dir` (the built
/// npm package, so the page runs exactly what `npm run build` produced,
/// with no copy to go stale), everything else into `--demo-dir`.
pub fn demo_path(config: &Config, url_path: &str) -> Option<PathBuf> {
    match url_path.strip_prefix("/pkg/") {
        Some(rest) => safe_path(&config.demo_pkg_dir, rest),
        None => safe_path(&config.demo_dir, url_path),
    }
}

/// Maps a URL path into `root`, refusing `..`, absolute parts and
/// anything that is not a plain file name.
pub fn safe_path(root: &Path, url_path: &str) -> Option<PathBuf> {
    let rel = url_path.trim_start_matches('/');
    let rel = if rel.is_empty() || rel.ends_with('/') {
        format!("{rel}index.html")
    } else {
        rel.to_string()
    };
    let mut out = root.to_path_buf();
    for part in Path::new(&rel).components() {
        match part {
            Component::Normal(p) => out.push(p),
            _ => return None,
        }
    }
    Some(out)
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "wasm" => "application/wasm",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_demo_dir() {
        let root = Path::new("/srv/demo");
        assert_eq!(
            safe_path(root, "/"),
            Some(PathBuf::from("/srv/demo/index.html"))
        );
        assert_eq!(
            safe_path(root, "/pkg/a.js"),
            Some(PathBuf::from("/srv/demo/pkg/a.js"))
        );
        assert_eq!(safe_path(root, "/../etc/passwd"), None);
        assert_eq!(safe_path(root, "/a/../../b"), None);
    }

    #[test]
    fn pkg_paths_map_to_the_package_build() {
        let mut config = Config::defaults();
        config.demo_dir = PathBuf::from("/srv/demo");
        config.demo_pkg_dir = PathBuf::from("/srv/dist/client");
        assert_eq!(
            demo_path(&config, "/pkg/index.js"),
            Some(PathBuf::from("/srv/dist/client/index.js"))
        );
        assert_eq!(
            demo_path(&config, "/app.js"),
            Some(PathBuf::from("/srv/demo/app.js"))
        );
        assert_eq!(demo_path(&config, "/pkg/../../etc/passwd"), None);
        // `/pkg` without the slash is an ordinary page path.
        assert_eq!(
            demo_path(&config, "/pkg"),
            Some(PathBuf::from("/srv/demo/pkg"))
        );
    }

    #[test]
    fn plans_follow_the_seed() {
        let s = summary_plan();
        let ats: Vec<u64> = s.iter().map(|st| st.at).collect();
        assert!(ats.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(
            s.last().map(|st| st.event["resultHash"].clone()),
            Some(json!("sha256:ab12"))
        );
        assert_eq!(long_plan().len(), 42);
        assert!(expiring_plan().last().map(|s| s.at).unwrap_or(0) > EXPIRING_TTL_MS);
    }
}

//! Steps and checkpoints (issue 26, PROTOCOL.md §Steps) over HTTP, shared
//! by the SQLite and PostgreSQL tests: a plan given at create, step
//! reports through signed callbacks, and a second claim that carries the
//! first attempt's checkpoints. The rules are core's; these check that
//! the server parses, stores and shows what core decided.

use serde_json::{json, Value};

use super::json::ReplyJson;
use super::lifecycle::{create_with, ev, start, succeed, task};
use super::{assert_error, now_secs, secret, Harness};

static CLAIMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Claims one task of `kind` for tenant `demo`; its item.
async fn claim_one(h: &Harness, kind: &str) -> Value {
    let r = claim_with(
        h,
        json!({"worker": "wk", "kinds": [kind], "max": 1, "leaseMs": 60_000}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let tasks = r.json()["tasks"].as_array().unwrap().clone();
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    tasks[0].clone()
}

/// Sends a claim for tenant `demo`, signed; the reply.
pub async fn claim_with(h: &Harness, body: Value) -> super::Reply {
    let n = CLAIMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("clm_steps_{}_{n}", std::process::id());
    let body = body.to_string();
    let signed = secret().headers(&id, now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("taskwire-tenant", "demo"));
    h.req("POST", "/v1/work/claim", &headers, body).await
}

/// A worker names the workflow versions it runs: its claims pass over
/// the tasks planned for other versions (an older task waits for its own
/// workers), take tasks without a plan, and a bad list is refused naming
/// the field.
pub async fn workflow_versions_scenario(h: &Harness, kind: &str) {
    let planned =
        |version: &str| json!({"kind": kind, "workflowVersion": version, "steps": ["a", "b"]});
    let v1 = create_with(h, planned("v1")).await;
    let v2 = create_with(h, planned("v2")).await;
    let bare = create_with(h, json!({"kind": kind})).await;
    let claim = |versions: Value| json!({"worker": "wk", "kinds": [kind], "max": 3, "workflowVersions": versions});
    let r = claim_with(h, claim(json!(["v2", "v3"]))).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let mut ids: Vec<String> = r.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let mut wanted = vec![v2.clone(), bare.clone()];
    wanted.sort();
    assert_eq!(ids, wanted, "v1's task waits for a v1 worker");
    assert_eq!(task(h, &v1).await["state"], "queued");
    let r = claim_with(h, claim(json!(["v1"]))).await;
    let answer = r.json();
    let taken: Vec<&str> = answer["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(taken, [v1.as_str()]);
    let bad = claim_with(h, claim(json!([" "]))).await;
    assert_error(&bad, 400, "invalid-request", "claim.workflowVersions");
    let many: Vec<String> = (0..17).map(|i| format!("v{i}")).collect();
    let bad = claim_with(h, claim(json!(many))).await;
    assert_error(&bad, 400, "invalid-request", "claim.workflowVersions");
}

fn step(attempt: u64, name: &str, status: &str, extra: Value) -> Value {
    let mut e = ev("step", attempt, json!({"name": name, "status": status}));
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    e
}

fn checkpoint(name: &str) -> Value {
    json!({"outputRef": format!("blob://ck/{name}"), "outputHash": format!("sha256:{name}")})
}

/// What a callback answered: (reason, changed).
fn judged(answer: &Value) -> (String, bool) {
    (
        answer["reason"].as_str().unwrap_or_default().to_string(),
        answer["changed"].as_bool().unwrap_or_default(),
    )
}

async fn progress(h: &Harness, id: &str) -> Value {
    task(h, id).await["progress"].clone()
}

/// Attempt 1 finishes two of three steps and fails; the second claim
/// carries both checkpoints, so attempt 2 starts at `publish` and no
/// step runs twice. Duplicates and conflicts change nothing.
pub async fn checkpoints_scenario(h: &Harness, kind: &str) {
    let id = create_with(
        h,
        json!({"maxAttempts": 2, "kind": kind, "workflowVersion": "2026-09-17.1",
               "steps": ["load", "classify", "publish"]}),
    )
    .await;
    let first = claim_one(h, kind).await;
    assert_eq!((&first["id"], &first["attempts"]), (&json!(id), &json!(1)));
    assert_eq!(first["workflowVersion"], "2026-09-17.1", "{first}");
    assert_eq!(
        first["steps"][0],
        json!({"name": "load", "status": "pending"})
    );

    let running = h
        .ok_callback(
            &id,
            "l1",
            step(1, "load", "running", json!({"label": "1/3: loading"})),
        )
        .await;
    assert_eq!(
        judged(&running),
        ("step-recorded".into(), true),
        "{running}"
    );
    assert_eq!(progress(h, &id).await, 0);
    let loaded = h
        .ok_callback(&id, "l2", step(1, "load", "succeeded", checkpoint("load")))
        .await;
    assert_eq!(judged(&loaded), ("step-recorded".into(), true), "{loaded}");
    assert_eq!(progress(h, &id).await, 33, "one step of three finished");
    let again = h
        .ok_callback(&id, "l3", step(1, "load", "succeeded", checkpoint("load")))
        .await;
    assert_eq!(judged(&again), ("duplicate-step".into(), false), "{again}");
    let other = h
        .ok_callback(&id, "l4", step(1, "load", "succeeded", checkpoint("other")))
        .await;
    assert_eq!(judged(&other), ("step-conflict".into(), false), "{other}");
    h.ok_callback(
        &id,
        "c1",
        step(1, "classify", "succeeded", checkpoint("classify")),
    )
    .await;
    let failed = h
        .ok_callback(
            &id,
            "f1",
            ev("fail", 1, json!({"error": "quota", "retryable": true})),
        )
        .await;
    assert_eq!(failed["state"], "queued", "{failed}");
    assert_eq!(
        progress(h, &id).await,
        66,
        "the finished steps keep their share"
    );

    let second = claim_one(h, kind).await;
    assert_eq!(second["attempts"], 2, "{second}");
    let steps = second["steps"].as_array().unwrap();
    let done: Vec<(&str, &str)> = steps
        .iter()
        .filter(|s| s["status"] == "succeeded")
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["outputHash"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        done,
        [("load", "sha256:load"), ("classify", "sha256:classify")]
    );
    assert_eq!(steps[2]["status"], "pending", "attempt 2 starts at publish");
    let zombie = h
        .ok_callback(&id, "z1", step(1, "publish", "running", json!({})))
        .await;
    assert_eq!(judged(&zombie).0, "stale-attempt", "{zombie}");
    h.ok_callback(
        &id,
        "p1",
        step(2, "publish", "succeeded", checkpoint("publish")),
    )
    .await;
    let end = h.ok_callback(&id, "ok", succeed(2)).await;
    assert_eq!(end["state"], "succeeded", "{end}");
    let stored = task(h, &id).await;
    let attempts: Vec<&Value> = stored["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["attempt"])
        .collect();
    assert_eq!(
        attempts,
        [&json!(1), &json!(1), &json!(2)],
        "each step ran once: {stored}"
    );
}

/// The plan is fixed: a start naming another plan is refused, and a
/// create with a bad plan is a 400 naming the field.
pub async fn plan_is_fixed_scenario(h: &Harness) {
    let id = create_with(h, json!({"workflowVersion": "v1", "steps": ["a", "b"]})).await;
    let mut newer = start(1, 60_000);
    newer["workflowVersion"] = json!("v2");
    newer["steps"] = json!(["a", "b"]);
    let refused = h.ok_callback(&id, "s2", newer).await;
    assert_eq!(
        judged(&refused),
        ("plan-conflict".into(), false),
        "{refused}"
    );
    assert_eq!(task(h, &id).await["state"], "queued");

    let bad =
        json!({"ttlMs": 60_000, "maxAttempts": 1, "workflowVersion": "v1", "steps": ["a", " "]});
    let r = h.post("demo", "/v1/tasks", &[], &bad.to_string()).await;
    assert_error(&r, 400, "invalid-request", "body.steps[1]");
}

//! `--demo`: the demo's workers (the `taskwire-worker` library) claim
//! the workloads' tasks and report through the real callback endpoint
//! (signed, over HTTP), redeliveries included.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use taskwire_core::{Mirror, ResumeMode, State};

async fn wait_terminal(h: &Harness, id: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    let mut cursor = 0;
    loop {
        assert!(Instant::now() < deadline, "{id} did not finish");
        let (_, a) = h
            .resume("demo", id, &format!("cursor={cursor}&waitMs=2000"))
            .await;
        let task = a.task().unwrap();
        cursor = task.version;
        if task.state.is_terminal() {
            return serde_json::to_value(task).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summary_workload_runs_the_seed_timeline_with_duplicates_absorbed() {
    let h = harness(|c| c.demo = true).await;
    let r = h
        .post(
            "demo",
            "/v1/demo/workloads/summary",
            &[],
            r#"{"speed": 20, "approval": false}"#,
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let id = r.json()["taskIds"][0].as_str().unwrap().to_string();
    // Follow it as a client would: long-polls merged into a mirror.
    let mut mirror = Mirror::new(&id).unwrap();
    let mut seen = Vec::new();
    while !mirror.state().is_some_and(|s| s.is_terminal()) {
        let (_, a) = h
            .resume(
                "demo",
                &id,
                &format!("cursor={}&waitMs=5000", mirror.version()),
            )
            .await;
        let out = mirror.merge(&a);
        assert!(out.rejected.is_empty(), "{out:?}");
        seen.extend(out.applied);
    }
    let task = mirror.task().unwrap();
    assert_eq!(task.version, 5, "{task:?}");
    assert_eq!(task.state, State::Succeeded);
    assert_eq!(task.result_hash.as_deref(), Some("sha256:ab12"));
    // The link lost the answers to the 55 % report and to the success:
    // the library sent each again under its callback id, and the server
    // absorbed both.
    // (The success's resend follows the library's backoff.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let stats = loop {
        let stats = h.get("demo", "/v1/demo/stats").await.json();
        if stats["byReason"]["duplicate-callback"] == 2 || Instant::now() > deadline {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(stats["byReason"]["duplicate-callback"], 2, "{stats}");
    assert_eq!(stats["deduplicated"], 2, "{stats}");
    assert!(stats["callbacks"].as_u64().unwrap() >= 6, "{stats}");
    // Bad speed is a 400 naming the field.
    let bad = h
        .post("demo", "/v1/demo/workloads/summary", &[], r#"{"speed": 0}"#)
        .await;
    assert_error(&bad, 400, "invalid-request", "body.speed");
    // The 64 KiB body limit holds here too.
    let big = format!("{{\"speed\": 1{}}}", " ".repeat(64 * 1024));
    for path in [
        "/v1/demo/workloads/summary",
        "/v1/demo/workloads/batch",
        "/v1/demo/workloads/long",
    ] {
        let res = h.post("demo", path, &[], &big).await;
        assert_error(&res, 413, "payload-too-large", "body");
    }
    // A token, when given, must be a tenant's (without one the page acts
    // for --demo-tenant: tests/demo_tokens.rs).
    let unknown = h
        .post("nobody", "/v1/demo/workloads/summary", &[], "")
        .await;
    assert_error(&unknown, 401, "unauthorized", "Authorization");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_workload_retries_fails_and_expires() {
    let h = harness(|c| c.demo = true).await;
    let r = h
        .post(
            "demo",
            "/v1/demo/workloads/batch",
            &[],
            r#"{"speed": 10, "items": 3}"#,
        )
        .await;
    assert_eq!(r.status, 201);
    assert!(r.json()["batchId"].as_str().unwrap().starts_with("bat_"));
    assert_eq!(
        r.json()["scenarios"],
        json!(["quota-then-success", "invalid-input", "expires"])
    );
    let ids: Vec<String> = r.json()["taskIds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3);
    let quota = wait_terminal(&h, &ids[0], Duration::from_secs(10)).await;
    assert_eq!(
        (quota["state"].clone(), quota["attempts"].clone()),
        (json!("succeeded"), json!(2))
    );
    assert!(
        quota.get("error").is_none(),
        "success clears the error: {quota}"
    );
    let invalid = wait_terminal(&h, &ids[1], Duration::from_secs(10)).await;
    assert_eq!(invalid["state"], "failed");
    assert!(invalid["error"].as_str().unwrap().contains("invalid input"));
    let expiring = wait_terminal(&h, &ids[2], Duration::from_secs(10)).await;
    assert_eq!(expiring["state"], "expired");
    // The late success after expiry is absorbed, never applied.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stats = h.get("demo", "/v1/demo/stats").await.json();
    assert!(
        stats["byReason"]["terminal-conflict"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    assert!(
        stats["byReason"]["requeued"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    let feed = h.get("demo", "/v1/notifications").await.json();
    assert_eq!(feed["notifications"].as_array().unwrap().len(), 3, "{feed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_workload_needs_a_snapshot_after_a_cut_and_drop_connections_cuts() {
    let h = harness(|c| c.demo = true).await;
    let r = h
        .post("demo", "/v1/demo/workloads/long", &[], r#"{"speed": 10}"#)
        .await;
    let id = r.json()["taskIds"][0].as_str().unwrap().to_string();
    // Held requests (a long-poll and an SSE stream on a quiet task) are
    // cut by drop-connections: the client sees a broken connection.
    let quiet = h.create_default().await;
    let addr = h.addr.clone();
    let hold = format!("/v1/tasks/{quiet}/resume?cursor=0&waitMs=20000");
    let held = tokio::spawn(async move {
        taskwire_server::client::request(
            &addr,
            "GET",
            &hold,
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
    });
    let mut conn = taskwire_server::client::Conn::open(&h.addr).await.unwrap();
    let mut stream = conn
        .stream(
            "GET",
            &format!("/v1/tasks/{quiet}/events"),
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let dropped = h.post("demo", "/v1/demo/drop-connections", &[], "").await;
    assert_eq!(dropped.status, 200);
    let result = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .unwrap()
        .unwrap();
    assert!(
        result.is_err(),
        "a held long-poll must be cut: {:?}",
        result.map(|r| r.json())
    );
    let cut = tokio::time::timeout(Duration::from_secs(5), async {
        use http_body_util::BodyExt;
        loop {
            match stream.body_mut().frame().await {
                Some(Ok(_)) => continue, // the first message, heartbeats
                Some(Err(_)) => return true,
                None => return false,
            }
        }
    })
    .await
    .unwrap();
    assert!(cut, "the SSE stream must be cut, not ended cleanly");
    // Cut off for a while: more than `retention` versions pass.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (_, a) = h.resume("demo", &id, "cursor=1").await;
    assert_eq!(
        a.mode(),
        ResumeMode::Snapshot,
        "gap > retention needs a snapshot"
    );
    let done = wait_terminal(&h, &id, Duration::from_secs(10)).await;
    assert_eq!(done["version"], 42);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_page_is_served_and_paths_cannot_escape() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<h1>taskwire demo</h1>").unwrap();
    let demo_dir = dir.path().to_path_buf();
    let pkg = tempfile::tempdir().unwrap();
    std::fs::write(pkg.path().join("index.js"), "export {};").unwrap();
    let pkg_dir = pkg.path().to_path_buf();
    let h = harness(move |c| {
        c.demo = true;
        c.demo_dir = demo_dir;
        c.demo_pkg_dir = pkg_dir;
    })
    .await;
    let page = h.req("GET", "/", &[], "").await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(&page.body[..], b"<h1>taskwire demo</h1>");
    // /pkg/ is the built npm package, served from its own directory.
    let module = h.req("GET", "/pkg/index.js", &[], "").await;
    assert_eq!(module.status, 200);
    assert!(module
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    assert_eq!(&module.body[..], b"export {};");
    assert_error(
        &h.req("GET", "/pkg/../../Cargo.toml", &[], "").await,
        404,
        "not-found",
        "path",
    );
    // The page explains snapshots with the server's resume window.
    let stats = h.get("demo", "/v1/demo/stats").await.json();
    assert_eq!(stats["retention"], 8, "{stats}");
    assert_error(
        &h.req("GET", "/../Cargo.toml", &[], "").await,
        404,
        "not-found",
        "path",
    );
    assert_error(
        &h.req("GET", "/missing.js", &[], "").await,
        404,
        "not-found",
        "path",
    );
    assert_error(&h.get("demo", "/v1/nope").await, 404, "not-found", "path");
    // Without --demo the endpoints do not exist.
    let plain = harness(|_| {}).await;
    assert_error(
        &plain
            .post("demo", "/v1/demo/workloads/summary", &[], "")
            .await,
        404,
        "not-found",
        "path",
    );
}

/// The demo's workers are lifecycle workers: each attempt's start names
/// its attempt and lease (the server's `--lease-ms`, at least the worker
/// library's floor of 1 s), they heartbeat between slow steps so the
/// lease never lapses, and a cancel stops them: the next heartbeat's
/// answer says `next: cancel`, the job ends, and the library
/// acknowledges, so the task ends `cancelled` (PROTOCOL.md §Lifecycle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_workers_heartbeat_and_stop_when_cancelled() {
    // A lease of 1 s: heartbeats every 333 ms; the summary's steps are
    // ~5 s apart at speed 1.
    let h = harness(|c| {
        c.demo = true;
        c.lease_ms = 1_000;
    })
    .await;
    let r = h
        .post("demo", "/v1/demo/workloads/summary", &[], r#"{"speed": 1}"#)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let id = r.json()["taskIds"][0].as_str().unwrap().to_string();
    // Claimed at once, then well past a lease without a new version.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let task = h.get("demo", &format!("/v1/tasks/{id}")).await.json();
    assert_eq!(task["state"], "running", "heartbeats keep it alive: {task}");
    assert_eq!(task["attempts"], 1);
    let (_, answer) = h.resume("demo", &id, "cursor=0").await;
    let start = serde_json::to_value(&answer.events()[0].event).unwrap();
    assert_eq!(
        (start["attempt"].clone(), start["leaseMs"].clone()),
        (json!(1), json!(1_000)),
        "{start}"
    );
    let c = h
        .post("demo", &format!("/v1/tasks/{id}/cancel"), &[], "")
        .await;
    assert_eq!(c.json()["task"]["state"], "cancelling", "{:?}", c.json());
    let done = wait_terminal(&h, &id, Duration::from_secs(5)).await;
    assert_eq!(done["state"], "cancelled", "{done}");
    let (_, answer) = h.resume("demo", &id, "cursor=0").await;
    let last = serde_json::to_value(&answer.events().last().unwrap().event).unwrap();
    assert_eq!(
        last["type"], "ack_cancel",
        "the worker acknowledged: {last}"
    );
}

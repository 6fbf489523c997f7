//! `--demo` is scoped to the caller's tenant and bounded: one tenant can
//! neither cut another's connections, nor read its counters, nor grow the
//! server without limit by starting workloads.

mod common;

use std::time::Duration;

use common::*;
use taskwire_server::client::{self, Reply};
use taskwire_server::demo::limits::{START_BURST, TENANT_RUNNING};

/// A long-poll held by `token` on a quiet task of its own.
fn hold(h: &Harness, token: &str, task: &str) -> tokio::task::JoinHandle<std::io::Result<Reply>> {
    let addr = h.addr.clone();
    let path = format!("/v1/tasks/{task}/resume?cursor=0&waitMs=20000");
    let auth = format!("Bearer {token}");
    tokio::spawn(async move {
        client::request(&addr, "GET", &path, &[("authorization", auth.as_str())], "").await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_connections_cuts_only_the_callers_held_requests() {
    let h = harness(|c| c.demo = true).await;
    let mine = h.create_default().await;
    let theirs = h
        .create(
            "other",
            serde_json::json!({"ttlMs": 3_600_000, "maxAttempts": 3}),
        )
        .await;
    let a = hold(&h, "demo", &mine);
    let b = hold(&h, "other", &theirs);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Tenant B drops: only B's held request is cut.
    let dropped = h.post("other", "/v1/demo/drop-connections", &[], "").await;
    assert_eq!(dropped.status, 200);
    let b = tokio::time::timeout(Duration::from_secs(5), b)
        .await
        .unwrap()
        .unwrap();
    assert!(b.is_err(), "B's own long-poll is cut");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!a.is_finished(), "A's long-poll must survive B's drop");
    assert_eq!(dropped.json()["heldRequests"], 1, "{:?}", dropped.json());
    let stats = h.get("demo", "/v1/demo/stats").await.json();
    assert_eq!(stats["heldRequests"], 1, "{stats}");
    // A's held request still answers normally when its task changes.
    h.ok_callback(&mine, "c1", start_ev(10)).await;
    let a = tokio::time::timeout(Duration::from_secs(5), a)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["task"]["version"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_are_the_callers_own() {
    let h = harness(|c| c.demo = true).await;
    let r = h
        .post(
            "demo",
            "/v1/demo/workloads/summary",
            &[],
            r#"{"speed": 50, "approval": false}"#,
        )
        .await;
    assert_eq!(r.status, 201);
    // The seed's summary plan is 23.1 s of demo time: 0.5 s at speed 50;
    // the redelivered success follows the worker library's backoff.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let mine = h.get("demo", "/v1/demo/stats").await.json();
    // Three progress reports, the success, and both redelivered; and a
    // heartbeat if a step came late.
    let heartbeats = mine["byReason"]["heartbeat"].as_u64().unwrap();
    assert_eq!(
        mine["callbacks"].as_u64().unwrap() - heartbeats,
        6,
        "{mine}"
    );
    assert_eq!(mine["deduplicated"], 2, "{mine}");
    let theirs = h.get("other", "/v1/demo/stats").await.json();
    assert_eq!(theirs["callbacks"], 0, "{theirs}");
    assert_eq!(theirs["deduplicated"], 0, "{theirs}");
    assert!(theirs.get("rejectedSignatures").is_none(), "{theirs}");
    assert!(theirs.get("expiredBySweeper").is_none(), "{theirs}");
    assert_eq!(theirs["retention"], 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_starts_are_rate_limited_per_tenant() {
    let h = harness(|c| c.demo = true).await;
    let slow = r#"{"speed": 0.1}"#;
    // A speed below the minimum is refused, naming the field.
    let crawl = h
        .post("demo", "/v1/demo/workloads/long", &[], r#"{"speed": 0.01}"#)
        .await;
    assert_error(&crawl, 400, "invalid-request", "body.speed");
    let mut answers = Vec::new();
    for _ in 0..200 {
        answers.push(h.post("demo", "/v1/demo/workloads/long", &[], slow).await);
    }
    let started = answers.iter().filter(|r| r.status == 201).count();
    // The burst, plus what refilled while the loop ran.
    assert!(
        started >= START_BURST as usize && started <= TENANT_RUNNING,
        "{started} started"
    );
    let refused = answers.iter().find(|r| r.status == 429).expect("refusals");
    assert_error(refused, 429, "demo-rate-limited", "tenant");
    let retry: u32 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=5).contains(&retry), "Retry-After {retry}");
    // Another tenant is not limited by this one's starts.
    let other = h.post("other", "/v1/demo/workloads/long", &[], slow).await;
    assert_eq!(other.status, 201, "{:?}", other.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_demo_tasks_are_capped_per_tenant() {
    let h = harness(|c| c.demo = true).await;
    let slow = r#"{"speed": 0.1, "items": 3}"#;
    let mut running = 0;
    // A batch of three items is three workers; slow ones stay running for the whole test.
    // Spaced out so the start rate is not what refuses them.
    while running + 3 <= TENANT_RUNNING {
        let r = h.post("demo", "/v1/demo/workloads/batch", &[], slow).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        running += 3;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let full = h.post("demo", "/v1/demo/workloads/batch", &[], slow).await;
    assert_error(&full, 429, "demo-too-many-workloads", "tenant");
    // The soonest of them (the invalid-input plan, 1.7 s of demo time at
    // speed 0.1) ends in about 17 s.
    let retry: u32 = full.header("retry-after").unwrap().parse().unwrap();
    assert!((15..=26).contains(&retry), "Retry-After {retry}");
    let stats = h.get("demo", "/v1/demo/stats").await.json();
    assert_eq!(stats["workloads"]["running"], TENANT_RUNNING, "{stats}");
    // The refused request took no place.
    assert_eq!(h.state().demo.running("demo"), TENANT_RUNNING);
    // Another tenant still has its own room.
    let other = h.post("other", "/v1/demo/workloads/batch", &[], slow).await;
    assert_eq!(other.status, 201);
}

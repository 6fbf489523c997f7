//! The work queue (PROTOCOL.md §Workers) over real HTTP: claims on a real
//! SQLite file, and on one PostgreSQL database behind two instances
//! (those tests skip without PostgreSQL binaries, unless
//! TASKWIRE_PG_REQUIRED is set).

mod common;

use std::collections::HashSet;

use common::*;
use serde_json::{json, Value};

static CLAIMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A claim signed with the development secret (every tenant of the test
/// server shares it), for `tenant` (none: the shared fleet).
async fn claim_at(
    h: &Harness,
    tenant: Option<&str>,
    body: Value,
) -> taskwire_server::client::Reply {
    let n = CLAIMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("clm_{}_{n}", std::process::id());
    let body = body.to_string();
    let signed = secret().headers(&id, now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    if let Some(t) = tenant {
        headers.push(("taskwire-tenant", t));
    }
    h.req("POST", "/v1/work/claim", &headers, body).await
}

async fn claim_ids(h: &Harness, body: Value) -> Vec<String> {
    let r = claim_at(h, Some("demo"), body).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

async fn create_kind(h: &Harness, token: &str, kind: &str) -> String {
    h.create(
        token,
        json!({"ttlMs": 3_600_000, "maxAttempts": 2, "kind": kind}),
    )
    .await
}

#[tokio::test]
async fn a_claim_opens_the_next_attempt_of_the_oldest_queued_tasks_of_its_kinds() {
    let h = harness(|_| {}).await;
    let first = create_kind(&h, "demo", "summary").await;
    let other = create_kind(&h, "demo", "translate").await;
    let second = create_kind(&h, "demo", "summary").await;
    let r = claim_at(
        &h,
        Some("demo"),
        json!({"worker": "w1", "kinds": ["summary"], "max": 5}),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let answer = r.json();
    let tasks = answer["tasks"].as_array().unwrap();
    let ids: Vec<&str> = tasks.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [first.as_str(), second.as_str()],
        "oldest first, its kinds only"
    );
    let t = &tasks[0];
    assert_eq!(
        (t["state"].as_str(), t["attempts"].as_u64()),
        (Some("running"), Some(1))
    );
    assert_eq!(t["kind"], "summary");
    assert_eq!(t["lease"]["attempt"], 1);
    assert_eq!(t["lease"]["leaseMs"], 30_000);
    let now = answer["nowMs"].as_f64().unwrap();
    let expires = t["lease"]["expiresAtMs"].as_f64().unwrap();
    assert!(
        (expires - now - 30_000.0).abs() < 5_000.0,
        "the lease runs on the server's clock"
    );
    // Every follower sees the start, recorded with the worker's name.
    let (_, resume) = h.resume("demo", &first, "cursor=0").await;
    let start = serde_json::to_value(resume.events()).unwrap();
    assert_eq!(start[0]["event"]["type"], "start");
    assert_eq!(start[0]["event"]["worker"], "w1");
    assert_eq!(start[0]["event"]["attempt"], 1);
    // Running now: the next claim takes only the other kind.
    let again = claim_ids(
        &h,
        json!({"worker": "w2", "kinds": ["summary", "translate"], "max": 5}),
    )
    .await;
    assert_eq!(again, [other]);
}

#[tokio::test]
async fn a_held_claim_is_answered_when_work_arrives_and_empty_when_none_does() {
    let h = harness(|_| {}).await;
    let empty = claim_ids(&h, json!({"worker": "w", "kinds": ["k"], "waitMs": 300})).await;
    assert!(empty.is_empty());
    let held = claim_ids(&h, json!({"worker": "w", "kinds": ["k"], "waitMs": 20_000}));
    let create = async {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        create_kind(&h, "demo", "k").await
    };
    let (claimed, created) = tokio::join!(held, create);
    assert_eq!(claimed, [created]);
}

#[tokio::test]
async fn a_claim_is_signed_by_its_tenant_used_once_and_validated_field_by_field() {
    let h = harness(|_| {}).await;
    // Another secret: refused before the body is judged.
    let body = json!({"worker": "w", "kinds": ["k"]}).to_string();
    let wrong = taskwire_server::signature::Secret::random().unwrap();
    let signed = wrong.headers("clm_x", now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("taskwire-tenant", "demo"));
    let r = h
        .req("POST", "/v1/work/claim", &headers, body.clone())
        .await;
    assert_error(&r, 401, "unauthorized", "webhook-signature");
    // A tenant nobody configured.
    let r = claim_at(&h, Some("nobody"), json!({"worker": "w", "kinds": ["k"]})).await;
    assert_error(&r, 401, "unauthorized", "webhook-signature");
    // The same signed bytes twice: the second claims nothing.
    let signed = secret().headers("clm_once", now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("taskwire-tenant", "demo"));
    let first = h
        .req("POST", "/v1/work/claim", &headers, body.clone())
        .await;
    assert_eq!(first.status, 200);
    let again = h.req("POST", "/v1/work/claim", &headers, body).await;
    assert_error(&again, 409, "claim-replayed", "webhook-id");
    for (bad, field) in [
        (json!({"kinds": ["k"]}), "claim.worker"),
        (json!({"worker": "w", "kinds": []}), "claim.kinds"),
        (
            json!({"worker": "w", "kinds": ["k"], "max": 101}),
            "claim.max",
        ),
        (
            json!({"worker": "w", "kinds": ["k"], "waitMs": 30_001}),
            "claim.waitMs",
        ),
        (
            json!({"worker": "w", "kinds": ["k"], "leaseMs": 10}),
            "claim.leaseMs",
        ),
    ] {
        let r = claim_at(&h, Some("demo"), bad).await;
        assert_error(&r, 400, "invalid-request", field);
    }
}

#[tokio::test]
async fn the_shared_fleet_takes_every_tenants_first_task_before_anyones_second() {
    let h = harness(|_| {}).await;
    let a1 = create_kind(&h, "demo", "k").await;
    let a2 = create_kind(&h, "demo", "k").await;
    let b1 = create_kind(&h, "other", "k").await;
    let r = claim_at(&h, None, json!({"worker": "w", "kinds": ["k"], "max": 2})).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let ids: HashSet<String> = r.json()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids,
        HashSet::from([a1, b1]),
        "not both of demo's before other's first"
    );
    let _ = a2;
}

#[tokio::test]
async fn a_kinds_running_limit_is_never_exceeded_and_work_waits_in_the_queue() {
    let h = harness(|c| c.kind_limit = vec![("vendor".into(), max_running(2))]).await;
    for _ in 0..5 {
        create_kind(&h, "demo", "vendor").await;
    }
    let first = claim_ids(&h, json!({"worker": "w", "kinds": ["vendor"], "max": 5})).await;
    assert_eq!(first.len(), 2);
    assert!(
        claim_ids(&h, json!({"worker": "w", "kinds": ["vendor"], "max": 5}))
            .await
            .is_empty()
    );
    // One ends: one more may start.
    h.ok_callback(&first[0], "ok", json!({"type": "succeed", "atMs": now_ms(), "resultRef": "r", "resultHash": "h", "attempt": 1}))
        .await;
    let next = claim_ids(&h, json!({"worker": "w", "kinds": ["vendor"], "max": 5})).await;
    assert_eq!(next.len(), 1);
}

fn max_running(n: u64) -> taskwire_server::store::KindLimit {
    taskwire_server::store::KindLimit {
        max_running: Some(n),
        per_second: None,
    }
}

fn now_ms() -> f64 {
    now_secs() as f64 * 1000.0
}

#[tokio::test]
async fn answers_say_what_the_worker_does_next_and_far_clocks_are_refused() {
    let h = harness(|_| {}).await;
    let id = create_kind(&h, "demo", "k").await;
    let beat = |attempt: u64, at: f64| json!({"type": "heartbeat", "atMs": at, "attempt": attempt});
    let early = h.ok_callback(&id, "early", beat(1, now_ms())).await;
    assert_eq!(
        (early["reason"].as_str(), early["next"].as_str()),
        (Some("not-started"), Some("stop"))
    );
    claim_ids(&h, json!({"worker": "w", "kinds": ["k"]})).await;
    let ok = h.ok_callback(&id, "b1", beat(1, now_ms())).await;
    assert_eq!(
        (ok["next"].as_str(), ok["attempt"].as_u64()),
        (Some("continue"), Some(1))
    );
    let stale = h.ok_callback(&id, "b2", beat(2, now_ms())).await;
    assert_eq!(
        (stale["reason"].as_str(), stale["next"].as_str()),
        (Some("stale-attempt"), Some("stop"))
    );
    assert_eq!(stale["attempt"], 1, "the current attempt");
    // Ten minutes ahead: refused, naming atMs; nothing changes.
    let r = h
        .callback(&id, "skew", &beat(1, now_ms() + 600_000.0))
        .await;
    assert_error(&r, 400, "clock-skew", "atMs");
    let cancel = h
        .post("demo", &format!("/v1/tasks/{id}/cancel"), &[], "{}")
        .await;
    assert_eq!(cancel.status, 200);
    let told = h.ok_callback(&id, "b3", beat(1, now_ms())).await;
    assert_eq!(told["next"], "cancel");
}

#[tokio::test]
async fn queued_work_survives_a_restart_and_shows_in_metrics() {
    let mut h = harness(|c| c.metrics_listen = Some("127.0.0.1:0".into())).await;
    let id = create_kind(&h, "demo", "k").await;
    let metrics = scrape::scrape(&h.metrics_addr()).await;
    assert_eq!(metrics.get("taskwire_work_queued_tasks{kind=\"k\"}"), 1.0);
    h.restart().await;
    assert_eq!(
        claim_ids(&h, json!({"worker": "w", "kinds": ["k"]})).await,
        [id]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_on_two_postgres_instances_claim_each_task_exactly_once() {
    let Some(url) = pg::database().await else {
        return;
    };
    let a = harness(|c| c.data = url.clone().into()).await;
    let b = harness(|c| c.data = url.clone().into()).await;
    const TASKS: usize = 2_000;
    for chunk in 0..(TASKS / 500) {
        let items: Vec<Value> = (0..500)
            .map(|_| json!({"ttlMs": 3_600_000, "maxAttempts": 1, "kind": "k"}))
            .collect();
        let r = a
            .post(
                "demo",
                "/v1/batches",
                &[],
                &json!({"items": items}).to_string(),
            )
            .await;
        assert_eq!(r.status, 201, "batch {chunk}: {:?}", r.json());
    }
    let all =
        futures_util::future::join_all((0..8).map(|n| drain(if n % 2 == 0 { &a } else { &b }, n)))
            .await;
    let total: usize = all.iter().map(Vec::len).sum();
    let unique: HashSet<&String> = all.iter().flatten().collect();
    assert_eq!(unique.len(), TASKS, "every task claimed");
    assert_eq!(total, TASKS, "none claimed twice");
}

/// One worker: claims until the queue is empty (a held claim that
/// found nothing for half a second); the ids it got.
async fn drain(h: &Harness, n: usize) -> Vec<String> {
    let mut mine = Vec::new();
    loop {
        let body = json!({"worker": format!("w{n}"), "kinds": ["k"], "max": 25, "waitMs": 500});
        let ids = claim_ids(h, body).await;
        if ids.is_empty() {
            return mine;
        }
        mine.extend(ids);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kinds_running_limit_holds_across_two_postgres_instances() {
    let Some(url) = pg::database().await else {
        return;
    };
    let limited = |c: &mut taskwire_server::Config| {
        c.data = url.clone().into();
        c.kind_limit = vec![("vendor".into(), max_running(3))];
    };
    let a = harness(limited).await;
    let b = harness(limited).await;
    for _ in 0..12 {
        create_kind(&a, "demo", "vendor").await;
    }
    // Six claims at once, three on each instance, each asking for five.
    let body = || json!({"worker": "w", "kinds": ["vendor"], "max": 5});
    let claims = (0..6).map(|n| claim_ids(if n % 2 == 0 { &a } else { &b }, body()));
    let taken: Vec<String> = futures_util::future::join_all(claims)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(taken.len(), 3, "exactly the limit, never more: {taken:?}");
    // One ends, on the other instance: one more may start, on either.
    let done = json!({"type": "succeed", "atMs": now_ms(), "resultRef": "r", "resultHash": "h", "attempt": 1});
    let r = b.callback(&taken[0], "ok", &done).await;
    assert_eq!(r.status, 200);
    let claims = (0..4).map(|n| claim_ids(if n % 2 == 0 { &a } else { &b }, body()));
    let more: usize = futures_util::future::join_all(claims)
        .await
        .iter()
        .map(Vec::len)
        .sum();
    assert_eq!(more, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_that_share_a_postgres_group_commit_take_different_tasks() {
    let Some(url) = pg::database().await else {
        return;
    };
    let h = harness(|c| c.data = url.clone().into()).await;
    let items: Vec<Value> = (0..64)
        .map(|_| json!({"ttlMs": 3_600_000, "maxAttempts": 1, "kind": "k"}))
        .collect();
    let r = h
        .post(
            "demo",
            "/v1/batches",
            &[],
            &json!({"items": items}).to_string(),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    // Rounds of 16 claims at once, none held: the writer batches many of
    // them into one transaction, whose writes reach the table only at its
    // commit. Each must still find a task of its own while the queue is full.
    for round in 0..4 {
        let claims =
            (0..16).map(|n| claim_ids(&h, json!({"worker": format!("w{n}"), "kinds": ["k"]})));
        let got = futures_util::future::join_all(claims).await;
        let empty = got.iter().filter(|ids| ids.is_empty()).count();
        assert_eq!(
            empty, 0,
            "round {round}: {empty} of 16 claims came back empty with tasks queued"
        );
        let unique: HashSet<&String> = got.iter().flatten().collect();
        assert_eq!(unique.len(), 16, "round {round}: a task claimed twice");
    }
}

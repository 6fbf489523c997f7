//! `--demo`'s workers (the `taskwire-worker` library, claiming over real
//! HTTP) through the whole lifecycle: the summary holds its draft for
//! approval (changes requested, a decision on the replaced draft refused,
//! approved, rejected), the long job cannot stop past its point of no
//! return, and a killed worker's task goes `unknown`, is re-queued, and
//! another worker takes it over from its progress.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// A demo server whose resume window holds a whole task's history (the
/// tests read it from cursor 0).
async fn demo() -> Harness {
    harness(|c| {
        c.demo = true;
        c.retention = 64;
    })
    .await
}

async fn start(h: &Harness, workload: &str, speed: f64) -> String {
    let body = json!({ "speed": speed }).to_string();
    let r = h
        .post(
            "demo",
            &format!("/v1/demo/workloads/{workload}"),
            &[],
            &body,
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    r.json()["taskIds"][0].as_str().unwrap().to_string()
}

async fn task(h: &Harness, id: &str) -> Value {
    h.get("demo", &format!("/v1/tasks/{id}")).await.json()
}

/// Polls the task until `done` holds (within 20 s).
async fn until(h: &Harness, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = task(h, id).await;
        if done(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "{id} never {what}: {t}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn decide(h: &Harness, id: &str, decision: &str, hash: &Value, version: &Value) -> Value {
    let body = json!({"decision": decision, "artifactHash": hash, "version": version});
    let r = h
        .post(
            "demo",
            &format!("/v1/tasks/{id}/decisions"),
            &[],
            &body.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()
}

/// The event types of the task's history, in order.
async fn history(h: &Harness, id: &str) -> Vec<String> {
    let (_, answer) = h.resume("demo", id, "cursor=0").await;
    answer
        .events()
        .iter()
        .map(|e| {
            serde_json::to_value(&e.event).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn note_kinds(stats: &Value, id: &str) -> Vec<String> {
    stats["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["taskId"] == id)
        .map(|n| n["kind"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_waits_for_approval_and_refuses_a_decision_on_a_replaced_draft() {
    let h = demo().await;
    let id = start(&h, "summary", 20.0).await;
    let first = until(&h, &id, "held its draft", |t| {
        t["state"] == "waiting_approval"
    })
    .await;
    assert_eq!(first["version"], 5, "{first}");
    assert_eq!(first["artifactRef"], "blob://drafts/doc-1/v1");
    assert!(first["question"].as_str().unwrap().contains("draft 1"));
    // Waiting is not approval: nothing moves while no one decides.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(task(&h, &id).await["version"], 5);

    let asked = decide(
        &h,
        &id,
        "request_changes",
        &first["artifactHash"],
        &first["version"],
    )
    .await;
    assert_eq!(asked["reason"], "changes-requested", "{asked}");
    let second = until(&h, &id, "held draft 2", |t| {
        t["state"] == "waiting_approval" && t["artifactRef"] == "blob://drafts/doc-1/v2"
    })
    .await;
    assert_ne!(second["artifactHash"], first["artifactHash"]);
    assert_eq!(
        second["attempts"], 2,
        "the revision is a new attempt: {second}"
    );

    // A page still showing draft 1 approves it: refused, nothing changes.
    let stale = decide(
        &h,
        &id,
        "approve",
        &first["artifactHash"],
        &second["version"],
    )
    .await;
    assert_eq!(
        (stale["changed"].clone(), stale["reason"].clone()),
        (json!(false), json!("stale-decision"))
    );
    assert_eq!(task(&h, &id).await["version"], second["version"]);

    let approved = decide(
        &h,
        &id,
        "approve",
        &second["artifactHash"],
        &second["version"],
    )
    .await;
    assert_eq!(approved["reason"], "approved", "{approved}");
    let done = until(&h, &id, "published", |t| t["state"] == "succeeded").await;
    assert_eq!(done["resultHash"], "sha256:ab12");
    assert_eq!(done["attempts"], 3);
    assert_eq!(
        history(&h, &id).await,
        [
            "start", "progress", "progress", "progress", "hold", "decide", "start", "progress",
            "hold", "decide", "start", "succeed"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_or_cancelled_draft_is_not_claimed_again_and_frees_its_place() {
    let h = demo().await;
    let rejected = start(&h, "summary", 40.0).await;
    let cancelled = start(&h, "summary", 40.0).await;
    for id in [&rejected, &cancelled] {
        until(&h, id, "held its draft", |t| {
            t["state"] == "waiting_approval"
        })
        .await;
    }
    let held = task(&h, &rejected).await;
    let r = decide(
        &h,
        &rejected,
        "reject",
        &held["artifactHash"],
        &held["version"],
    )
    .await;
    assert_eq!(r["task"]["state"], "failed", "{r}");
    let c = h
        .post("demo", &format!("/v1/tasks/{cancelled}/cancel"), &[], "")
        .await;
    assert_eq!(
        c.json()["task"]["state"],
        "cancelled",
        "at once: {:?}",
        c.json()
    );
    // No worker claims it again (no start of a next attempt).
    tokio::time::sleep(Duration::from_millis(800)).await;
    for id in [&rejected, &cancelled] {
        assert_eq!(
            history(&h, id).await.last().unwrap(),
            if id == &rejected { "decide" } else { "cancel" }
        );
    }
    let stats = h.get("demo", "/v1/demo/stats").await.json();
    assert_eq!(
        stats["workloads"]["running"], 0,
        "both slots given back: {stats}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_point_of_no_return_the_long_job_cannot_cancel_and_ends_cancelled() {
    let h = demo().await;
    let id = start(&h, "long", 4.0).await;
    until(&h, &id, "passed 60 %", |t| {
        t["progress"].as_u64() > Some(62)
    })
    .await;
    let c = h
        .post("demo", &format!("/v1/tasks/{id}/cancel"), &[], "")
        .await;
    assert_eq!(c.json()["task"]["state"], "cancelling", "{:?}", c.json());
    let ineffective = until(&h, &id, "said it cannot stop", |t| {
        t["state"] == "cancel_ineffective"
    })
    .await;
    assert!(ineffective["progress"].as_u64() > Some(60));
    let done = until(&h, &id, "ended", |t| t["state"] == "cancelled").await;
    assert_eq!(
        done["resultHash"], "sha256:9a7b",
        "the result is kept for compensation: {done}"
    );
    let events = history(&h, &id).await;
    assert!(events.contains(&"cannot_cancel".to_string()), "{events:?}");
    assert!(!events.contains(&"ack_cancel".to_string()), "{events:?}");
    let stats = h.get("demo", "/v1/demo/stats").await.json();
    assert!(
        note_kinds(&stats, &id).contains(&"cannot-cancel".to_string()),
        "{stats}"
    );
    assert_eq!(stats["byReason"]["succeeded-after-cancel"], 1, "{stats}");
}

/// The `worker` of every `start` in the task's history, in order.
async fn starters(h: &Harness, id: &str) -> Vec<String> {
    let (_, answer) = h.resume("demo", id, "cursor=0").await;
    answer
        .events()
        .iter()
        .map(|e| serde_json::to_value(&e.event).unwrap())
        .filter(|e| e["type"] == "start")
        .map(|e| e["worker"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_goes_silent_and_another_takes_its_task_over_from_its_progress() {
    let h = demo().await;
    let id = start(&h, "long", 4.0).await;
    until(&h, &id, "reported progress", |t| {
        t["progress"].as_u64() >= Some(10)
    })
    .await;
    let kill = format!("/v1/demo/tasks/{id}/kill-worker");
    assert_error(
        &h.post("other", &kill, &[], "").await,
        404,
        "not-found",
        "path.id",
    );
    let killed = h.post("demo", &kill, &[], "").await;
    assert_eq!(killed.status, 200, "{:?}", killed.json());
    let dead = killed.json()["worker"].as_str().unwrap().to_string();
    assert_eq!(killed.json()["attempt"], 1);
    assert_eq!(
        starters(&h, &id).await,
        std::slice::from_ref(&dead),
        "the killed worker held it"
    );
    assert_error(
        &h.post("demo", &kill, &[], "").await,
        409,
        "no-worker",
        "path.id",
    );

    // Its heartbeats died with it: the lease lapses.
    let unknown = until(&h, &id, "went unknown", |t| t["state"] == "unknown").await;
    let frozen = unknown["progress"].as_u64().unwrap();
    assert!((10..100).contains(&frozen), "{unknown}");
    until(&h, &id, "was re-queued and claimed", |t| {
        t["attempts"] == 2 && t["state"] == "running"
    })
    .await;
    let done = until(&h, &id, "finished", |t| t["state"] == "succeeded").await;
    assert_eq!(done["resultHash"], "sha256:9a7b", "{done}");

    let events = history(&h, &id).await;
    let at = |ty: &str| {
        events
            .iter()
            .position(|e| e == ty)
            .unwrap_or_else(|| panic!("no {ty}: {events:?}"))
    };
    assert!(at("lapse") < at("abandon"), "{events:?}");
    let starts = starters(&h, &id).await;
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_ne!(starts[1], dead, "another worker took it over: {starts:?}");
    // It went on from the checkpoint: no step reported twice, none after
    // the first attempt's last below it.
    let (_, answer) = h.resume("demo", &id, "cursor=0").await;
    let percents: Vec<u64> = answer
        .events()
        .iter()
        .map(|e| serde_json::to_value(&e.event).unwrap())
        .filter(|e| e["type"] == "progress")
        .map(|e| e["progress"].as_u64().unwrap())
        .collect();
    assert!(percents.windows(2).all(|w| w[0] < w[1]), "{percents:?}");
    assert_eq!(percents.last(), Some(&80));

    let stats = h.get("demo", "/v1/demo/stats").await.json();
    let kinds = note_kinds(&stats, &id);
    for kind in ["killed", "replaced"] {
        assert!(kinds.contains(&kind.to_string()), "no {kind} note: {stats}");
    }
    let replaced = stats["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "replaced" && n["taskId"] == id.as_str())
        .unwrap();
    assert!(
        replaced["text"]
            .as_str()
            .unwrap()
            .contains(&format!("from the killed {dead}")),
        "{replaced}"
    );
}

//! The demo's moderation batch (`POST /v1/demo/workloads/batch`): 500
//! items created as one batch, played by the worker pool, and followed to
//! the end over one long-poll at a time by the batch cursor.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_of_500_ends_with_every_state_the_plans_say() {
    let h = harness(|c| c.demo = true).await;
    let r = h
        .post("demo", "/v1/demo/workloads/batch", &[], r#"{"speed": 100}"#)
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let body = r.json();
    let batch = body["batchId"].as_str().unwrap().to_string();
    assert_eq!(body["taskIds"].as_array().unwrap().len(), 500);
    // Follow it as a client does: one held request at a time, each from
    // the cursor the last answer gave, merging the tasks it names.
    let mut cursor = 0u64;
    let mut tasks: HashMap<String, Value> = HashMap::new();
    let mut requests = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "the batch did not end: {cursor}");
        let path = format!("/v1/batches/{batch}/resume?cursor={cursor}&waitMs=5000");
        let a = h.get("demo", &path).await.json();
        requests += 1;
        for t in a["tasks"].as_array().unwrap() {
            let id = t["task"]["id"].as_str().unwrap().to_string();
            if let Some(old) = tasks.get(&id) {
                assert!(
                    t["task"]["version"].as_u64() > old["version"].as_u64(),
                    "{t}"
                );
            }
            tasks.insert(id, t["task"].clone());
        }
        cursor = a["cursor"].as_u64().unwrap();
        if a["open"] == 0 {
            break;
        }
    }
    assert_eq!(tasks.len(), 500);
    let mut states: HashMap<String, usize> = HashMap::new();
    for t in tasks.values() {
        *states
            .entry(t["state"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    // Item 2 is the seed's invalid input; the refused ones are items
    // i % 40 == 13 (not also retried, i % 25 == 7); item 3 expires.
    let refused = (3..500).filter(|i| i % 40 == 13 && i % 25 != 7).count();
    assert_eq!(states.get("failed"), Some(&(1 + refused)), "{states:?}");
    assert_eq!(states.get("expired"), Some(&1), "{states:?}");
    assert_eq!(
        states.get("succeeded"),
        Some(&(500 - 2 - refused)),
        "{states:?}"
    );
    // The client's view is the server's, task by task.
    let end = h
        .get("demo", &format!("/v1/batches/{batch}/resume?cursor=0"))
        .await
        .json();
    for t in end["tasks"].as_array().unwrap() {
        assert_eq!(&tasks[t["task"]["id"].as_str().unwrap()], &t["task"]);
    }
    // Far fewer requests than changes: each answer carries many tasks.
    assert!(requests < 500, "{requests} requests");
    let bad = h
        .post(
            "demo",
            "/v1/demo/workloads/batch",
            &[],
            &json!({"items": 501}).to_string(),
        )
        .await;
    assert_error(&bad, 400, "invalid-request", "body.items");
}

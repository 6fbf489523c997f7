//! The batch scenarios (PROTOCOL.md §Batches) over real HTTP, shared by
//! the SQLite and PostgreSQL tests (`batches.rs`, `postgres_batches.rs`):
//! the create (shape, errors naming the item, whole or nothing,
//! idempotency), the batch cursor (snapshot, caught-up, per-task deltas),
//! the long-poll woken by one item's commit, the stream, and browser
//! tokens. Each takes a harness (the test config, with the tweak named
//! in its doc where it needs one; `cursor_scenario` needs the default
//! retention, 8).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use taskwire_server::client;
use taskwire_server::Config;

use super::common::*;
use super::tokens::*;

/// The config [`bad_batches_scenario`] needs: 4 open tasks per tenant.
pub fn four_open_tasks(c: &mut Config) {
    c.quotas.max_open_tasks = Some(4);
}

/// The config [`batch_token_scenario`] needs: the browser-token keys.
pub fn browser_keys(c: &mut Config) {
    c.browser_tokens.keys = key_flags();
}

/// `n` create bodies, as `POST /v1/batches` takes them.
pub fn items(n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"ttlMs": 3_600_000, "maxAttempts": 2, "kind": "moderation", "input": {"item": i}}))
        .collect();
    json!({ "items": items })
}

/// Creates a batch of `n` for tenant `demo`: its id and its task ids.
pub async fn batch(h: &Harness, n: usize) -> (String, Vec<String>) {
    let r = h
        .post("demo", "/v1/batches", &[], &items(n).to_string())
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let body = r.json();
    let ids = body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    (body["batchId"].as_str().unwrap().to_string(), ids)
}

/// `GET /v1/batches/{batch}/resume?{query}` for `demo`; must be 200.
pub async fn follow(h: &Harness, batch: &str, query: &str) -> Value {
    let r = h
        .get("demo", &format!("/v1/batches/{batch}/resume?{query}"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    r.json()
}

/// The task ids of a batch answer, in order.
pub fn ids_of(answer: &Value) -> Vec<String> {
    answer["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"]["id"].as_str().unwrap().to_string())
        .collect()
}

pub async fn created_whole_scenario(h: &Harness) {
    let r = h
        .post("demo", "/v1/batches", &[], &items(3).to_string())
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let body = r.json();
    let batch = body["batchId"].as_str().unwrap();
    assert!(batch.starts_with("bat_"), "{batch}");
    assert_eq!(body["size"], 3);
    assert_eq!(body["cursor"], 1);
    assert_eq!(body["open"], 3);
    assert!(body["epoch"].is_string());
    let tasks = body["tasks"].as_array().unwrap();
    for (i, t) in tasks.iter().enumerate() {
        assert_eq!(t["input"]["item"], i, "item order");
        assert_eq!(t["batchId"], batch);
        assert_eq!(t["state"], "queued");
        assert_eq!(t["version"], 0);
    }
    // An item is an ordinary task, and says which batch it is in.
    let id = tasks[1]["id"].as_str().unwrap();
    let got = h.get("demo", &format!("/v1/tasks/{id}")).await.json();
    assert_eq!(got["batchId"], batch);
    assert_eq!(got["kind"], "moderation");
    // A single task says nothing of batches.
    let single = h.create_default().await;
    let got = h.get("demo", &format!("/v1/tasks/{single}")).await.json();
    assert!(got.get("batchId").is_none(), "{got}");
}

/// Needs [`four_open_tasks`].
pub async fn bad_batches_scenario(h: &Harness) {
    let mut body = items(3);
    body["items"][1]["ttlMs"] = json!(-5);
    let r = h.post("demo", "/v1/batches", &[], &body.to_string()).await;
    assert_error(&r, 400, "invalid-request", "body.items[1].ttlMs");
    let mut body = items(3);
    body["items"][2]["maxAttempts"] = json!("x");
    let r = h.post("demo", "/v1/batches", &[], &body.to_string()).await;
    assert_error(&r, 400, "invalid-request", "body.items[2]");
    for (bad, field) in [
        (json!({}), "body.items"),
        (json!({"items": {}}), "body.items"),
        (json!({"items": []}), "body.items"),
        (items(1001), "body.items"),
    ] {
        let r = h.post("demo", "/v1/batches", &[], &bad.to_string()).await;
        assert_error(&r, 400, "invalid-request", field);
    }
    let r = h.post("demo", "/v1/batches", &[], "{\"items\": [").await;
    assert_error(&r, 400, "invalid-request", "body");
    // More items than the quota can never fit: 422, not a 429 to wait on.
    let r = h
        .post("demo", "/v1/batches", &[], &items(5).to_string())
        .await;
    assert_error(&r, 422, "batch-over-quota", "body.items");
    // The quota counts every item: with 2 open, 3 more are refused whole,
    // and nothing of them (nor of the bad ones above) holds a slot, so 2
    // then fit.
    batch(h, 2).await;
    let r = h
        .post("demo", "/v1/batches", &[], &items(3).to_string())
        .await;
    assert_error(&r, 429, "open-task-quota", "a batch of 3 items");
    batch(h, 2).await;
    let r = h
        .post("demo", "/v1/batches", &[], &items(1).to_string())
        .await;
    assert_error(&r, 429, "open-task-quota", "already has 4 open tasks");
}

pub async fn idempotent_create_scenario(h: &Harness) {
    let key = [("idempotency-key", "b-1")];
    let body = items(2).to_string();
    let first = h.post("demo", "/v1/batches", &key, &body).await;
    assert_eq!(first.status, 201);
    // Same key, same items (other bytes): the same batch, as it is now.
    let id0 = first.json()["tasks"][0]["id"].as_str().unwrap().to_string();
    h.ok_callback(&id0, "s", start_ev(1)).await;
    let same = body.replace("3600000", "3.6e6");
    let again = h.post("demo", "/v1/batches", &key, &same).await;
    assert_eq!(again.status, 200, "{:?}", again.json());
    assert_eq!(again.json()["batchId"], first.json()["batchId"]);
    assert_eq!(again.json()["tasks"], {
        let mut t = first.json()["tasks"].clone();
        t[0] = h.get("demo", &format!("/v1/tasks/{id0}")).await.json();
        t
    });
    assert_eq!(again.json()["cursor"], 2, "the cursor as it is now");
    // Another body under the key, or the key of a single create: 422.
    let r = h
        .post("demo", "/v1/batches", &key, &items(3).to_string())
        .await;
    assert_error(&r, 422, "idempotency-key-reused", "Idempotency-Key");
    let r = h
        .post(
            "demo",
            "/v1/tasks",
            &key,
            r#"{"ttlMs":3600000,"maxAttempts":2}"#,
        )
        .await;
    assert_error(&r, 422, "idempotency-key-reused", "Idempotency-Key");
    let single = [("idempotency-key", "t-1")];
    let r = h
        .post(
            "demo",
            "/v1/tasks",
            &single,
            r#"{"ttlMs":3600000,"maxAttempts":2}"#,
        )
        .await;
    assert_eq!(r.status, 201);
    let r = h.post("demo", "/v1/batches", &single, &body).await;
    assert_error(&r, 422, "idempotency-key-reused", "Idempotency-Key");
    // Keys are per tenant.
    let r = h.post("other", "/v1/batches", &key, &body).await;
    assert_eq!(r.status, 201);
}

pub async fn cursor_scenario(h: &Harness) {
    let (batch, ids) = batch(h, 4).await;
    let all = follow(h, &batch, "cursor=0").await;
    assert_eq!(all["mode"], "snapshot");
    assert_eq!(all["cursor"], 1);
    assert_eq!(ids_of(&all), ids, "every task, in item order");
    assert!(all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["mode"] == "snapshot"));
    let none = follow(h, &batch, "cursor=1").await;
    assert_eq!(none["mode"], "caught-up");
    assert_eq!(none["tasks"], json!([]));
    // Items 0 and 2 move; 1 and 3 do not.
    h.ok_callback(&ids[2], "s", start_ev(1)).await;
    h.ok_callback(&ids[0], "s", start_ev(2)).await;
    h.ok_callback(&ids[2], "p", progress_ev(3, 40)).await;
    let delta = follow(h, &batch, "cursor=1").await;
    assert_eq!(delta["mode"], "delta");
    assert_eq!(delta["cursor"], 4);
    assert_eq!(delta["open"], 4);
    assert_eq!(ids_of(&delta), vec![ids[0].clone(), ids[2].clone()]);
    let t2 = &delta["tasks"][1];
    assert_eq!(t2["mode"], "delta");
    let versions: Vec<u64> = t2["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, vec![1, 2]);
    assert_eq!(t2["task"]["progress"], 40);
    // From cursor 3 (item 2's start seen), only its progress is new.
    let later = follow(h, &batch, "cursor=3").await;
    assert_eq!(ids_of(&later), vec![ids[2].clone()]);
    assert_eq!(later["tasks"][0]["events"][0]["version"], 2);
    // A cursor the batch never had, or snapshot=1: every task.
    for q in ["cursor=99", "cursor=2&snapshot=1"] {
        let a = follow(h, &batch, q).await;
        assert_eq!(a["mode"], "snapshot", "{q}");
        assert_eq!(ids_of(&a), ids, "{q}");
    }
    // More than the window (8) of one task's entries: that task alone
    // comes as a snapshot.
    for p in 1..=9 {
        h.ok_callback(&ids[0], &format!("p{p}"), progress_ev(10 + p, p * 10))
            .await;
    }
    let a = follow(h, &batch, "cursor=4").await;
    assert_eq!(ids_of(&a), vec![ids[0].clone()]);
    assert_eq!(a["tasks"][0]["mode"], "snapshot");
    assert_eq!(a["tasks"][0]["task"]["progress"], 90);
}

pub async fn held_request_scenario(h: &Harness) {
    let (batch, ids) = batch(h, 3).await;
    let addr = h.addr.clone();
    let path = format!("/v1/batches/{batch}/resume?cursor=1&waitMs=10000");
    let held = tokio::spawn(async move {
        let started = Instant::now();
        let r = client::request(&addr, "GET", &path, &[("authorization", "Bearer demo")], "")
            .await
            .unwrap();
        (r, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "held while nothing changed");
    h.ok_callback(&ids[1], "s", start_ev(1)).await;
    let (r, took) = held.await.unwrap();
    assert!(
        took < Duration::from_secs(5),
        "woken by the commit: {took:?}"
    );
    let a = r.json();
    assert_eq!(a["mode"], "delta");
    assert_eq!(ids_of(&a), vec![ids[1].clone()]);
    // Every item terminal: nothing will change, the answer comes at once.
    for id in &ids {
        h.ok_callback(id, "s", start_ev(1)).await;
        h.ok_callback(id, "ok", succeed_ev(2, "sha256:ab")).await;
    }
    let end = follow(h, &batch, "cursor=0").await;
    assert_eq!(end["open"], 0);
    let cursor = end["cursor"].as_u64().unwrap();
    let started = Instant::now();
    let a = follow(h, &batch, &format!("cursor={cursor}&waitMs=10000")).await;
    assert_eq!(a["mode"], "caught-up");
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// The `data:` of every `event: batch` message in a stream's text.
pub fn messages(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter(|m| m.contains("event: batch"))
        .filter_map(|m| m.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

pub async fn stream_scenario(h: &Harness) {
    let (batch, ids) = batch(h, 2).await;
    let addr = h.addr.clone();
    let path = format!("/v1/batches/{batch}/events");
    let stream = tokio::spawn(async move {
        let headers = [("authorization", "Bearer demo"), ("last-event-id", "1")];
        client::request(&addr, "GET", &path, &headers, "")
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in &ids {
        h.ok_callback(id, "s", start_ev(1)).await;
        h.ok_callback(id, "ok", succeed_ev(2, "sha256:ab")).await;
    }
    let r = tokio::time::timeout(Duration::from_secs(10), stream)
        .await
        .expect("the stream ends")
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let text = String::from_utf8_lossy(&r.body).into_owned();
    let msgs = messages(&text);
    assert!(!msgs.is_empty(), "{text}");
    assert_eq!(msgs[0]["mode"], "caught-up", "the first answers cursor 1");
    let last = msgs.last().unwrap();
    assert_eq!(last["open"], 0, "{text}");
    // Each message's `id:` is its cursor, and every task ends succeeded.
    assert!(text.contains(&format!("id: {}", last["cursor"])));
    let cursor = last["cursor"].as_u64().unwrap();
    let end = follow(h, &batch, "cursor=0").await;
    assert!(end["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["task"]["state"] == "succeeded"));
    // Reconnecting at the end: 204, nothing will follow.
    let last_id = cursor.to_string();
    let headers = [
        ("authorization", "Bearer demo"),
        ("last-event-id", last_id.as_str()),
    ];
    let r = h
        .req("GET", &format!("/v1/batches/{batch}/events"), &headers, "")
        .await;
    assert_eq!(r.status, 204);
}

/// Needs [`browser_keys`].
pub async fn batch_token_scenario(h: &Harness) {
    let (mine, ids) = batch(h, 2).await;
    let (other, _) = batch(h, 1).await;
    let mut claims = claims(&[], &["watch"]);
    claims.as_object_mut().unwrap().remove("tasks");
    claims["batch"] = json!(mine);
    let token = hs256("k1", K1, &claims);
    let r = h
        .get(&token, &format!("/v1/batches/{mine}/resume?cursor=0"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let url = format!("/v1/batches/{mine}/resume?cursor=0&access_token={token}");
    assert_eq!(h.req("GET", &url, &[], "").await.status, 200);
    let r = h
        .get(&token, &format!("/v1/batches/{other}/resume?cursor=0"))
        .await;
    assert_error(&r, 404, "not-found", "batchId");
    // The batch claim covers no single-task route, nor creating.
    let r = h.get(&token, &format!("/v1/tasks/{}", ids[0])).await;
    assert_eq!(r.status, 404);
    let r = h
        .post(&token, "/v1/batches", &[], &items(1).to_string())
        .await;
    assert_error(&r, 403, "tenant-token-required", "");
    // Another tenant's batch is unknown to it.
    let r = h
        .get("other", &format!("/v1/batches/{mine}/resume?cursor=0"))
        .await;
    assert_error(&r, 404, "not-found", "batchId");
    let r = h
        .get("demo", &format!("/v1/batches/{mine}/resume?cursor=-1"))
        .await;
    assert_error(&r, 400, "invalid-request", "cursor");
    let r = h.get("demo", "/v1/batches/bat_nope/resume?cursor=0").await;
    assert_error(&r, 404, "not-found", "batchId");
}

/// An item the sweeper ends (its TTL runs out) moves the batch like any
/// other change: a held request wakes with that item's `expire` entry.
pub async fn expiry_scenario(h: &Harness) {
    let body = r#"{"items":[{"ttlMs":3600000,"maxAttempts":1},{"ttlMs":500,"maxAttempts":1}]}"#;
    let r = h.post("demo", "/v1/batches", &[], body).await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let created = r.json();
    let batch = created["batchId"].as_str().unwrap();
    let expiring = created["tasks"][1]["id"].as_str().unwrap();
    let started = Instant::now();
    let a = follow(h, batch, "cursor=1&waitMs=10000").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the sweep: {:?}",
        started.elapsed()
    );
    assert_eq!(a["mode"], "delta", "{a}");
    assert_eq!(
        (a["cursor"].as_u64(), a["open"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(ids_of(&a), vec![expiring.to_string()]);
    assert_eq!(a["tasks"][0]["events"][0]["event"]["type"], "expire", "{a}");
    assert_eq!(a["tasks"][0]["task"]["state"], "expired");
}

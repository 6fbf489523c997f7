//! The quota scenarios over HTTP, shared by the SQLite and PostgreSQL
//! tests (`quotas.rs`, `postgres_quotas.rs`): each takes a harness whose
//! tenant `demo` has the quota named, and tenant `other` none.
#![allow(dead_code)]

use serde_json::{json, Value};
use taskwire_server::client::Reply;

use super::common::{assert_error, Harness, ReplyJson};

pub const BODY: &str = r#"{"ttlMs":3600000,"maxAttempts":1}"#;

/// `--tenant-quota` for `demo`: 2 open tasks.
pub const OPEN_TASKS_2: &str = "demo:max-open-tasks=2";
/// `--tenant-quota` for `demo`: a burst of 2 creates, then one per 100 s
/// (so no token comes back while a test runs).
pub const RATE_BURST_2: &str = "demo:create-rate=0.01,create-burst=2";

pub async fn create_keyed(h: &Harness, token: &str, key: &str, body: &str) -> Reply {
    h.post(token, "/v1/tasks", &[("idempotency-key", key)], body)
        .await
}

pub async fn create_plain(h: &Harness, token: &str) -> Reply {
    h.post(token, "/v1/tasks", &[], BODY).await
}

pub fn id_of(r: &Reply) -> String {
    r.json()["id"].as_str().unwrap_or_default().to_string()
}

/// Asserts a 429 with `code`, a whole `Retry-After` of at least one
/// second, and a message naming `limit` and the tenant's number.
pub fn assert_quota(r: &Reply, code: &str, limit: &str, number: &str, retry_after: Option<&str>) {
    assert_error(r, 429, code, limit);
    let message = r.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(message.contains(number), "{message:?} names {number}");
    assert!(message.contains("\"demo\""), "{message:?} names the tenant");
    let secs: u64 = r
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .expect("a whole Retry-After");
    assert!(secs >= 1, "Retry-After {secs}");
    if let Some(expected) = retry_after {
        assert_eq!(r.header("retry-after"), Some(expected));
    }
}

/// Ends a queued task: a cancel without a worker cancels it at once.
pub async fn end(h: &Harness, id: &str) {
    let r = h
        .post("demo", &format!("/v1/tasks/{id}/cancel"), &[], "{}")
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["task"]["state"], "cancelled", "{:?}", r.json());
}

/// `demo` at 2 open tasks: the third create is refused and changes
/// nothing (its key stays free), a replay passes, `other` is untouched,
/// and a task that ends frees its slot. Returns the two open tasks' ids.
pub async fn open_task_scenario(h: &Harness) -> Vec<String> {
    let first = create_keyed(h, "demo", "first", BODY).await;
    assert_eq!(first.status, 201, "{:?}", first.json());
    let second = create_plain(h, "demo").await;
    assert_eq!(second.status, 201, "{:?}", second.json());
    let refused = create_keyed(h, "demo", "third", BODY).await;
    assert_quota(
        &refused,
        "open-task-quota",
        "max-open-tasks",
        "2",
        Some("5"),
    );
    assert_quota(
        &create_plain(h, "demo").await,
        "open-task-quota",
        "max-open-tasks",
        "2",
        Some("5"),
    );
    // An idempotent re-create of a task that exists is answered as before.
    let replay = create_keyed(h, "demo", "first", BODY).await;
    assert_eq!(replay.status, 200, "{:?}", replay.json());
    assert_eq!(id_of(&replay), id_of(&first));
    // The same key with another body is still told so, not refused.
    let reused = create_keyed(h, "demo", "first", r#"{"ttlMs":1000,"maxAttempts":1}"#).await;
    assert_error(&reused, 422, "idempotency-key-reused", "Idempotency-Key");
    // Another tenant is not limited by demo's quota.
    for _ in 0..3 {
        assert_eq!(create_plain(h, "other").await.status, 201);
    }
    // A task that ends frees its slot; the refused key was never taken.
    end(h, &id_of(&second)).await;
    let third = create_keyed(h, "demo", "third", BODY).await;
    assert_eq!(third.status, 201, "{:?}", third.json());
    assert_quota(
        &create_plain(h, "demo").await,
        "open-task-quota",
        "max-open-tasks",
        "2",
        None,
    );
    vec![id_of(&first), id_of(&third)]
}

/// `demo` with a burst of 2 and no refill: the third create is refused
/// with the wait for the next token; replays pass and spend nothing;
/// `other` is untouched; the refused key stays free.
pub async fn rate_scenario(h: &Harness) {
    let a = create_keyed(h, "demo", "a", BODY).await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    // Replays while a token is left: answered, and the token kept...
    for _ in 0..3 {
        let replay = create_keyed(h, "demo", "a", BODY).await;
        assert_eq!((replay.status, id_of(&replay)), (200, id_of(&a)));
    }
    // ...for this create.
    let b = create_keyed(h, "demo", "b", BODY).await;
    assert_eq!(b.status, 201, "{:?}", b.json());
    // The bucket is empty: one token per 100 s.
    let refused = create_keyed(h, "demo", "c", BODY).await;
    assert_quota(&refused, "create-rate-limited", "create-rate", "0.01", None);
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!(
        (90..=100).contains(&wait),
        "the next token is ~100 s away: {wait}"
    );
    // Replays are still answered at the limit (read back, no token).
    for key in ["a", "b"] {
        let replay = create_keyed(h, "demo", key, BODY).await;
        assert_eq!(replay.status, 200, "{key}: {:?}", replay.json());
    }
    let reused = create_keyed(h, "demo", "a", r#"{"ttlMs":1000,"maxAttempts":1}"#).await;
    assert_error(&reused, 422, "idempotency-key-reused", "Idempotency-Key");
    // The refused key names no task: a replay of it is refused too (it
    // would be answered 200 had the refusal stored it).
    assert_eq!(create_keyed(h, "demo", "c", BODY).await.status, 429);
    // Another tenant is not limited.
    for _ in 0..5 {
        assert_eq!(create_plain(h, "other").await.status, 201);
    }
}

pub fn create_body(extra: Value) -> String {
    let mut body = json!({"ttlMs": 3_600_000, "maxAttempts": 1});
    for (k, v) in extra.as_object().into_iter().flatten() {
        body[k] = v.clone();
    }
    body.to_string()
}

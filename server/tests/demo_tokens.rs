//! `--demo`'s page holds no tenant token: the demo endpoints act for
//! `--demo-tenant` when called without one, and mint the page short-lived
//! browser tokens for the demo's tasks with the demo's own key.

mod common;

use common::*;
use serde_json::json;

async fn mint(h: &Harness, ids: &[&str]) -> taskwire_server::client::Reply {
    let body = json!({ "taskIds": ids }).to_string();
    h.req(
        "POST",
        "/v1/demo/tokens",
        &[("content-type", "application/json")],
        body,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_starts_workloads_and_watches_with_minted_browser_tokens_only() {
    let h = harness(|c| c.demo = true).await;
    let started = h
        .req(
            "POST",
            "/v1/demo/workloads/summary",
            &[],
            r#"{"speed": 10}"#,
        )
        .await;
    assert_eq!(started.status, 201, "{:?}", started.json());
    let id = started.json()["taskIds"][0].as_str().unwrap().to_string();
    // For tenant `demo` (--demo-tenant's default).
    assert_eq!(h.get("demo", &format!("/v1/tasks/{id}")).await.status, 200);
    let minted = mint(&h, &[&id]).await;
    assert_eq!(minted.status, 200, "{:?}", minted.json());
    let token = minted.json()["token"].as_str().unwrap().to_string();
    let exp = minted.json()["expiresAt"].as_i64().unwrap();
    assert!((now_secs() + 60..=now_secs() + 180).contains(&exp), "{exp}");
    // The token watches its task, and nothing tenant-wide.
    let r = h
        .get(&token, &format!("/v1/tasks/{id}/resume?cursor=0"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let r = h
        .post(
            &token,
            "/v1/tasks",
            &[],
            r#"{"ttlMs":1000,"maxAttempts":1}"#,
        )
        .await;
    assert_error(&r, 403, "tenant-token-required", "Authorization");
    assert_error(
        &h.get(&token, "/v1/notifications").await,
        403,
        "tenant-token-required",
        "Authorization",
    );
    // Nor the demo endpoints as a tenant.
    let r = h.post(&token, "/v1/demo/workloads/summary", &[], "").await;
    assert_error(&r, 403, "tenant-token-required", "Authorization");
    let other = h.create_default().await;
    let r = h.get(&token, &format!("/v1/tasks/{other}")).await;
    assert_error(&r, 404, "not-found", "taskId");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_mints_for_its_own_tasks_only() {
    let h = harness(|c| c.demo = true).await;
    // A task of the demo tenant that the demo did not start (no demo kind),
    // one made through the API with a demo kind (issue 24, N4: it used to
    // be minted every right), one of another tenant, and one that does
    // not exist.
    let plain = h.create_default().await;
    let copied = h
        .create(
            "demo",
            json!({"ttlMs": 60_000, "maxAttempts": 1, "kind": "summary"}),
        )
        .await;
    let theirs = h
        .create(
            "other",
            json!({"ttlMs": 60_000, "maxAttempts": 1, "kind": "summary"}),
        )
        .await;
    for id in [plain.as_str(), copied.as_str(), theirs.as_str(), "tsk_nope"] {
        assert_error(&mint(&h, &[id]).await, 404, "not-found", "taskId");
    }
    // A batch of the demo tenant made through the API is not the demo's.
    let items = json!({"items": [{"ttlMs": 60_000, "maxAttempts": 1, "kind": "moderation"}]});
    let r = h.post("demo", "/v1/batches", &[], &items.to_string()).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let batch = r.json()["batchId"].as_str().unwrap().to_string();
    let r = h
        .req(
            "POST",
            "/v1/demo/tokens",
            &[],
            json!({"batchId": batch}).to_string(),
        )
        .await;
    assert_error(&r, 404, "not-found", "batchId");
    assert_error(&mint(&h, &[]).await, 400, "invalid-request", "body.taskIds");
    let r = h.req("POST", "/v1/demo/tokens", &[], "{}").await;
    assert_error(&r, 400, "invalid-request", "taskIds");
    // Another tenant's backend gets nothing from the demo's key.
    let r = h
        .post(
            "other",
            "/v1/demo/tokens",
            &[],
            &json!({"taskIds": [theirs]}).to_string(),
        )
        .await;
    assert_error(&r, 404, "not-found", "--demo-tenant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_tokens_never_outlive_the_servers_maximum() {
    let h = harness(|c| {
        c.demo = true;
        c.browser_tokens.max_ttl_secs = 30;
    })
    .await;
    let id = h
        .req("POST", "/v1/demo/workloads/long", &[], r#"{"speed": 10}"#)
        .await
        .json()["taskIds"][0]
        .as_str()
        .unwrap()
        .to_string();
    let minted = mint(&h, &[&id]).await;
    let exp = minted.json()["expiresAt"].as_i64().unwrap();
    assert!(exp <= now_secs() + 30, "{exp}");
    let token = minted.json()["token"].as_str().unwrap().to_string();
    assert_eq!(h.get(&token, &format!("/v1/tasks/{id}")).await.status, 200);
}

#[tokio::test]
async fn a_demo_tenant_without_a_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.demo = true;
    config.demo_tenant = "nobody".into();
    let err = taskwire_server::start(config).await.err().expect("refused");
    assert!(err.starts_with("--demo-tenant: "), "{err}");
}

//! Tenant isolation of reads: another tenant's task is filtered out by
//! the query itself, so its row is never parsed (no timing oracle), and
//! the hub never answers one tenant from another tenant's watched slot.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// Breaks a task's stored row in the real SQLite file: whoever parses it
/// gets a 500, so a 404 proves the row was not parsed.
fn corrupt_row(h: &Harness, id: &str) {
    let conn = rusqlite::Connection::open(h.dir.path().join("taskwire.sqlite3")).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    let n = conn
        .execute(
            "UPDATE tasks SET view = '{\"id\": broken' WHERE id = ?1",
            [id],
        )
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_row_is_never_parsed() {
    let h = harness(|_| {}).await;
    let big = "x".repeat(54 * 1024);
    let id = h
        .create(
            "demo",
            json!({"ttlMs": 3_600_000, "maxAttempts": 1, "input": {"blob": big}}),
        )
        .await;
    corrupt_row(&h, &id);
    // The owner reads the row and finds it broken: the corruption is real.
    let own = h.get("demo", &format!("/v1/tasks/{id}")).await;
    assert_error(&own, 500, "internal", "tasks.view");
    // Tenant B's every read of it is the 404 of an unknown id.
    let unknown = h.get("other", "/v1/tasks/no-such-task").await;
    assert_error(&unknown, 404, "not-found", "taskId");
    for path in [
        format!("/v1/tasks/{id}"),
        format!("/v1/tasks/{id}/resume?cursor=0"),
        format!("/v1/tasks/{id}/resume?cursor=0&waitMs=5000"),
        format!("/v1/tasks/{id}/resume?cursor=0&snapshot=1"),
        format!("/v1/tasks/{id}/events"),
    ] {
        let r = h.get("other", &path).await;
        assert_error(&r, 404, "not-found", "taskId");
    }
    let delivery = h
        .post(
            "other",
            &format!("/v1/tasks/{id}/deliveries"),
            &[("idempotency-key", "d1")],
            "",
        )
        .await;
    assert_error(&delivery, 404, "not-found", "taskId");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_slot_never_answers_another_tenant() {
    let h = harness(|_| {}).await;
    let id = h.create_default().await;
    // Tenant A follows the task over SSE, so the hub keeps a slot for it,
    // and a callback fills the slot with the latest view.
    let mut conn = taskwire_server::client::Conn::open(&h.addr).await.unwrap();
    let stream = conn
        .stream(
            "GET",
            &format!("/v1/tasks/{id}/events"),
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    h.ok_callback(&id, "c1", start_ev(10)).await;
    let known = h.state().hub.known_versions([id.as_str()]);
    assert_eq!(
        known,
        vec![(id.as_str(), Some(Some(1)))],
        "A's slot holds v1"
    );
    // Tenant B, asking for the same task at a cursor memory could answer,
    // is refused at once, held or not.
    for query in ["cursor=0", "cursor=0&waitMs=5000", "cursor=1&waitMs=5000"] {
        let t0 = Instant::now();
        let r = h
            .get("other", &format!("/v1/tasks/{id}/resume?{query}"))
            .await;
        assert_error(&r, 404, "not-found", "taskId");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }
    let r = h.get("other", &format!("/v1/tasks/{id}/events")).await;
    assert_error(&r, 404, "not-found", "taskId");
    drop(stream);
}

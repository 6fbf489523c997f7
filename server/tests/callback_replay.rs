//! A signed callback request is used once (PROTOCOL.md §Executor
//! callback, "Secrets and binding"), on SQLite: a request that changed
//! nothing, captured and replayed byte for byte after a `start`, is a
//! duplicate; re-signed with a later timestamp it applies (core fix 1).
//! PostgreSQL, with two instances: postgres_callback_replay.rs.

mod common;

use common::*;
use taskwire_server::signature::callback_body;

#[tokio::test]
async fn a_captured_callback_that_changed_nothing_replayed_after_a_start_changes_nothing() {
    let h = harness(|_| {}).await;
    replay::replay_after_start_is_a_duplicate(&h, &h).await;
}

#[tokio::test]
async fn a_used_request_is_still_a_duplicate_after_a_restart() {
    let mut h = harness(|_| {}).await;
    let task = h.create_default().await;
    let body = callback_body(&task, &fail_ev(20, false));
    let ts = now_secs();
    let first = h.callback_raw(&task, "f", ts, body.as_bytes()).await.json();
    assert_eq!(first["reason"], "not-running");
    h.ok_callback(&task, "s", start_ev(10)).await;
    h.restart().await;
    let replayed = h.callback_raw(&task, "f", ts, body.as_bytes()).await.json();
    assert_eq!(replayed["reason"], "duplicate-callback");
    assert_eq!(replayed["state"], "running");
}

#[tokio::test]
async fn the_same_id_and_second_with_another_body_is_another_request() {
    // An id that changed nothing on a queued task may be used on another
    // task within the same second: the body differs, so it is judged.
    let h = harness(|_| {}).await;
    let queued = h.create_default().await;
    let running = h.create_default().await;
    h.ok_callback(&running, "s", start_ev(10)).await;
    let ts = now_secs();
    let early = callback_body(&queued, &progress_ev(20, 10));
    let r = h
        .callback_raw(&queued, "shared", ts, early.as_bytes())
        .await;
    assert_eq!(r.json()["reason"], "not-running");
    let used = callback_body(&running, &progress_ev(20, 10));
    let r = h
        .callback_raw(&running, "shared", ts, used.as_bytes())
        .await;
    assert_eq!(r.json()["reason"], "progress");
}

#[tokio::test]
async fn the_sweeper_forgets_requests_too_old_to_be_accepted() {
    let h = harness(|_| {}).await;
    let task = h.create_default().await;
    let body = callback_body(&task, &fail_ev(20, false));
    // At the edge of the tolerance: accepted now, stale past the margin.
    let ts = now_secs() - 299;
    let r = h.callback_raw(&task, "f", ts, body.as_bytes()).await;
    assert_eq!(r.json()["reason"], "not-running");
    let store = &h.state().store;
    let count = || async {
        let path = h.dir.path().join("taskwire.sqlite3");
        let conn = rusqlite::Connection::open(path).expect("the file");
        conn.query_row("SELECT count(*) FROM callback_replays", [], |r| {
            r.get::<_, i64>(0)
        })
        .expect("the table")
    };
    assert_eq!(count().await, 1);
    // Within the tolerance and its margin: kept.
    store
        .forget_used_callbacks((ts + 300) as f64 * 1000.0)
        .await
        .expect("forgotten");
    assert_eq!(count().await, 1);
    store
        .forget_used_callbacks((ts + 300 + 61) as f64 * 1000.0)
        .await
        .expect("forgotten");
    assert_eq!(count().await, 0);
}

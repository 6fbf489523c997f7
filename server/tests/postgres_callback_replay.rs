//! A signed callback request is used once (PROTOCOL.md §Executor
//! callback, "Secrets and binding"), on PostgreSQL with two instances: a
//! request that changed nothing, captured on one and replayed byte for
//! byte after a `start` on either, is a duplicate; re-signed with a later
//! timestamp it applies (core fix 1). Fresh database per test
//! (tests/common/pg.rs); without PostgreSQL binaries they skip.

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_callback_that_changed_nothing_replayed_on_either_instance_changes_nothing() {
    let Some(url) = pg::database().await else {
        return;
    };
    let a = harness(|c| c.data = url.clone().into()).await;
    let b = harness(|c| c.data = url.clone().into()).await;
    replay::replay_after_start_is_a_duplicate(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_forgets_requests_too_old_to_be_accepted_on_postgres() {
    let Some(url) = pg::database().await else {
        return;
    };
    let h = harness(|c| c.data = url.clone().into()).await;
    let task = h.create_default().await;
    let body = taskwire_server::signature::callback_body(&task, &fail_ev(20, false));
    let ts = now_secs() - 299;
    let r = h.callback_raw(&task, "f", ts, body.as_bytes()).await;
    assert_eq!(r.json()["reason"], "not-running");
    let store = &h.state().store;
    let at = |secs: i64| secs as f64 * 1000.0;
    store
        .forget_used_callbacks(at(ts + 300))
        .await
        .expect("kept");
    h.ok_callback(&task, "s", start_ev(10)).await;
    let replayed = h.callback_raw(&task, "f", ts, body.as_bytes()).await;
    assert_eq!(replayed.json()["reason"], "duplicate-callback");
    store
        .forget_used_callbacks(at(ts + 300 + 61))
        .await
        .expect("forgotten");
    // Forgotten (only because the sweeper was asked early: in real time
    // the timestamp would be refused as stale by then).
    let replayed = h.callback_raw(&task, "f", ts, body.as_bytes()).await;
    assert_eq!(replayed.json()["reason"], "failed");
}

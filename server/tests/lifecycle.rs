//! The task lifecycle over HTTP on SQLite (issue 11): cancel, approval,
//! a dead worker fenced off, the execution deadline, what executors may
//! not send, the lease kept across a restart, and continuations that are
//! not failures (issue 26). The PostgreSQL twin is
//! `postgres_lifecycle.rs`.

mod common;

use common::continuations::*;
use common::lifecycle::*;
use common::*;
use serde_json::json;

#[tokio::test]
async fn cancel_stops_a_task_once_and_honestly() {
    cancel_scenario(&harness(|_| {}).await).await;
}

#[tokio::test]
async fn a_held_task_waits_for_a_current_decision() {
    approval_scenario(&harness(|_| {}).await).await;
}

#[tokio::test]
async fn an_approved_task_with_max_attempts_1_continues_and_its_bar_never_drops() {
    approval_continues_scenario(&harness(|_| {}).await).await;
}

#[tokio::test]
async fn a_continuation_or_a_report_of_the_current_attempt_clears_a_stale_error() {
    stale_error_on_continuation_scenario(&harness(|_| {}).await).await;
}

#[tokio::test]
async fn after_a_lapse_progress_holds_and_the_next_attempt_clears_lease_lapsed() {
    stale_error_after_a_lapse_scenario(&harness(|_| {}).await).await;
}

#[tokio::test]
async fn a_dead_worker_lapses_is_requeued_and_its_zombie_is_fenced() {
    dead_worker_scenario(&harness(|_| {}).await).await;
}

#[tokio::test]
async fn the_execution_deadline_times_a_task_out() {
    deadline_scenario(&harness(|_| {}).await).await;
}

#[tokio::test]
async fn executors_cannot_send_peoples_or_the_sweepers_events() {
    refusals_scenario(&harness(|_| {}).await).await;
}

/// The lease is stored, not held in memory: after a restart the attempt
/// still lapses on time, and a start without `leaseMs` gets the server's.
#[tokio::test]
async fn the_lease_survives_a_restart_and_defaults_to_the_servers() {
    let mut h = harness(|c| c.lease_ms = 500).await;
    let id = create_with(&h, json!({"autoRequeue": false})).await;
    h.ok_callback(&id, "s", ev("start", 1, json!({"worker": "w"})))
        .await;
    h.restart().await;
    let t = wait_for(&h, &id, "unknown").await;
    // autoRequeue false: it waits in unknown, for its worker or a person.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(task(&h, &id).await["state"], "unknown", "{t}");
    let back = h
        .ok_callback(
            &id,
            "p",
            ev("progress", 1, json!({"progress": 40, "cursor": "c"})),
        )
        .await;
    assert_eq!(back["state"], "running", "{back}");
    // A seed-000 start (no attempt) opens no lease: it never lapses.
    let seed = create_with(&h, json!({})).await;
    h.ok_callback(&seed, "s", start_ev(now_ms())).await;
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(task(&h, &seed).await["state"], "running");
}

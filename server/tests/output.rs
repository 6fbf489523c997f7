//! Live output on SQLite over real HTTP (PROTOCOL.md §Live output): the
//! append route's rules, resume by offset, a held long-poll woken by a
//! chunk, and SSE. The same scenarios run on PostgreSQL in
//! tests/postgres_output.rs.

mod common;

use common::output::*;
use common::*;

#[tokio::test]
async fn appends_are_idempotent_fenced_superseded_and_closed() {
    let h = harness(|_| {}).await;
    append_rules_scenario(&h).await;
}

#[tokio::test]
async fn bad_appends_are_refused_naming_the_field() {
    let h = harness(|_| {}).await;
    refusals_scenario(&h).await;
}

#[tokio::test]
async fn a_follower_resumes_by_offset_and_others_see_no_change() {
    let h = harness(|_| {}).await;
    resume_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_wakes_a_held_long_poll_that_asked_for_output() {
    let h = harness(|_| {}).await;
    held_long_poll_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_output_assembles_into_the_exact_text_and_closes() {
    let h = harness(|_| {}).await;
    sse_scenario(&h).await;
}

/// The output survives a restart (it was durable when acknowledged).
#[tokio::test]
async fn output_is_durable_across_a_restart() {
    let mut h = harness(|_| {}).await;
    let id = common::lifecycle::create_with(&h, serde_json::json!({})).await;
    h.ok_callback(&id, "s1", common::lifecycle::start(1, 60_000))
        .await;
    delivered(&h, &id, (1, 0, "kept"), "appended").await;
    h.restart().await;
    assert_eq!(output_from(&h, &id, 0, 0).await["text"], "kept");
    delivered(&h, &id, (1, 0, "kept"), "duplicate-chunk").await;
}

//! Batches (PROTOCOL.md §Batches) on the SQLite store, over real HTTP: the
//! scenarios of `batch_scenarios/` (also run on PostgreSQL by
//! `postgres_batches.rs`).

mod batch_scenarios;
mod common;
mod tokens;

use batch_scenarios::*;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_created_whole_with_its_items_in_order() {
    created_whole_scenario(&harness(|_| {}).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_batches_name_the_item_and_create_nothing() {
    bad_batches_scenario(&harness(four_open_tasks).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_create_is_idempotent_in_the_tasks_key_space() {
    idempotent_create_scenario(&harness(|_| {}).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_cursor_answers_only_what_changed() {
    cursor_scenario(&harness(|_| {}).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_held_request_wakes_on_any_items_commit() {
    held_request_scenario(&harness(|_| {}).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_stream_sends_each_change_and_ends_when_all_are_terminal() {
    stream_scenario(&harness(|_| {}).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_token_follows_its_batch_only() {
    batch_token_scenario(&harness(browser_keys).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_the_sweeper_expires_moves_its_batch() {
    expiry_scenario(&harness(|_| {}).await).await;
}

//! Batches (PROTOCOL.md §Batches) on PostgreSQL: the scenarios of
//! `batch_scenarios/` on one instance, then what only several instances
//! and writers can do: a held batch request on one instance woken by a
//! commit on another (also across a lost LISTEN connection), and many
//! callbacks racing on the items of one batch through several writers
//! while a client follows the batch by its cursor. Without PostgreSQL
//! binaries the tests skip (tests/common/pg.rs).

mod batch_scenarios;
mod common;
mod tokens;

use batch_scenarios::*;
use common::*;
use taskwire_server::Config;

/// `n` instances on one fresh database (`None`: no PostgreSQL, skip).
async fn instances(n: usize, tweak: impl Fn(&mut Config)) -> Option<(Vec<Harness>, String)> {
    let url = pg::database().await?;
    let mut hs = Vec::new();
    for _ in 0..n {
        hs.push(
            harness(|c| {
                c.data = url.clone().into();
                tweak(c);
            })
            .await,
        );
    }
    Some((hs, url))
}

/// One instance on a fresh database.
async fn one(tweak: impl Fn(&mut Config)) -> Option<Harness> {
    Some(instances(1, tweak).await?.0.remove(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_created_whole_with_its_items_in_order_on_postgres() {
    let Some(h) = one(|_| {}).await else { return };
    created_whole_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_batches_name_the_item_and_create_nothing_on_postgres() {
    let Some(h) = one(four_open_tasks).await else {
        return;
    };
    bad_batches_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_create_is_idempotent_in_the_tasks_key_space_on_postgres() {
    let Some(h) = one(|_| {}).await else { return };
    idempotent_create_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_cursor_answers_only_what_changed_on_postgres() {
    let Some(h) = one(|_| {}).await else { return };
    cursor_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_held_request_wakes_on_any_items_commit_on_postgres() {
    let Some(h) = one(|_| {}).await else { return };
    held_request_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_stream_sends_each_change_and_ends_when_all_are_terminal_on_postgres() {
    let Some(h) = one(|_| {}).await else { return };
    stream_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_token_follows_its_batch_only_on_postgres() {
    let Some(h) = one(browser_keys).await else {
        return;
    };
    batch_token_scenario(&h).await;
}

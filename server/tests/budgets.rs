//! Budgets and side effects (issue 26, PROTOCOL.md §Budgets and side
//! effects) on SQLite and on PostgreSQL (skipped without PostgreSQL
//! binaries, tests/common/pg.rs): the scenarios of
//! tests/common/budgets.rs on each store, and on PostgreSQL across two
//! servers sharing one database.

mod common;

use common::budgets::*;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_sent_at_once_never_grant_past_the_budget_on_sqlite() {
    let h = harness(|_| {}).await;
    concurrent_reservations_scenario(&[&h], 40).await;
    ledger_scenario(&h).await;
    cancel_report_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_sent_at_once_to_two_servers_never_grant_past_the_budget_on_postgres() {
    let Some(url) = pg::database().await else {
        return;
    };
    let one = harness(|c| c.data = url.clone().into()).await;
    let two = harness(|c| c.data = url.clone().into()).await;
    concurrent_reservations_scenario(&[&one, &two], 40).await;
    ledger_scenario(&one).await;
    cancel_report_scenario(&two).await;
}

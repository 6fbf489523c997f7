//! Steps and checkpoints (issue 26, PROTOCOL.md §Steps) on SQLite and on
//! PostgreSQL (skipped without PostgreSQL binaries, tests/common/pg.rs):
//! the scenarios of tests/common/steps.rs on each store.

mod common;

use common::steps::*;
use common::*;

#[tokio::test]
async fn a_second_attempt_continues_from_the_first_attempts_checkpoints_on_sqlite() {
    let h = harness(|_| {}).await;
    checkpoints_scenario(&h, "steps-sqlite").await;
    plan_is_fixed_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_attempt_continues_from_the_first_attempts_checkpoints_on_postgres() {
    let Some(url) = pg::database().await else {
        return;
    };
    let h = harness(|c| c.data = url.clone().into()).await;
    checkpoints_scenario(&h, "steps-postgres").await;
    plan_is_fixed_scenario(&h).await;
}

#[tokio::test]
async fn a_claim_naming_its_workflow_versions_leaves_other_versions_tasks_on_sqlite() {
    let h = harness(|_| {}).await;
    workflow_versions_scenario(&h, "versions-sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_naming_its_workflow_versions_leaves_other_versions_tasks_on_postgres() {
    let Some(url) = pg::database().await else {
        return;
    };
    let h = harness(|c| c.data = url.clone().into()).await;
    workflow_versions_scenario(&h, "versions-postgres").await;
}

//! The task lifecycle on PostgreSQL (issue 11): the SQLite scenarios on
//! one instance, then what only several instances can race: a cancel
//! against a succeed, and sweepers against one another on lapsing leases.
//! Without PostgreSQL binaries the tests skip (tests/common/pg.rs).

mod common;

use std::time::{Duration, Instant};

use common::continuations::*;
use common::lifecycle::*;
use common::*;
use serde_json::{json, Value};

async fn instances(n: usize, sweep_ms: u64) -> Option<Vec<Harness>> {
    let url = pg::database().await?;
    let mut hs = Vec::new();
    for _ in 0..n {
        hs.push(
            harness(|c| {
                c.data = url.clone().into();
                c.retention = 1000;
                c.sweep_ms = sweep_ms;
            })
            .await,
        );
    }
    Some(hs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_scenarios_hold_on_postgres() {
    let Some(hs) = instances(1, 50).await else {
        return;
    };
    let h = &hs[0];
    cancel_scenario(h).await;
    approval_scenario(h).await;
    dead_worker_scenario(h).await;
    deadline_scenario(h).await;
    refusals_scenario(h).await;
    approval_continues_scenario(h).await;
    stale_error_on_continuation_scenario(h).await;
    stale_error_after_a_lapse_scenario(h).await;
}

/// A cancel on one instance and a succeed on another, at once, 20 times:
/// one of them wins, the task ends once (one terminal version, one
/// notification), and the loser is told so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_a_succeed_ends_the_task_once() {
    let Some(hs) = instances(2, 50).await else {
        return;
    };
    let mut ids = Vec::new();
    for round in 0..20 {
        let id = create_with(&hs[0], json!({})).await;
        hs[1].ok_callback(&id, "s", start(1, 60_000)).await;
        let succeed = ev(
            "succeed",
            1,
            json!({"resultRef": "blob://r", "resultHash": format!("sha256:{round}")}),
        );
        let (cancel, done) = tokio::join!(
            act(&hs[0], &id, "cancel", json!({})),
            hs[1].ok_callback(&id, "ok", succeed)
        );
        let task = task(&hs[0], &id).await;
        let state = task["state"].as_str().unwrap().to_string();
        // Either the succeed came first (succeeded; the cancel found a
        // finished task), or the cancel did (cancelling, then the result
        // ends it cancelled, kept for compensation).
        match state.as_str() {
            "succeeded" => assert_eq!(cancel["changed"], false, "{cancel}"),
            "cancelled" => assert_eq!(done["reason"], "succeeded-after-cancel", "{done}"),
            other => panic!("round {round}: {other}: {cancel} {done}"),
        }
        ids.push((id, state));
    }
    let feed = hs[1]
        .get("demo", "/v1/notifications?limit=1000")
        .await
        .json();
    let notes = feed["notifications"].as_array().unwrap();
    for (id, state) in &ids {
        let mine: Vec<&Value> = notes
            .iter()
            .filter(|n| n["taskId"] == id.as_str())
            .collect();
        assert_eq!(mine.len(), 1, "{id}: {mine:?}");
        assert_eq!(mine[0]["state"], state.as_str());
    }
}

/// Three instances sweeping every 10 ms over 30 leases that lapse: each
/// task gets exactly one `lapse` and one `abandon` (re-queued once), and
/// contiguous versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweepers_racing_on_leases_lapse_each_once() {
    let Some(hs) = instances(3, 10).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..30 {
        let id = create_with(&hs[i % 3], json!({"unknownGraceMs": 200})).await;
        hs[(i + 1) % 3].ok_callback(&id, "s", start(1, 300)).await;
        ids.push(id);
    }
    let until = Instant::now() + Duration::from_secs(10);
    for (i, id) in ids.iter().enumerate() {
        loop {
            let t = task(&hs[i % 3], id).await;
            if t["state"] == "queued" {
                break;
            }
            assert!(Instant::now() < until, "{id} never re-queued: {t}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Let all three keep sweeping a little longer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (i, id) in ids.iter().enumerate() {
        let (_, answer) = hs[(i + 2) % 3].resume("demo", id, "cursor=0").await;
        let versions: Vec<u64> = answer.events().iter().map(|e| e.version).collect();
        assert_eq!(versions, [1, 2, 3], "{id}");
        assert_eq!(
            history(&hs[0], id).await,
            ["start", "lapse", "abandon"],
            "{id}"
        );
    }
}

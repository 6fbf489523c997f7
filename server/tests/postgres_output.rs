//! Live output on PostgreSQL: the SQLite scenarios (tests/output.rs) on
//! one instance, then what only several instances show: a chunk appended
//! on one wakes a follower held on another, and appends racing on one
//! offset from two instances append once. Without PostgreSQL binaries the
//! tests skip (tests/common/pg.rs).

mod common;

use std::time::{Duration, Instant};

use common::lifecycle::{create_with, start};
use common::output::*;
use common::*;
use serde_json::json;

async fn instances(n: usize) -> Option<Vec<Harness>> {
    let url = pg::database().await?;
    let mut hs = Vec::new();
    for _ in 0..n {
        hs.push(harness(|c| c.data = url.clone().into()).await);
    }
    Some(hs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_scenarios_hold_on_postgres() {
    let Some(hs) = instances(1).await else {
        return;
    };
    let h = &hs[0];
    append_rules_scenario(h).await;
    refusals_scenario(h).await;
    resume_scenario(h).await;
    held_long_poll_scenario(h).await;
    sse_scenario(h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_on_one_instance_wakes_a_follower_held_on_another() {
    let Some(hs) = instances(2).await else {
        return;
    };
    let id = create_with(&hs[0], json!({})).await;
    hs[0].ok_callback(&id, "s1", start(1, 60_000)).await;
    let v = common::lifecycle::task(&hs[0], &id).await["version"]
        .as_u64()
        .unwrap();
    let addr = hs[1].addr.clone();
    let path = format!(
        "/v1/tasks/{id}/resume?cursor={v}&waitMs=10000&output=draft&outputAttempt=1&outputOffset=0"
    );
    let held = tokio::spawn(async move {
        taskwire_server::client::request_within(
            &addr,
            "GET",
            &path,
            &[("authorization", "Bearer demo")],
            "",
            1 << 20,
        )
        .await
        .expect("request")
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = Instant::now();
    delivered(&hs[0], &id, (1, 0, "across"), "appended").await;
    let r = held.await.unwrap();
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(r.json()["output"]["text"], "across", "{:?}", r.json());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_racing_on_one_offset_append_once() {
    let Some(hs) = instances(2).await else {
        return;
    };
    for round in 0..10 {
        let id = create_with(&hs[0], json!({})).await;
        hs[0].ok_callback(&id, "s1", start(1, 60_000)).await;
        let (a, b) = tokio::join!(
            append(&hs[0], &id, 1, 0, "left"),
            append(&hs[1], &id, 1, 0, "right"),
        );
        let mut codes = [a.status, b.status];
        codes.sort();
        assert_eq!(
            codes,
            [200, 409],
            "round {round}: {:?} {:?}",
            a.json(),
            b.json()
        );
        let text = output_from(&hs[0], &id, 0, 0).await["text"].clone();
        assert!(text == "left" || text == "right", "{text}");
    }
}

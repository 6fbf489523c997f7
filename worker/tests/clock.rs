//! A worker whose clock is 10 minutes off, either way, keeps its lease:
//! its reports are stamped with the server's time (the claim's `nowMs`,
//! the `Date` header of a refused timestamp).

mod common;

use std::time::Duration;

use common::{now_ms, spawn, Server};
use serde_json::json;
use taskwire_worker::Done;

const TEN_MINUTES: f64 = 600_000.0;

async fn runs_with_a_clock_off_by(skew: f64) {
    let server = Server::start(&[]);
    let worker = server
        .worker("w-skewed")
        .clock(move || now_ms() + skew)
        .build()
        .unwrap();
    worker
        .handle("summary", |job| async move {
            // Several heartbeats (a second apart) and reports: each must pass
            // the server's 5 minutes of tolerance.
            for p in [20u8, 40, 60, 80] {
                tokio::time::sleep(Duration::from_millis(700)).await;
                job.progress(p, None).await?;
            }
            Ok(Done::result("blob://skew", "sha256:s"))
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server.create("summary", json!(null), json!({})).await;
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 1, "the lease held: {task}");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_ten_minutes_fast_keeps_the_lease() {
    runs_with_a_clock_off_by(TEN_MINUTES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_ten_minutes_slow_keeps_the_lease() {
    runs_with_a_clock_off_by(-TEN_MINUTES).await;
}

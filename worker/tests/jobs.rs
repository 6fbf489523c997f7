//! A job's outcomes against the real server: a result, a retryable and a
//! final failure, a hold and the decision the next attempt sees.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{spawn, Server};
use serde_json::json;
use taskwire_worker::{Done, FatalError, RetryableError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_task_reports_progress_and_succeeds() {
    let server = Server::start(&[]);
    let worker = server.worker("w-succeed").build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    worker
        .handle("summary", move |job| {
            let record = Arc::clone(&record);
            async move {
                let input: serde_json::Value = job.input()?;
                record
                    .lock()
                    .unwrap()
                    .push((job.attempt(), job.kind().to_string(), input));
                for p in [25u8, 50, 75] {
                    job.check()?;
                    job.progress(p, Some(&format!("c{p}"))).await?;
                }
                Ok(Done::result(format!("blob://{}", job.id()), "sha256:ab"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server
        .create("summary", json!({"doc": "hello"}), json!({}))
        .await;
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 1);
    assert_eq!(task["progress"], 100);
    assert_eq!(task["resultRef"], format!("blob://{id}"));
    assert_eq!(task["resultHash"], "sha256:ab");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(1, "summary".to_string(), json!({"doc": "hello"}))]
    );
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_is_retried_and_a_final_one_is_not() {
    let server = Server::start(&[]);
    let worker = server.worker("w-retry").build().unwrap();
    worker
        .handle("flaky", |job| async move {
            if job.attempt() == 1 {
                Err(RetryableError("vendor busy".into()))?;
            }
            // The second attempt sees the first one's error.
            assert_eq!(job.task().error.as_deref(), Some("vendor busy"));
            Ok(Done::result("blob://ok", "sha256:ok"))
        })
        .unwrap();
    worker
        .handle("broken", |_job| async move {
            Err(FatalError("input is not a PDF".into()))?;
            Ok(Done::result("never", "never"))
        })
        .unwrap();
    worker
        .handle("bug", |_job| async move {
            // An error of no known class: final.
            let n: u32 = "not a number".parse()?;
            Ok(Done::result(format!("blob://{n}"), "sha256:x"))
        })
        .unwrap();
    let run = spawn(&worker);
    let flaky = server.create("flaky", json!(null), json!({})).await;
    let broken = server.create("broken", json!(null), json!({})).await;
    let bug = server.create("bug", json!(null), json!({})).await;

    let task = server.wait_state(&flaky, "succeeded").await;
    assert_eq!(task["attempts"], 2);

    let task = server.wait_state(&broken, "failed").await;
    assert_eq!(
        task["attempts"], 1,
        "a final failure is not retried: {task}"
    );
    assert_eq!(task["error"], "input is not a PDF");

    let task = server.wait_state(&bug, "failed").await;
    assert_eq!(task["attempts"], 1, "{task}");
    assert_eq!(task["error"], "invalid digit found in string");

    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_waits_for_a_decision_that_the_next_attempt_sees() {
    let server = Server::start(&[]);
    let worker = server.worker("w-hold").build().unwrap();
    worker
        .handle("review", |job| async move {
            match &job.task().decision {
                None => {
                    job.progress(50, Some("draft")).await?;
                    job.hold("blob://draft-1", "sha256:d1", Some("publish this?"))
                        .await
                }
                Some(decision) => {
                    // Goes on from the artifact decided on, with the reason.
                    assert_eq!(job.task().artifact_hash.as_deref(), Some("sha256:d1"));
                    let reason = decision.reason.clone().unwrap_or_default();
                    Ok(Done::result(
                        format!("blob://final/{}/{reason}", decision.kind.as_str()),
                        "sha256:f",
                    ))
                }
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server
        .create("review", json!({"approval": true}), json!({}))
        .await;
    let held = server.wait_state(&id, "waiting_approval").await;
    assert_eq!(held["artifactRef"], "blob://draft-1");
    assert_eq!(held["question"], "publish this?");
    server.decide(&held, "request_changes", "shorter").await;
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["resultRef"], "blob://final/request_changes/shorter");
    assert_eq!(task["attempts"], 2);
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_handed_out_late_in_a_held_claim_keeps_its_whole_lease() {
    let server = Server::start(&[]);
    // The claim is held nearly as long as a lease: the lease starts when
    // the task is handed out, not when the claim was sent.
    let worker = server
        .worker("w-held")
        .lease_ms(3_000)
        .wait_ms(3_000)
        .build()
        .unwrap();
    let stopped = Arc::new(Mutex::new(None));
    let record = Arc::clone(&stopped);
    worker
        .handle("summary", move |job| {
            let record = Arc::clone(&record);
            async move {
                for p in [20u8, 40, 60, 80] {
                    tokio::time::sleep(Duration::from_millis(800)).await;
                    job.progress(p, None).await?;
                }
                *record.lock().unwrap() = Some(job.stop_reason());
                Ok(Done::result("blob://late", "sha256:l"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let id = server.create("summary", json!(null), json!({})).await;
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 1, "{task}");
    assert_eq!(*stopped.lock().unwrap(), Some(None), "never stopped");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

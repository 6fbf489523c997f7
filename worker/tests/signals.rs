//! The job's signal: a person's cancel, an attempt taken over by another
//! (fencing), and a worker's graceful shutdown.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{now_ms, spawn, Server};
use serde_json::json;
use taskwire_worker::{Done, StopReason};

/// A handler that works until its signal fires, and records why.
fn until_signalled(
    seen: &Arc<Mutex<Vec<(u64, StopReason)>>>,
) -> impl Fn(
    taskwire_worker::Job,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Done, taskwire_worker::JobError>> + Send>,
> + Send
       + Sync
       + 'static {
    let seen = Arc::clone(seen);
    move |job| {
        let seen = Arc::clone(&seen);
        Box::pin(async move {
            let why = job.cancelled().await;
            seen.lock().unwrap().push((job.attempt(), why));
            job.check()?;
            Ok(Done::result("never", "never"))
        })
    }
}

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_the_job_within_a_heartbeat_and_ends_it_cancelled() {
    let server = Server::start(&[]);
    let worker = server.worker("w-cancel").build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    worker.handle("long", until_signalled(&seen)).unwrap();
    let run = spawn(&worker);
    let id = server.create("long", json!(null), json!({})).await;
    server.wait_state(&id, "running").await;
    let answer = server.cancel(&id).await;
    assert_eq!(answer["task"]["state"], "cancelling");
    // The next heartbeat (a second apart) answers `next: cancel`; the job
    // stops and the worker acknowledges.
    let task = server.wait_state(&id, "cancelled").await;
    assert_eq!(task["attempts"], 1);
    assert_eq!(*seen.lock().unwrap(), vec![(1, StopReason::Cancel)]);
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_attempt_was_taken_over_gets_stop_and_reports_nothing_more() {
    let server = Server::start(&[]);
    let first = server.worker("w-first").build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    first.handle("fenced", until_signalled(&seen)).unwrap();
    let run_first = spawn(&first);
    let id = server.create("fenced", json!(null), json!({})).await;
    server.wait_state(&id, "running").await;

    // Another process of the same executor gives attempt 1 up (retryable):
    // the task is queued again, and a second worker takes attempt 2.
    let (status, answer) = server
        .callback(
            &id,
            json!({"type": "fail", "atMs": now_ms().floor(), "error": "node drained",
                   "retryable": true, "attempt": 1}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let second = server.worker("w-second").build().unwrap();
    second
        .handle("fenced", |job| async move {
            // Holds attempt 2 a while, so that attempt 1's heartbeat meets it.
            tokio::time::sleep(Duration::from_secs(3)).await;
            job.check()?;
            Ok(Done::result(
                format!("blob://attempt-{}", job.attempt()),
                "sha256:2",
            ))
        })
        .unwrap();
    let run_second = spawn(&second);

    // Attempt 1's next heartbeat is stale: `next: stop`.
    wait_until("attempt 1 stopped", || !seen.lock().unwrap().is_empty()).await;
    assert_eq!(*seen.lock().unwrap(), vec![(1, StopReason::Stop)]);
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 2);
    assert_eq!(task["resultRef"], "blob://attempt-2");

    first.shutdown(Duration::from_secs(1)).await;
    second.shutdown(Duration::from_secs(1)).await;
    run_first.await.unwrap();
    run_second.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_hands_unfinished_tasks_back() {
    let server = Server::start(&[]);
    let worker = server.worker("w-leaving").concurrency(2).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    worker.handle("long", until_signalled(&seen)).unwrap();
    let run = spawn(&worker);
    let a = server.create("long", json!(null), json!({})).await;
    let b = server.create("long", json!(null), json!({})).await;
    server.wait_state(&a, "running").await;
    server.wait_state(&b, "running").await;

    worker.shutdown(Duration::from_millis(300)).await;
    run.await.unwrap();
    for id in [&a, &b] {
        let task = server.get(id).await;
        assert_eq!(task["state"], "queued", "handed back at once: {task}");
        assert_eq!(task["error"], "worker shut down");
    }
    let mut reasons: Vec<StopReason> = seen.lock().unwrap().iter().map(|(_, r)| *r).collect();
    reasons.dedup();
    assert_eq!(reasons, vec![StopReason::Shutdown]);

    // Another worker takes them over as attempt 2.
    let next = server.worker("w-next").build().unwrap();
    next.handle("long", |job| async move {
        Ok(Done::result(
            format!("blob://{}", job.attempt()),
            "sha256:n",
        ))
    })
    .unwrap();
    let run = spawn(&next);
    for id in [&a, &b] {
        let task = server.wait_state(id, "succeeded").await;
        assert_eq!(task["attempts"], 2);
    }
    next.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_a_held_claim_brings_during_a_shutdown_is_handed_back_at_once() {
    let server = Server::start(&[]);
    let worker = server.worker("w-late").wait_ms(5_000).build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    worker.handle("long", until_signalled(&seen)).unwrap();
    let run = spawn(&worker);
    // The claim is held (no work yet) when the shutdown begins.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopping = tokio::spawn({
        let worker = worker.clone();
        async move { worker.shutdown(Duration::from_secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let id = server.create("long", json!(null), json!({})).await;
    stopping.await.unwrap();
    run.await.unwrap();
    let task = server.get(&id).await;
    assert_eq!(
        task["state"], "queued",
        "handed back, not left to lapse: {task}"
    );
    assert_eq!(task["attempts"], 1);
    assert_eq!(task["error"], "worker shut down");
    assert!(seen.lock().unwrap().is_empty(), "no job was started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_the_job_cannot_honour_is_answered_cannot_cancel_and_the_job_goes_on() {
    let server = Server::start(&[]);
    let worker = server.worker("w-committed").build().unwrap();
    let go = Arc::new(tokio::sync::Notify::new());
    let g = Arc::clone(&go);
    worker
        .handle("send-email", move |job| {
            let go = Arc::clone(&g);
            async move {
                // The email is on its way: a cancel can no longer stop it.
                assert_eq!(job.cancelled().await, StopReason::Cancel);
                job.cannot_cancel(Some("the email is already sent")).await?;
                assert_eq!(job.stop_reason(), None);
                assert!(!job.token().is_cancelled(), "a fresh token");
                go.notified().await;
                job.progress(90, Some("sent")).await?;
                Ok(Done::result("blob://sent", "sha256:e"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server.create("send-email", json!(null), json!({})).await;
    server.wait_state(&id, "running").await;
    server.cancel(&id).await;
    server.wait_state(&id, "cancel_ineffective").await;
    go.notify_one();
    // Whatever the work ends with ends the task cancelled; the result is
    // kept for compensation.
    let task = server.wait_state(&id, "cancelled").await;
    assert_eq!(task["resultRef"], "blob://sent", "{task}");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

/// A worker's `run()` dropped, as when its process is killed: its
/// heartbeats stop with it, the lease lapses, and another worker takes
/// the task over. Before the fix a dropped run left the job's heartbeat
/// task alive, renewing the lease of an attempt nobody ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_run_is_dropped_goes_silent_and_another_takes_over() {
    let server = Server::start(&[]);
    let doomed = server.worker("w-doomed").build().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    doomed.handle("killed", until_signalled(&seen)).unwrap();
    let run = spawn(&doomed);
    let id = server
        .create("killed", json!(null), json!({"unknownGraceMs": 3000}))
        .await;
    server.wait_state(&id, "running").await;
    run.abort();
    let _ = run.await;
    // The 3 s lease lapses: no heartbeat renews it any more.
    let lapsed = server.wait_state(&id, "unknown").await;
    assert_eq!(lapsed["attempts"], 1);
    let heir = server.worker("w-heir").build().unwrap();
    heir.handle("killed", |job| async move {
        Ok(Done::result(
            format!("blob://{}", job.attempt()),
            "sha256:2",
        ))
    })
    .unwrap();
    let run_heir = spawn(&heir);
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(
        (task["attempts"].clone(), task["resultRef"].clone()),
        (json!(2), json!("blob://2"))
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "the killed handler never ran on"
    );
    heir.shutdown(Duration::from_secs(1)).await;
    run_heir.await.unwrap();
}

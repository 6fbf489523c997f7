//! Reports the server could not judge (503 while its store is locked) are
//! sent again, signed afresh, until they land, within the lease.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{spawn, Server};
use serde_json::json;
use taskwire_worker::{Done, StopReason};
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_answered_503_is_sent_again_until_it_lands() {
    let server = Server::start(&[]);
    // A lease long enough to outlast the store's outage (its 5 s busy
    // timeout, then a 503 with Retry-After: 5).
    let worker = server.worker("w-resend").lease_ms(30_000).build().unwrap();
    let ready = Arc::new(Notify::new());
    let go = Arc::new(Notify::new());
    let (r, g) = (Arc::clone(&ready), Arc::clone(&go));
    worker
        .handle("summary", move |job| {
            let (ready, go) = (Arc::clone(&r), Arc::clone(&g));
            async move {
                job.progress(10, Some("before")).await?;
                ready.notify_one();
                go.notified().await;
                job.progress(50, Some("during the outage")).await?;
                assert_eq!(job.stop_reason(), None);
                Ok(Done::result("blob://resent", "sha256:r"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let id = server.create("summary", json!(null), json!({})).await;
    ready.notified().await;

    // Another process holds the store's write lock past the server's busy
    // timeout: every write is answered 503 storage-unavailable.
    let holder = rusqlite::Connection::open(server.database()).unwrap();
    holder.busy_timeout(Duration::from_secs(5)).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    go.notify_one();
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(server.get(&id).await["progress"], 10, "nothing written yet");
    holder.execute_batch("ROLLBACK").unwrap();

    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 1, "the attempt kept its lease: {task}");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_outlives_a_server_restart_and_its_report_lands_after_it() {
    let mut server = Server::start(&[]);
    let worker = server.worker("w-restart").lease_ms(20_000).build().unwrap();
    let ready = Arc::new(Notify::new());
    let go = Arc::new(Notify::new());
    let (r, g) = (Arc::clone(&ready), Arc::clone(&go));
    worker
        .handle("summary", move |job| {
            let (ready, go) = (Arc::clone(&r), Arc::clone(&g));
            async move {
                job.progress(10, None).await?;
                ready.notify_one();
                go.notified().await;
                // Sent while the server is down: refused connections, resent
                // with backoff under the same callback id until it is back.
                job.progress(50, None).await?;
                Ok(Done::result("blob://after-restart", "sha256:a"))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    let first = server.create("summary", json!(null), json!({})).await;
    ready.notified().await;
    server.kill();
    go.notify_one();
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.start_again();

    let task = server.wait_state(&first, "succeeded").await;
    assert_eq!(task["attempts"], 1, "{task}");
    // The claim loop came back too: a new task is taken.
    let second = server.create("summary", json!(null), json!({})).await;
    ready.notified().await;
    go.notify_one();
    server.wait_state(&second, "succeeded").await;
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_unreachable_past_the_lease_fires_lease_lost_and_the_next_attempt_finishes() {
    let mut server = Server::start(&[]);
    let worker = server.worker("w-lost").lease_ms(3_000).build().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    worker
        .handle("summary", move |job| {
            let record = Arc::clone(&record);
            async move {
                if job.attempt() == 1 {
                    let why = job.cancelled().await;
                    record.lock().unwrap().push(why);
                    job.check()?;
                }
                Ok(Done::result(
                    format!("blob://attempt-{}", job.attempt()),
                    "sha256:l",
                ))
            }
        })
        .unwrap();
    let run = spawn(&worker);
    // A short grace, so the lapsed attempt is re-queued soon.
    let id = server
        .create("summary", json!(null), json!({"unknownGraceMs": 500}))
        .await;
    server.wait_state(&id, "running").await;
    server.kill();
    // Past the lease: every heartbeat meets a refused connection.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "lease-lost never fired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(*seen.lock().unwrap(), vec![StopReason::LeaseLost]);
    server.start_again();
    let task = server.wait_state(&id, "succeeded").await;
    assert_eq!(task["attempts"], 2, "{task}");
    assert_eq!(task["resultRef"], "blob://attempt-2");
    worker.shutdown(Duration::from_secs(1)).await;
    run.await.unwrap();
}

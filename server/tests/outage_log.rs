//! A full disk is logged as one episode (issue 24, N5): one line when
//! writes start failing, one when they succeed again, however many writes
//! fail in between and whoever makes them (HTTP requests, the TTL
//! sweeper, the notify sender recording its attempts).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// A notify receiver that refuses every post (500): each attempt is
/// recorded, and retried while the disk is full.
async fn refusing_receiver() -> (String, Arc<AtomicUsize>) {
    let posts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&posts);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::INTERNAL_SERVER_ERROR
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (hook, posts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_logged_once_when_writes_fail_and_once_when_they_succeed_again() {
    let (hook, posts) = refusing_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let server = spawn_logged(limited(
        dir.path(),
        3 * 1024,
        &["--notify-url", &hook, "--sweep-ms", "50"],
    ));
    let addr = server.addr.clone();
    // Notifications the sender keeps retrying: tasks that expire at once.
    for _ in 0..3 {
        let r = create(&addr, json!({"ttlMs": 50, "maxAttempts": 1})).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
    }
    let t0 = Instant::now();
    while posts.load(Ordering::Relaxed) < 3 && t0.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(posts.load(Ordering::Relaxed) >= 3, "the sender posts");

    // Fill the file up to its limit.
    let big = json!({"ttlMs": 3_600_000, "maxAttempts": 1, "input": "x".repeat(60_000)});
    let mut full = false;
    for _ in 0..200 {
        let r = create(&addr, big.clone()).await;
        if r.status != 201 {
            assert_error(&r, 503, "storage-unavailable", "store");
            full = true;
            break;
        }
    }
    assert!(full, "the file limit is reached");
    // Many more failing writes: HTTP creates, and for a few seconds the
    // sweeper's ticks and the sender's retries (one a second).
    let posts_at_full = posts.load(Ordering::Relaxed);
    for _ in 0..20 {
        assert_eq!(create(&addr, big.clone()).await.status, 503);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(
        posts.load(Ordering::Relaxed) > posts_at_full,
        "the sender retried during the outage"
    );

    // Space again: a write that commits once none was refused for the
    // quiet period (5 s) ends the episode.
    lift_file_limit(&server);
    assert_eq!(create(&addr, big.clone()).await.status, 201);
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    assert_eq!(create(&addr, big.clone()).await.status, 201);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let down = server.stderr_lines("storage unavailable");
    assert_eq!(down.len(), 1, "{down:?}");
    let up = server.stderr_lines("storage writable again after ");
    assert_eq!(up.len(), 1, "{up:?}");
    let refused: u64 = up[0]
        .rsplit(", ")
        .next()
        .and_then(|tail| tail.strip_suffix(" writes refused"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count of refused writes: {}", up[0]));
    assert!(refused >= 21, "{}", up[0]);
    // Nothing else said anything about the disk: not the sweeper, not
    // the sender, not per request.
    let about_storage: Vec<String> = ["full", "I/O", "sweeper:", "notify:"]
        .iter()
        .flat_map(|needle| server.stderr_lines(needle))
        .collect();
    assert_eq!(about_storage, down, "every line about the disk");
    server.kill();
}

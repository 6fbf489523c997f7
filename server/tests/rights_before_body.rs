//! A caller's rights are judged from the headers, before any of its body
//! is read (PROTOCOL.md §Error precedence, step 2; issue 24, N1): a
//! watch-only browser token that announces a large body and then stalls
//! gets its 403 (or 404 out of scope) at once, not after the body timeout,
//! and the server buffers none of the body.

mod common;
mod tokens;

use std::time::{Duration, Instant};

use common::lifecycle::{create_with, start};
use common::raw::{until_closed, PATIENCE};
use common::*;
use serde_json::json;
use tokens::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Sends a request head announcing `length` bytes of body, and only the
/// first few of them, then nothing more (a stalled upload).
async fn stalled_upload(addr: &str, line: &str, token: &str, length: usize) -> TcpStream {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{line} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\nidempotency-key: k1\r\ncontent-length: {length}\r\n\r\n{{\"items\":["
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_the_right_is_refused_before_its_body_is_read() {
    // A body timeout far past the patience: a server that waits for the
    // body answers nothing in time (it used to answer 408 after 10 s).
    let h = harness(|c| {
        c.browser_tokens.keys = key_flags();
        c.body_timeout_ms = 60_000;
        c.header_timeout_ms = 60_000;
    })
    .await;
    let running = create_with(&h, json!({})).await;
    h.ok_callback(&running, "s", start(1, 60_000)).await;
    let elsewhere = create_with(&h, json!({})).await;
    let watch_only = hs256("k1", K1, &claims(&[&running], &["watch"]));
    let cases = [
        ("POST /v1/batches", 1 << 20, "403", "tenant-token-required"),
        ("POST /v1/tasks", 60_000, "403", "tenant-token-required"),
        (
            &*format!("POST /v1/tasks/{running}/cancel"),
            60_000,
            "403",
            "right-not-granted",
        ),
        (
            &*format!("POST /v1/tasks/{running}/decisions"),
            60_000,
            "403",
            "right-not-granted",
        ),
        (
            &*format!("POST /v1/tasks/{running}/deliveries"),
            60_000,
            "403",
            "right-not-granted",
        ),
        // Out of the token's scope: 404, as for an unknown task.
        (
            &*format!("POST /v1/tasks/{elsewhere}/cancel"),
            60_000,
            "404",
            "not-found",
        ),
    ];
    for (line, length, status, code) in cases {
        let t = Instant::now();
        let mut conn = stalled_upload(&h.addr, line, &watch_only, length).await;
        let (got, closed) = until_closed(&mut conn, PATIENCE).await;
        let took = t.elapsed();
        assert!(
            got.starts_with(&format!("HTTP/1.1 {status}")),
            "{line}: expected {status} without the body, got {got:?} after {took:?}"
        );
        assert!(
            got.contains(&format!(r#""code":"{code}""#)),
            "{line}: {got}"
        );
        assert!(
            took < Duration::from_secs(1),
            "{line}: answered after {took:?}"
        );
        // The unread body is never waited for: the connection ends with
        // the answer, and the answer says so, so that a client does not
        // send its next request on it.
        assert!(closed.is_some(), "{line}: the connection stays open");
        assert!(
            got.to_ascii_lowercase().contains("connection: close"),
            "{line}: no Connection: close in {got}"
        );
    }
    // Nothing was done: the running task is still running.
    let (_, answer) = h.resume("demo", &running, "cursor=0").await;
    assert_eq!(answer.task().unwrap().version, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_with_the_right_still_has_its_body_read_and_bounded() {
    let h = harness(|c| {
        c.browser_tokens.keys = key_flags();
        c.body_timeout_ms = 300;
    })
    .await;
    let running = create_with(&h, json!({})).await;
    h.ok_callback(&running, "s", start(1, 60_000)).await;
    let may_cancel = hs256("k1", K1, &claims(&[&running], &["cancel"]));
    // Its stalled body is waited for, up to the body timeout: 408.
    let line = format!("POST /v1/tasks/{running}/cancel");
    let mut conn = stalled_upload(&h.addr, &line, &may_cancel, 1_000).await;
    let (got, _) = until_closed(&mut conn, PATIENCE).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    // A body announced past the limit is 413 without being kept: read and
    // thrown away when a little over (a stalled one until the body timeout),
    // so the sender sees the answer rather than a reset.
    let mut conn = stalled_upload(&h.addr, &line, &may_cancel, 70_000).await;
    let (got, _) = until_closed(&mut conn, PATIENCE).await;
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    // A whole body is read and judged as before, on a connection that
    // stays open for the next request.
    let r = h
        .post(
            &may_cancel,
            &format!("/v1/tasks/{running}/cancel"),
            &[],
            "{}",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["task"]["state"], "cancelling");
    assert_ne!(
        r.header("connection"),
        Some("close"),
        "a read body keeps the connection"
    );
}

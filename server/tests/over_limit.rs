//! A body announced past its route's limit: the sender must see the 413,
//! not a reset in mid-write (PROTOCOL.md §Limits, "request body size").
//!
//! A client writes its whole body before reading the answer. Answered and
//! closed while it still writes, it meets a reset and reports `EPIPE` (the
//! conformance suite's 1 MiB + 1 batch did, now and then, under load).

mod common;

use std::time::{Duration, Instant};

use common::raw::{get_head, one_response, until_closed, PATIENCE};
use common::*;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The create route's limit (PROTOCOL.md: 64 KiB).
const LIMIT: usize = 64 * 1024;

fn create_head(length: usize) -> String {
    format!(
        "POST /v1/tasks HTTP/1.1\r\nhost: t\r\nauthorization: Bearer demo\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_a_little_over_is_read_and_answered_413_on_a_connection_that_stays_open() {
    let h = harness(|_| {}).await;
    let mut conn = BufReader::new(TcpStream::connect(&h.addr).await.unwrap());
    // Written in pieces, with pauses: the server answers only once it has
    // read the whole body, so every write lands on an open connection.
    let body = vec![b' '; LIMIT + 1];
    conn.get_mut()
        .write_all(create_head(body.len()).as_bytes())
        .await
        .unwrap();
    for piece in body.chunks(16 * 1024) {
        conn.get_mut().write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = one_response(&mut conn).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"payload-too-large\""), "{answer}");
    // The same connection serves the next request.
    conn.get_mut()
        .write_all(get_head("/v1/notifications").as_bytes())
        .await
        .unwrap();
    let next = one_response(&mut conn).await;
    assert!(next.starts_with("HTTP/1.1 200"), "{next}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_far_over_is_answered_413_at_once_without_being_read() {
    // A body timeout far past the patience: a server that read the body
    // would answer nothing in time.
    let h = harness(|c| c.body_timeout_ms = 60_000).await;
    let mut conn = TcpStream::connect(&h.addr).await.unwrap();
    let sent = Instant::now();
    conn.write_all(create_head(10 * 1024 * 1024).as_bytes())
        .await
        .unwrap();
    let (got, closed) = until_closed(&mut conn, PATIENCE).await;
    assert!(got.starts_with("HTTP/1.1 413"), "{got}");
    assert!(closed.is_some(), "closed after the answer: {got}");
    assert!(sent.elapsed() < PATIENCE, "answered at once");
}

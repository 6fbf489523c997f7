//! The timeouts of PROTOCOL.md "Limits" and server/README.md "Limits":
//! a request head, a body and an idle keep-alive connection each have
//! their time, held long-polls and SSE streams are not cut off, and heads
//! have a size limit; on a real server over loopback with small values.

mod common;

use std::time::{Duration, Instant};

use common::raw::{get_head, one_response, until_closed, PATIENCE};
use common::*;
use serde_json::json;
use taskwire_server::client::Conn;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_head_is_closed_after_the_header_timeout() {
    let h = harness(|c| {
        c.header_timeout_ms = 400;
        c.idle_timeout_ms = 60_000;
    })
    .await;
    let opened = Instant::now();
    // One sends half a head, one nothing at all, one trickles a header
    // byte every 50 ms (which must not buy it more time).
    let mut half = TcpStream::connect(&h.addr).await.unwrap();
    half.write_all(b"GET /v1/tasks/x HTTP/1.1\r\nhost: t\r\nx-slow: ")
        .await
        .unwrap();
    let mut silent = TcpStream::connect(&h.addr).await.unwrap();
    let mut trickle = TcpStream::connect(&h.addr).await.unwrap();
    trickle
        .write_all(b"GET /v1/tasks/x HTTP/1.1\r\nx-a: ")
        .await
        .unwrap();
    let trickling = tokio::spawn(async move {
        for _ in 0..60 {
            if trickle.write_all(b"a").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        until_closed(&mut trickle, Duration::ZERO).await.1.is_some()
            || trickle.write_all(b"a").await.is_err()
    });
    for (name, conn) in [("half", &mut half), ("silent", &mut silent)] {
        let (got, closed) = until_closed(conn, PATIENCE).await;
        let closed = closed.unwrap_or_else(|| panic!("{name}: still open after {PATIENCE:?}"));
        let after = closed - opened;
        assert!(
            after >= Duration::from_millis(350),
            "{name}: closed after {after:?}"
        );
        assert_eq!(got, "", "{name}: no answer, the connection is just closed");
    }
    assert!(
        trickling.await.unwrap(),
        "the trickling head must be cut off too"
    );
    // The server itself is fine.
    assert_eq!(h.get("demo", "/v1/tasks/nope").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    // The head timeout is long, so a close within PATIENCE is the idle one.
    let h = harness(|c| {
        c.idle_timeout_ms = 400;
        c.header_timeout_ms = 10_000;
    })
    .await;
    let mut conn = BufReader::new(TcpStream::connect(&h.addr).await.unwrap());
    conn.get_mut()
        .write_all(get_head("/v1/tasks/nope").as_bytes())
        .await
        .unwrap();
    assert!(one_response(&mut conn).await.starts_with("HTTP/1.1 404"));
    // A request within the idle time keeps the connection, and restarts
    // the idle time.
    tokio::time::sleep(Duration::from_millis(250)).await;
    conn.get_mut()
        .write_all(get_head("/v1/tasks/nope").as_bytes())
        .await
        .unwrap();
    assert!(one_response(&mut conn).await.starts_with("HTTP/1.1 404"));
    let answered = Instant::now();
    let (got, closed) = until_closed(conn.get_mut(), PATIENCE).await;
    let closed = closed.expect("an idle connection must be closed");
    let idle = closed - answered;
    assert!(idle >= Duration::from_millis(350), "closed after {idle:?}");
    assert_eq!(got, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_long_poll_and_an_sse_stream_outlive_the_idle_and_header_timeouts() {
    let h = harness(|c| {
        c.idle_timeout_ms = 200;
        c.header_timeout_ms = 200;
        c.heartbeat_ms = 5_000;
    })
    .await;
    let id = h.create_default().await;
    // An SSE stream with no heartbeat in the test's time: nothing is
    // written after the first message, and it stays open.
    let mut sse = Conn::open(&h.addr).await.unwrap();
    let mut stream = sse
        .stream(
            "GET",
            &format!("/v1/tasks/{id}/events"),
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
        .unwrap()
        .into_body();
    let mut conn = BufReader::new(TcpStream::connect(&h.addr).await.unwrap());
    let t = Instant::now();
    let path = format!("/v1/tasks/{id}/resume?cursor=0&waitMs=1200");
    conn.get_mut()
        .write_all(get_head(&path).as_bytes())
        .await
        .unwrap();
    let answer = one_response(&mut conn).await;
    let held = t.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""mode":"caught-up""#), "{answer}");
    assert!(
        held >= Duration::from_millis(1_100),
        "answered after {held:?}"
    );
    // Once answered, the connection is idle, and closed as such.
    let answered = Instant::now();
    let (_, closed) = until_closed(conn.get_mut(), PATIENCE).await;
    let idle = closed.expect("idle after the answer: closed") - answered;
    assert!(idle >= Duration::from_millis(150), "closed after {idle:?}");
    // The stream is still open: a change arrives on it.
    h.ok_callback(&id, "s", start_ev(1)).await;
    let mut text = String::new();
    while !text.contains("\"version\":1") {
        let frame = tokio::time::timeout(PATIENCE, http_body_util::BodyExt::frame(&mut stream))
            .await
            .expect("the stream is alive")
            .expect("a frame")
            .expect("no error");
        if let Ok(data) = frame.into_data() {
            text.push_str(&String::from_utf8_lossy(&data));
        }
    }
}

/// Sends `head` and the first half of `body`, then nothing more.
async fn send_half_body(addr: &str, head: &str, body: &[u8]) -> TcpStream {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!("{head}content-length: {}\r\n\r\n", body.len());
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body.get(..body.len() / 2).unwrap())
        .await
        .unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_gets_408_after_the_body_timeout_on_every_route_that_reads_one() {
    let h = harness(|c| {
        c.body_timeout_ms = 400;
        c.header_timeout_ms = 10_000;
        c.idle_timeout_ms = 10_000;
    })
    .await;
    let id = h.create_default().await;
    let auth = "host: t\r\nauthorization: Bearer demo\r\ncontent-type: application/json\r\n";
    let create = json!({"ttlMs": 60_000, "maxAttempts": 1}).to_string();
    // The callback is signed for its whole body: only its slowness is wrong.
    let event = start_ev(1).to_string();
    let signed = secret().headers("cb-slow", now_secs(), event.as_bytes());
    let signed: String = signed
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let cases = [
        (format!("POST /v1/tasks HTTP/1.1\r\n{auth}"), create.clone()),
        (
            format!("POST /v1/tasks/{id}/deliveries HTTP/1.1\r\n{auth}idempotency-key: k\r\n"),
            "{}".repeat(20),
        ),
        (
            format!("POST /v1/tasks/{id}/callbacks HTTP/1.1\r\nhost: t\r\n{signed}"),
            event,
        ),
    ];
    for (head, body) in cases {
        let t = Instant::now();
        let mut conn = send_half_body(&h.addr, &head, body.as_bytes()).await;
        let (got, closed) = until_closed(&mut conn, PATIENCE).await;
        let line = head.lines().next().unwrap_or_default().to_string();
        assert!(got.starts_with("HTTP/1.1 408"), "{line}: {got}");
        assert!(got.contains(r#""code":"request-timeout""#), "{line}: {got}");
        assert!(
            got.to_ascii_lowercase().contains("connection: close"),
            "{got}"
        );
        assert!(closed.is_some(), "{line}: closed after the answer");
        assert!(
            t.elapsed() >= Duration::from_millis(350),
            "{line}: {:?}",
            t.elapsed()
        );
    }
    // Trickling the body does not buy it more time either.
    let head = format!("POST /v1/tasks HTTP/1.1\r\n{auth}content-length: 400\r\n\r\n");
    let mut conn = TcpStream::connect(&h.addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    let (mut read, mut write) = conn.into_split();
    let t = Instant::now();
    let trickle = tokio::spawn(async move {
        for _ in 0..60 {
            if write.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut got = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, read.read_to_end(&mut got)).await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        t.elapsed() < Duration::from_millis(2_000),
        "{:?}",
        t.elapsed()
    );
    trickle.abort();
    // The slow callback was never applied.
    let (_, a) = h.resume("demo", &id, "cursor=0").await;
    assert_eq!(a.task().unwrap().version, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_head_gets_431_and_is_closed() {
    let h = harness(|_| {}).await;
    let mut conn = TcpStream::connect(&h.addr).await.unwrap();
    let big = "a".repeat(taskwire_server::serve::MAX_HEAD_BYTES + 1);
    let head = format!("GET /v1/tasks/x HTTP/1.1\r\nhost: t\r\nx-big: {big}\r\n\r\n");
    conn.write_all(head.as_bytes()).await.unwrap();
    let (got, closed) = until_closed(&mut conn, PATIENCE).await;
    assert!(got.starts_with("HTTP/1.1 431"), "{got}");
    assert!(closed.is_some());
    // Just under the limit is served.
    let fits = "a".repeat(taskwire_server::serve::MAX_HEAD_BYTES - 200);
    let r = h
        .req(
            "GET",
            "/v1/tasks/x",
            &[("authorization", "Bearer demo"), ("x-big", &fits)],
            "",
        )
        .await;
    assert_eq!(r.status, 404);
}

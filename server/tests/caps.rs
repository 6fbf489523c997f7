//! The caps of PROTOCOL.md "Limits" and server/README.md "Limits": open
//! connections (also as derived from RLIMIT_NOFILE, on the real binary)
//! and held long-polls and SSE streams, answered 503 with Retry-After past
//! them; on a real server over loopback with small values.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::raw::{get_head, until_closed, PATIENCE};
use common::*;
use serde_json::Value;
use taskwire_server::client::{self, Conn};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_a_new_connection_gets_503_with_retry_after() {
    let h = harness(|c| {
        c.max_connections = Some(3);
        c.header_timeout_ms = 10_000;
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(&h.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = h.get("demo", "/v1/tasks/nope").await;
    assert_eq!(r.status, 503, "{:?}", r.json());
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.header("connection"), Some("close"));
    assert_error(&r, 503, "connection-limit", "connection");
    // A raw client sees the whole answer, then the close.
    let mut raw = TcpStream::connect(&h.addr).await.unwrap();
    raw.write_all(get_head("/v1/tasks/nope").as_bytes())
        .await
        .unwrap();
    let (got, closed) = until_closed(&mut raw, PATIENCE).await;
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(got.ends_with('}'), "the whole body: {got}");
    assert!(closed.is_some());
    // A slot freed is a slot to use.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.get("demo", "/v1/tasks/nope").await.status, 404);
}

/// Waits past the age at which an idle or slow connection may be closed
/// to make room.
async fn age_past_reclaim() {
    tokio::time::sleep(Duration::from_millis(
        u64::from(taskwire_server::serve::RECLAIM_MIN_AGE_MS) + 300,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_slow_head_makes_room_but_a_held_long_poll_keeps_its_slot() {
    let h = harness(|c| {
        c.max_connections = Some(2);
        c.header_timeout_ms = 10_000;
    })
    .await;
    let id = h.create_default().await;
    // Let the create's connection go before filling the two slots.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let held = watch(&h, format!("/v1/tasks/{id}/resume?cursor=0&waitMs=10000"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!held.is_finished(), "the long-poll is held");
    let mut slow = TcpStream::connect(&h.addr).await.unwrap();
    slow.write_all(b"GET /v1/tasks/x HTTP/1.1\r\nx-a: ")
        .await
        .unwrap();
    age_past_reclaim().await;
    // Full, but the slow head has had its chance: it is closed for the
    // newcomer, without an answer.
    assert_eq!(h.get("demo", "/v1/tasks/nope").await.status, 404);
    let (got, closed) = until_closed(&mut slow, PATIENCE).await;
    assert!(closed.is_some() && got.is_empty(), "{got}");
    // (Each request's connection must be gone before the next one.)
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A young slow head is not closed for another: 503.
    let mut young = TcpStream::connect(&h.addr).await.unwrap();
    young
        .write_all(b"GET /v1/tasks/x HTTP/1.1\r\nx-a: ")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.get("demo", "/v1/tasks/nope").await.status, 503);
    let (_, closed) = until_closed(&mut young, Duration::from_millis(100)).await;
    assert!(closed.is_none(), "the young one keeps its slot");
    // Once it is old, it goes; the held long-poll never does.
    age_past_reclaim().await;
    assert_eq!(h.get("demo", "/v1/tasks/nope").await.status, 404);
    assert!(!held.is_finished(), "the held long-poll must keep its slot");
    tokio::time::sleep(Duration::from_millis(200)).await;
    h.ok_callback(&id, "s", start_ev(1)).await;
    let (status, _, body) = held.await.unwrap();
    assert_eq!(
        (status, body["mode"].as_str()),
        (200, Some("delta")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_slow_body_makes_room_too() {
    let h = harness(|c| {
        c.max_connections = Some(1);
        c.body_timeout_ms = 10_000;
    })
    .await;
    let mut slow = TcpStream::connect(&h.addr).await.unwrap();
    let head = "POST /v1/tasks HTTP/1.1\r\nhost: t\r\nauthorization: Bearer demo\r\ncontent-length: 100\r\n\r\n{";
    slow.write_all(head.as_bytes()).await.unwrap();
    age_past_reclaim().await;
    assert_eq!(h.get("demo", "/v1/tasks/nope").await.status, 404);
    let (got, closed) = until_closed(&mut slow, PATIENCE).await;
    assert!(closed.is_some() && got.is_empty(), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_stays_below_rlimit_nofile_and_accept_never_fails() {
    // The real binary under a descriptor limit of 300 (soft and hard, so
    // it cannot raise it): 300 minus the reserve (512) is less than half,
    // so half: 150 connections.
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 300 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_taskwire-server"))
        .args(["--listen", "127.0.0.1:0", "--header-timeout-ms", "10000"])
        .arg("--data")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    // The banner, read on a thread (a server without the limits line
    // would never end it).
    let stdout = child.stdout.take().unwrap();
    let (lines, banner_lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            if lines.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let (mut banner, mut addr) = (String::new(), String::new());
    while !banner.contains("limits:") {
        let Ok(line) = banner_lines.recv_timeout(PATIENCE) else {
            let _ = child.kill();
            panic!("no limits line in the banner: {banner}");
        };
        if let Some(a) = line
            .trim()
            .strip_prefix("taskwire-server listening on http://")
        {
            addr = a.to_string();
        }
        banner.push_str(&line);
        banner.push('\n');
    }
    assert!(
        banner.contains("150 connections (RLIMIT_NOFILE 300)"),
        "{banner}"
    );
    // 200 silent connections: 150 are held, 50 answered 503 at once.
    let mut conns = Vec::new();
    for _ in 0..200 {
        conns.push(TcpStream::connect(&addr).await.unwrap());
    }
    let answers = futures_util::future::join_all(
        conns
            .iter_mut()
            .map(|conn| until_closed(conn, Duration::from_millis(1_500))),
    )
    .await;
    let refused: Vec<&String> = answers
        .iter()
        .filter(|(_, closed)| closed.is_some())
        .map(|(got, _)| got)
        .collect();
    assert_eq!(refused.len(), 50, "{answers:?}");
    for got in refused {
        assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    }
    drop(conns);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        client::request(
            &addr,
            "GET",
            "/v1/tasks/x",
            &[("authorization", "Bearer demo")],
            ""
        )
        .await
        .unwrap()
        .status,
        404
    );
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("Too many open files"), "{stderr}");
    assert!(
        stderr.contains("connection limit (150) reached"),
        "{stderr}"
    );
}

/// Starts a long-poll (or SSE stream) on its own connection; resolves to
/// its status and `Retry-After` once answered (a stream: once its head
/// arrives).
fn watch(h: &Harness, path: String) -> tokio::task::JoinHandle<(u16, Option<String>, Value)> {
    let addr = h.addr.clone();
    tokio::spawn(async move {
        let mut conn = Conn::open(&addr).await.unwrap();
        let headers = [("authorization", "Bearer demo")];
        if path.contains("/events") {
            let res = conn.stream("GET", &path, &headers, "").await.unwrap();
            let retry = res
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            let status = res.status().as_u16();
            let body = http_body_util::BodyExt::collect(res.into_body()).await;
            let body = body.map(|b| serde_json::from_slice(&b.to_bytes()).unwrap_or(Value::Null));
            return (status, retry, body.unwrap_or(Value::Null));
        }
        let r = conn.send("GET", &path, &headers, "").await.unwrap();
        (
            r.status,
            r.header("retry-after").map(String::from),
            r.json(),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_held_watch_cap_answers_503_with_retry_after() {
    // Tenant demo may hold every slot (by default each of two tenants
    // holds at most half).
    let h = harness(|c| {
        c.max_watchers = Some(2);
        c.quotas.max_watches = Some(3);
    })
    .await;
    let id = h.create_default().await;
    let poll = format!("/v1/tasks/{id}/resume?cursor=0&waitMs=10000");
    let first = watch(&h, poll.clone());
    let second = watch(&h, poll.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.state().watchers.held(), 2);
    // A third long-poll, and an SSE stream, are refused (late, not held).
    for path in [poll.clone(), format!("/v1/tasks/{id}/events")] {
        let (status, retry, body) = tokio::time::timeout(PATIENCE, watch(&h, path.clone()))
            .await
            .expect("refused, not held")
            .unwrap();
        assert_eq!(status, 503, "{path}: {body}");
        assert_eq!(retry.as_deref(), Some("2"), "{path}");
        assert_eq!(body["error"]["code"], "watch-limit", "{path}: {body}");
    }
    // A resume that is not held is not counted, so it is answered.
    let (_, a) = h.resume("demo", &id, "cursor=0").await;
    assert_eq!(a.task().unwrap().version, 0);
    // A wake frees both slots; the next watcher is held again.
    h.ok_callback(&id, "s", start_ev(1)).await;
    for held in [first, second] {
        let (status, _, body) = held.await.unwrap();
        assert_eq!((status, body["mode"].as_str()), (200, Some("delta")));
    }
    assert_eq!(h.state().watchers.held(), 0);
    let third = watch(&h, format!("/v1/tasks/{id}/resume?cursor=1&waitMs=10000"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.state().watchers.held(), 1);
    third.abort();
}

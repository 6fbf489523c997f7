//! The limits of PROTOCOL.md "Limits" and server/README.md "Limits": the
//! head, body and idle timeouts, the connection cap (also as derived from
//! RLIMIT_NOFILE) and the held-watch cap, on a real server over loopback
//! with small values so each test takes a second or two.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use taskwire_server::client::{self, Conn};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Longer than any limit set below: a connection still open after this
/// was not cut off by the server.
const PATIENCE: Duration = Duration::from_secs(3);

/// What a raw connection got before the server closed it, and when it
/// closed (`None`: still open after `within`).
async fn until_closed(stream: &mut TcpStream, within: Duration) -> (String, Option<Instant>) {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_still_open) => return (String::from_utf8_lossy(&got).into_owned(), None),
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&got).into_owned(),
                    Some(Instant::now()),
                )
            }
            Ok(Ok(n)) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
        }
    }
}

/// Reads one whole response (head and `content-length` body) off a raw
/// connection.
async fn one_response(stream: &mut BufReader<TcpStream>) -> String {
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        let n = tokio::time::timeout(PATIENCE, stream.read_line(&mut line))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(n > 0, "closed before a whole response: {head}");
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().expect("content-length");
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.expect("body");
    head + &String::from_utf8_lossy(&body)
}

fn get_head(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: t\r\nauthorization: Bearer demo\r\n\r\n")
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_stays_below_rlimit_nofile_and_accept_never_fails() {
    // The real binary under a descriptor limit of 300 (soft and hard, so
    // it cannot raise it): at most 300 - 256 reserved → 150 connections.
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
    let h = harness(|c| c.max_watchers = Some(2)).await;
    let id = h.create_default().await;
    let poll = format!("/v1/tasks/{id}/resume?cursor=0&waitMs=10000");
    let first = watch(&h, poll.clone());
    let second = watch(&h, poll.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.state().watchers.held(), 2);
    // A third long-poll, and an SSE stream, are refused at once.
    for path in [poll.clone(), format!("/v1/tasks/{id}/events")] {
        let (status, retry, body) = tokio::time::timeout(PATIENCE, watch(&h, path.clone()))
            .await
            .expect("refused at once, not held")
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

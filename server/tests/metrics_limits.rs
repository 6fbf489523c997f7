//! `--metrics-listen` is served under the same limits as the API: a
//! request head has `--header-timeout-ms`, and the port has a connection
//! cap of its own (`limits::METRICS_MAX_CONNECTIONS`), carved out of the
//! descriptor budget. Half-sent requests there fill that cap, not the
//! server's descriptors, and the API keeps answering.

mod common;

use std::time::{Duration, Instant};

use common::raw::{get_head, one_response, until_closed, PATIENCE};
use common::*;
use taskwire_server::limits::METRICS_MAX_CONNECTIONS;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const HEADER_TIMEOUT_MS: u64 = 1_500;

/// A connection that sends half a request head and then nothing.
async fn half_sent_head(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nhost: t\r\nx-slow: ")
        .await
        .unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_heads_on_the_metrics_port_fill_its_own_cap_and_time_out_while_the_api_answers() {
    let h = harness(|c| {
        c.metrics_listen = Some("127.0.0.1:0".into());
        c.header_timeout_ms = HEADER_TIMEOUT_MS;
        c.idle_timeout_ms = 60_000;
    })
    .await;
    let metrics = h.metrics_addr();
    let limits = &h.state().limits;
    assert_eq!(
        limits.for_metrics().max_connections,
        METRICS_MAX_CONNECTIONS
    );

    // Every slot of the metrics port held by a half-sent head.
    let opened = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..METRICS_MAX_CONNECTIONS {
        slow.push(half_sent_head(&metrics).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    // One more is answered 503 at once: none of the slow heads is old
    // enough to be closed for it.
    let mut over = TcpStream::connect(&metrics).await.unwrap();
    over.write_all(get_head("/metrics").as_bytes())
        .await
        .unwrap();
    let answer = one_response(&mut BufReader::new(over)).await;
    assert!(
        answer.starts_with("HTTP/1.1 503"),
        "past the metrics port's cap: {answer}"
    );
    assert!(answer.contains("connection-limit"), "{answer}");

    // The API does not share that cap: it answers as usual.
    for _ in 0..10 {
        let t = Instant::now();
        let id = h.create_default().await;
        assert_eq!(h.get("demo", &format!("/v1/tasks/{id}")).await.status, 200);
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }

    // The slow heads are cut off after the header timeout, unanswered.
    for (i, conn) in slow.iter_mut().enumerate() {
        let (got, closed) = until_closed(conn, PATIENCE).await;
        let closed = closed.unwrap_or_else(|| panic!("slow head {i}: still open"));
        let after = closed - opened;
        assert!(
            after >= Duration::from_millis(HEADER_TIMEOUT_MS - 100),
            "slow head {i}: closed after {after:?}"
        );
        assert_eq!(got, "", "slow head {i}: closed without an answer");
    }

    // And the port serves scrapes again.
    let mut scrape = TcpStream::connect(&metrics).await.unwrap();
    scrape
        .write_all(get_head("/metrics").as_bytes())
        .await
        .unwrap();
    let answer = one_response(&mut BufReader::new(scrape)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("taskwire_held_long_polls"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_metrics_cap_is_refused_and_the_api_keeps_its_connections() {
    let h = harness(|c| {
        c.metrics_listen = Some("127.0.0.1:0".into());
        c.header_timeout_ms = 10_000;
    })
    .await;
    let metrics = h.metrics_addr();
    // Four times the cap: the metrics port holds its cap and closes or
    // refuses the rest; none of them takes an API connection's room.
    let mut flood = Vec::new();
    for _ in 0..4 * METRICS_MAX_CONNECTIONS {
        flood.push(half_sent_head(&metrics).await);
    }
    // A refused one gets its 503 once its head has had 0.5 s to arrive.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let mut closed = 0;
    for conn in &mut flood {
        if until_closed(conn, Duration::from_millis(5))
            .await
            .1
            .is_some()
        {
            closed += 1;
        }
    }
    assert!(
        closed >= 3 * METRICS_MAX_CONNECTIONS - 8,
        "only {closed} of {} connections past the cap were closed",
        flood.len()
    );
    let t = Instant::now();
    let id = h.create_default().await;
    assert_eq!(h.get("demo", &format!("/v1/tasks/{id}")).await.status, 200);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

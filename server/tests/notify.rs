//! The notify sender against real receivers on loopback: a receiver that
//! hangs, or one post that hangs, never holds back the other posts, and
//! the hung ones are retried.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

/// `webhook-id` → when each post arrived.
type Seen = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

/// A receiver that answers 200 at once, except for posts whose
/// `webhook-id` `hangs` says, which it never answers.
async fn receiver(hangs: impl Fn(&str) -> bool + Send + Sync + 'static) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let seen2 = Arc::clone(&seen);
    let hangs = Arc::new(hangs);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = Arc::clone(&seen2);
            let hangs = Arc::clone(&hangs);
            async move {
                let id = headers["webhook-id"].to_str().unwrap().to_string();
                seen.lock()
                    .unwrap()
                    .entry(id.clone())
                    .or_default()
                    .push(Instant::now());
                if hangs(&id) {
                    std::future::pending::<()>().await;
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

/// A receiver that accepts connections and reads what comes, and never
/// answers anything: what it saw (`webhook-id` → arrivals), and the most
/// connections it held open at once.
async fn hung_receiver() -> (String, Seen, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let open = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (seen2, most2) = (Arc::clone(&seen), Arc::clone(&most));
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let (seen, open, most) = (Arc::clone(&seen2), Arc::clone(&open), Arc::clone(&most2));
            tokio::spawn(async move {
                let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                let mut recorded = false;
                // Until the sender gives up and closes the connection.
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    head.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&head).to_string();
                    let lower = text.to_ascii_lowercase();
                    if let (false, Some(at)) = (recorded, lower.find("webhook-id: ")) {
                        if let Some(end) = text[at..].find("\r\n") {
                            let id = text[at + 12..at + end].to_string();
                            seen.lock()
                                .unwrap()
                                .entry(id)
                                .or_default()
                                .push(Instant::now());
                            recorded = true;
                        }
                    }
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (url, seen, most)
}

async fn wait_until(deadline: Duration, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() && t0.elapsed() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hung_post_does_not_hold_back_the_others_to_the_same_receiver() {
    let hung: Arc<Mutex<Vec<String>>> = Arc::default();
    let hung2 = Arc::clone(&hung);
    let (url, seen) = receiver(move |id| hung2.lock().unwrap().iter().any(|h| h == id)).await;
    let h = harness(|c| {
        c.notify_url = Some(url);
        c.notify_timeout_ms = 500;
    })
    .await;
    // The first two notifications hang at the receiver.
    let mut keys = Vec::new();
    for i in 0..20 {
        if i < 2 {
            // Known to the receiver before the sender can post it.
            let id = h.create_default().await;
            let key = format!("{id}:succeeded:2");
            hung.lock().unwrap().push(key.clone());
            h.ok_callback(&id, "s", start_ev(1)).await;
            h.ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12")).await;
            keys.push(key);
        } else {
            keys.push(h.succeeded_task("demo").await);
        }
    }
    let committed = Instant::now();
    let answered = &keys[2..];
    wait_until(Duration::from_secs(5), || {
        let seen = seen.lock().unwrap();
        answered.iter().all(|k| seen.contains_key(k))
    })
    .await;
    let took = committed.elapsed();
    assert!(
        took < Duration::from_millis(1500),
        "the 18 answered posts took {took:?} behind the hung ones"
    );
    // The hung ones time out and are retried (0.5 s backoff after a 0.5 s
    // timeout).
    wait_until(Duration::from_secs(5), || {
        let seen = seen.lock().unwrap();
        keys[..2]
            .iter()
            .all(|k| seen.get(k).map_or(0, Vec::len) >= 2)
    })
    .await;
    let seen = seen.lock().unwrap();
    for k in &keys[..2] {
        assert!(
            seen.get(k).map_or(0, Vec::len) >= 2,
            "{k} retried: {seen:?}"
        );
    }
    for k in answered {
        assert_eq!(seen[k].len(), 1, "{k} answered 200 once, posted once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_receiver_does_not_hold_back_another_tenants_receiver() {
    let (hung_url, hung_seen, most_open) = hung_receiver().await;
    let (url, seen) = receiver(|_| false).await;
    let h = harness(|c| {
        c.tenant_notify_urls = vec![format!("demo={hung_url}"), format!("other={url}")];
        c.notify_timeout_ms = 400;
        c.notify_in_flight = 4;
    })
    .await;
    let mut stuck = Vec::new();
    let mut answered = Vec::new();
    for _ in 0..20 {
        stuck.push(h.succeeded_task("demo").await);
        answered.push(h.succeeded_task("other").await);
    }
    let committed = Instant::now();
    wait_until(Duration::from_secs(5), || {
        let seen = seen.lock().unwrap();
        answered.iter().all(|k| seen.contains_key(k))
    })
    .await;
    let took = committed.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "tenant other's 20 posts took {took:?} behind the hung receiver"
    );
    // Every one of the hung receiver's posts is tried, and tried again.
    wait_until(Duration::from_secs(8), || {
        let seen = hung_seen.lock().unwrap();
        stuck.iter().all(|k| seen.get(k).map_or(0, Vec::len) >= 2)
    })
    .await;
    {
        let hung = hung_seen.lock().unwrap();
        for k in &stuck {
            assert!(hung.get(k).map_or(0, Vec::len) >= 2, "{k}: {hung:?}");
        }
        let seen = seen.lock().unwrap();
        for k in &answered {
            assert_eq!(seen[k].len(), 1, "{k}");
        }
        assert!(stuck.iter().all(|k| !seen.contains_key(k)));
        assert!(answered.iter().all(|k| !hung.contains_key(k)));
    }
    // Never more than --notify-in-flight posts held by the hung receiver.
    let most = most_open.load(Ordering::SeqCst);
    assert!((1..=4).contains(&most), "{most} connections at once");
    // The feed is unchanged: 20 each, in seq order.
    for token in ["demo", "other"] {
        let feed = h.get(token, "/v1/notifications").await.json();
        let seqs: Vec<u64> = feed["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs.len(), 20);
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    }
}

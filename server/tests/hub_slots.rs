//! The hub keeps one slot per watched task and must remove it when the
//! last waiter goes, however the waiters go: many at once on several
//! threads (woken by one commit), while another subscribes, through
//! long-polls and SSE streams over real HTTP. A slot left behind holds the
//! task id, its channel, its last view and up to `retention` entries for
//! the life of the process (issue 16, finding 11).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use taskwire_core::{create_task, CreateTask, Event, Millis, TaskView};
use taskwire_server::client::{self, Conn};
use taskwire_server::hub::{Hub, Wake};
use taskwire_server::store::Change;

fn view(id: &str) -> TaskView {
    create_task(&CreateTask::new(id, 0.0, 1e9, 1))
        .expect("a valid task")
        .view()
        .clone()
}

fn start(view: &mut TaskView) -> Change {
    let event = Event::Start {
        at_ms: Millis::new(1.0, "atMs").expect("finite"),
        worker: "w".into(),
        attempt: None,
        lease_ms: None,
        plan: None,
    };
    let entry = view
        .step(&event)
        .entry
        .expect("start changes a queued task");
    Change {
        view: view.clone(),
        entry,
        batch: None,
    }
}

/// Rounds of 128 waiters of one task woken by one publish: they wake and
/// drop their subscriptions at the same time on four worker threads,
/// while a latecomer subscribes and leaves. On the code before the fix
/// (the last-waiter check counted receivers that were about to be
/// dropped, outside the lock) some rounds left their slot behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiters_woken_together_leave_no_slot_behind() {
    const ROUNDS: usize = 1_000;
    const WAITERS: usize = 128;
    let hub = Hub::new(8);
    let mut leaked = Vec::new();
    for round in 0..ROUNDS {
        let id = format!("t{round}");
        let mut v = view(&id);
        let change = start(&mut v);
        let mut waiters = Vec::with_capacity(WAITERS + 1);
        for _ in 0..WAITERS {
            let mut sub = hub.subscribe(&id, "tenant");
            waiters.push(tokio::spawn(async move { sub.wait_past(0).await }));
        }
        // A watcher arriving while the others leave (a long-poll that
        // subscribes just as the wake goes out; it would then read the
        // store, and leaves).
        let late = {
            let hub = Arc::clone(&hub);
            let id = id.clone();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                let sub = hub.subscribe(&id, "tenant");
                tokio::task::yield_now().await;
                drop(sub);
            })
        };
        hub.publish(&[change]);
        for w in waiters {
            assert!(matches!(w.await.expect("waiter"), Wake::Changed(_)));
        }
        late.await.expect("late watcher");
        // Each round watches its own task: a slot left behind adds one.
        if hub.watched() > leaked.len() {
            leaked.push(round);
        }
    }
    assert!(
        leaked.is_empty(),
        "{} of {ROUNDS} rounds left their slot behind (first: {:?}); watched now: {}",
        leaked.len(),
        &leaked[..leaked.len().min(5)],
        hub.watched()
    );
}

/// Waits until the server's hub watches nothing; false after `within`.
async fn hub_drains(h: &Harness, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if h.state().hub.watched() == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.state().hub.watched() == 0
}

/// The HTTP paths release their slots: rounds of tasks each watched by
/// 20 long-polls on fresh connections and one SSE stream, all woken by one
/// callback; the streams follow their task to its end. Afterwards the hub
/// watches nothing. (In a debug build the handlers' drops are too spread
/// out in time to hit the race above reliably, even with 200 watchers of
/// a task; the release soak, `taskwire-load soak`, showed it over HTTP.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn long_polls_and_streams_woken_by_one_callback_leave_no_slot() {
    const ROUNDS: usize = 3;
    const TASKS: usize = 10;
    const POLLS: usize = 20;
    let h = harness(|_| {}).await;
    let mut rounds_leaking = Vec::new();
    for round in 0..ROUNDS {
        let mut ids = Vec::with_capacity(TASKS);
        for _ in 0..TASKS {
            let id = h
                .create(
                    "demo",
                    serde_json::json!({"ttlMs": 3_600_000, "maxAttempts": 1}),
                )
                .await;
            h.ok_callback(&id, "s", start_ev(1)).await;
            ids.push(id);
        }
        let mut polls = Vec::with_capacity(TASKS * POLLS);
        let mut streams = Vec::with_capacity(TASKS);
        for id in &ids {
            for _ in 0..POLLS {
                let addr = h.addr.clone();
                let path = format!("/v1/tasks/{id}/resume?cursor=1&waitMs=10000");
                polls.push(tokio::spawn(async move {
                    client::request(&addr, "GET", &path, &[("authorization", "Bearer demo")], "")
                        .await
                        .map(|r| r.json()["mode"].as_str().unwrap_or("").to_string())
                }));
            }
            let addr = h.addr.clone();
            let path = format!("/v1/tasks/{id}/events?cursor=1");
            streams.push(tokio::spawn(async move {
                use http_body_util::BodyExt;
                let mut conn = Conn::open(&addr).await?;
                let res = conn
                    .stream("GET", &path, &[("authorization", "Bearer demo")], "")
                    .await?;
                // The whole stream: it ends after the terminal message.
                let body = res
                    .into_body()
                    .collect()
                    .await
                    .map_err(std::io::Error::other)?;
                Ok::<_, std::io::Error>(String::from_utf8_lossy(&body.to_bytes()).into_owned())
            }));
        }
        // Every request held (they were answered caught-up otherwise).
        tokio::time::sleep(Duration::from_millis(500)).await;
        for id in &ids {
            h.ok_callback(id, "p", progress_ev(2, 50)).await;
        }
        for p in polls {
            assert_eq!(p.await.expect("poll task").expect("poll"), "delta");
        }
        for id in &ids {
            h.ok_callback(id, "ok", succeed_ev(3, "sha256:aa")).await;
        }
        for s in streams {
            let text = s.await.expect("stream task").expect("stream");
            assert!(text.contains("\"succeeded\""), "{text}");
        }
        if !hub_drains(&h, Duration::from_secs(2)).await {
            rounds_leaking.push((round, h.state().hub.watched()));
        }
    }
    assert!(
        rounds_leaking.is_empty(),
        "slots left after rounds (round, watched): {rounds_leaking:?}"
    );
}

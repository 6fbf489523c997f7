//! `GET /metrics` on `--metrics-listen` (server/README.md "Metrics"): a
//! known workload over real HTTP against a real SQLite file, then a
//! scrape parsed from the Prometheus text format and checked to the
//! count; and the API's own address never serves it.

mod common;

use std::time::Duration;

use common::scrape::{scrape, scrape_until};
use common::*;
use http_body_util::BodyExt;
use serde_json::json;
use taskwire_server::client::{self, Conn};
use taskwire_server::{start, Config};

fn with_metrics(c: &mut Config) {
    c.metrics_listen = Some("127.0.0.1:0".into());
    c.tokens.push("third=third".into());
    c.quotas.overrides = vec![
        "demo:max-watches=2".into(),
        "other:max-open-tasks=1".into(),
        "third:create-rate=0.01,create-burst=1".into(),
    ];
}

const LONG: &str = r#"{"ttlMs":3600000,"maxAttempts":3}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_after_a_known_workload_counts_it_exactly() {
    let h = harness(with_metrics).await;
    let metrics = h.metrics_addr();

    // Creates: 3 for demo (one expires at once), 1 for other and third
    // each, then one each past their quota.
    let a = h
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 3}))
        .await;
    let b = h
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 3}))
        .await;
    let x = h
        .create("other", json!({"ttlMs": 3_600_000, "maxAttempts": 3}))
        .await;
    let _z = h
        .create("third", json!({"ttlMs": 3_600_000, "maxAttempts": 3}))
        .await;
    let open_refused = h.post("other", "/v1/tasks", &[], LONG).await;
    assert_error(&open_refused, 429, "open-task-quota", "max-open-tasks");
    let rate_refused = h.post("third", "/v1/tasks", &[], LONG).await;
    assert_error(&rate_refused, 429, "create-rate-limited", "create-rate");
    let _e = h
        .create("demo", json!({"ttlMs": 100, "maxAttempts": 3}))
        .await;

    // Callbacks with known reasons, one of them a duplicate.
    let started = h.ok_callback(&a, "s", start_ev(1)).await;
    assert_eq!(started["reason"], "started");
    let again = h.ok_callback(&a, "s", start_ev(1)).await;
    assert_eq!(again["reason"], "duplicate-callback");
    let progress = h.ok_callback(&a, "p", progress_ev(2, 50)).await;
    assert_eq!(progress["reason"], "progress");

    // Held: 2 long-polls of demo on b (its whole quota), 1 SSE stream of
    // other on x; a third demo long-poll is refused.
    let polls: Vec<_> = (0..2)
        .map(|_| {
            let addr = h.addr.clone();
            let b = b.clone();
            tokio::spawn(async move {
                client::request(
                    &addr,
                    "GET",
                    &format!("/v1/tasks/{b}/resume?cursor=0&waitMs=20000"),
                    &[("authorization", "Bearer demo")],
                    "",
                )
                .await
                .unwrap()
            })
        })
        .collect();
    let mut conn = Conn::open(&h.addr).await.unwrap();
    let mut sse = conn
        .stream(
            "GET",
            &format!("/v1/tasks/{x}/events?cursor=0"),
            &[("authorization", "Bearer other")],
            "",
        )
        .await
        .unwrap();
    assert_eq!(sse.status(), 200);
    // The stream's first event (the task as it is) arrives before it waits.
    let first = sse.body_mut().frame().await.unwrap().unwrap();
    assert!(first.data_ref().is_some());
    let held = scrape_until(&metrics, |s| {
        s.get("taskwire_held_long_polls") == 2.0 && s.get("taskwire_held_event_streams") == 1.0
    })
    .await;
    assert_eq!(held.get("taskwire_wake_latency_seconds_count"), 0.0);
    let watch_refused = h
        .get(
            "demo",
            &format!("/v1/tasks/{b}/resume?cursor=0&waitMs=20000"),
        )
        .await;
    assert_error(&watch_refused, 429, "watch-quota", "max-watches");

    // One commit on each watched task wakes the 3 held watchers. (Let the
    // watchers reach their wait first: the gauges count them just before.)
    tokio::time::sleep(Duration::from_millis(200)).await;
    let b_started = h.ok_callback(&b, "s", start_ev(3)).await;
    assert_eq!(b_started["reason"], "started");
    let x_started = h.ok_callback(&x, "s", start_ev(3)).await;
    assert_eq!(x_started["reason"], "started");
    for poll in polls {
        let woke = poll.await.unwrap();
        assert_eq!(woke.status, 200);
        assert_eq!(woke.json()["task"]["state"], "running", "{:?}", woke.json());
    }

    // The sweeper expires the short task.
    let s = scrape_until(&metrics, |s| {
        s.has("taskwire_sweeper_moved_tasks_total{sweep=\"ttl\"}")
            && s.get("taskwire_held_long_polls") == 0.0
            && s.get("taskwire_wake_latency_seconds_count") == 3.0
    })
    .await;

    // Callbacks by reason: exactly what was posted.
    assert_eq!(s.get("taskwire_callbacks_total{reason=\"started\"}"), 3.0);
    assert_eq!(
        s.get("taskwire_callbacks_total{reason=\"duplicate-callback\"}"),
        1.0
    );
    assert_eq!(s.get("taskwire_callbacks_total{reason=\"progress\"}"), 1.0);
    assert_eq!(s.get("taskwire_callbacks_total{reason=\"succeeded\"}"), 0.0);
    assert_eq!(s.get("taskwire_callback_signature_rejections_total"), 0.0);

    // Held watches: the SSE stream still open, the long-polls answered.
    assert_eq!(s.get("taskwire_held_long_polls"), 0.0);
    assert_eq!(s.get("taskwire_held_event_streams"), 1.0);
    assert_eq!(s.get("taskwire_wake_latency_seconds_count"), 3.0);
    let wake_sum = s.get("taskwire_wake_latency_seconds_sum");
    assert!(wake_sum > 0.0 && wake_sum < 3.0, "wake sum {wake_sum}");

    // Per-tenant 429s, one of each code where it happened, none elsewhere.
    let refused = |tenant: &str, code: &str| {
        s.get(&format!(
            "taskwire_quota_refusals_total{{tenant=\"{tenant}\",code=\"{code}\"}}"
        ))
    };
    assert_eq!(refused("demo", "watch-quota"), 1.0);
    assert_eq!(refused("other", "open-task-quota"), 1.0);
    assert_eq!(refused("third", "create-rate-limited"), 1.0);
    assert_eq!(refused("demo", "create-rate-limited"), 0.0);
    assert_eq!(refused("demo", "open-task-quota"), 0.0);
    assert_eq!(refused("other", "watch-quota"), 0.0);

    // The sweeper: ticks ran, the TTL sweep expired exactly one task.
    assert_eq!(
        s.get("taskwire_sweeper_moved_tasks_total{sweep=\"ttl\"}"),
        1.0
    );
    assert!(!s.has("taskwire_sweeper_moved_tasks_total{sweep=\"lifecycle\"}"));
    assert!(s.get("taskwire_sweeper_runs_total") >= 1.0);

    // Group commits: every create and judged callback was committed (the
    // sweeper's ticks add writes of their own).
    let writes = s.get("taskwire_commit_batch_writes_sum");
    assert!(writes >= 5.0 + 5.0, "{writes} writes");
    let commits = s.get("taskwire_commit_duration_seconds_count");
    assert_eq!(s.get("taskwire_commit_batch_writes_count"), commits);
    assert_eq!(
        s.get("taskwire_commit_batch_writes_bucket{le=\"+Inf\"}"),
        commits
    );

    // No notify receiver, no PostgreSQL: those series are absent.
    assert!(!s.has("taskwire_outbox_undelivered_notifications"));
    assert!(!s.has("taskwire_pg_pool_connections"));
    drop(sse);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_are_never_on_the_api_address() {
    let h = harness(with_metrics).await;
    let on_api = h.get("demo", "/metrics").await;
    assert_eq!(on_api.status, 404);
    let bare = h.req("GET", "/metrics", &[], "").await;
    assert_eq!(bare.status, 404);
    // And the metrics address serves nothing of the API.
    let metrics = h.metrics_addr();
    let api_there = client::request(&metrics, "GET", "/v1/tasks/x", &[], "")
        .await
        .unwrap();
    assert_eq!(api_there.status, 404);
    scrape(&metrics).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_nothing_listens_and_a_bad_address_is_refused() {
    let h = harness(|_| {}).await;
    assert!(h.server.as_ref().unwrap().metrics_addr.is_none());
    for bad in ["nonsense", "127.0.0.1:99999", "256.0.0.1:9464"] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(dir.path());
        config.metrics_listen = Some(bad.into());
        let err = start(config).await.err().expect("refused");
        assert!(err.starts_with("--metrics-listen"), "{bad}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.listen = "127.0.0.1:18391".into();
    config.metrics_listen = Some("127.0.0.1:18391".into());
    let err = start(config).await.err().expect("refused");
    assert!(err.contains("must differ from --listen"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_backlog_and_webhook_attempts_are_counted() {
    // A receiver that refuses every post: the notification stays due.
    let refuser = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", refuser.local_addr().unwrap());
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let Ok((mut sock, _)) = refuser.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = sock.read(&mut buf).await;
                let _ = sock
                    .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    let h = harness(|c| {
        with_metrics(c);
        c.notify_url = Some(url);
    })
    .await;
    let metrics = h.metrics_addr();
    let idle = scrape(&metrics).await;
    assert_eq!(idle.get("taskwire_outbox_undelivered_notifications"), 0.0);
    assert_eq!(
        idle.get("taskwire_outbox_oldest_undelivered_age_seconds"),
        0.0
    );

    let a = h.create_default().await;
    h.ok_callback(&a, "s", start_ev(1)).await;
    h.ok_callback(&a, "ok", succeed_ev(2, "h")).await;
    let s = scrape_until(&metrics, |s| {
        s.has("taskwire_webhook_attempts_total{outcome=\"failed\"}")
            && s.get("taskwire_outbox_oldest_undelivered_age_seconds") > 0.0
    })
    .await;
    assert_eq!(s.get("taskwire_outbox_undelivered_notifications"), 1.0);
    assert!(s.get("taskwire_webhook_attempts_total{outcome=\"failed\"}") >= 1.0);
    assert!(!s.has("taskwire_webhook_attempts_total{outcome=\"delivered\"}"));
    assert_eq!(s.get("taskwire_webhook_delivery_lag_seconds_count"), 0.0);
}

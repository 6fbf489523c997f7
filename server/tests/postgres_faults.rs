//! Bad rows and an unavailable database on PostgreSQL
//! (`--data postgres://…`), with several instances: a due row or an outbox
//! row that does not parse is quarantined and reported once (by one
//! instance) and every other row goes on; a read-only database or killed
//! connections answer 503 `storage-unavailable`, never 500. Each test gets
//! a fresh database on a throwaway server (tests/common/pg.rs); without
//! PostgreSQL binaries they skip.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use taskwire_server::Config;

/// Instances on one fresh database (`None`: no PostgreSQL, skip).
async fn cluster(n: usize, tweak: impl Fn(&mut Config)) -> Option<(Vec<Harness>, String)> {
    let url = pg::database().await?;
    let mut instances = Vec::new();
    for _ in 0..n {
        instances.push(
            harness(|c| {
                c.data = url.clone().into();
                tweak(c);
            })
            .await,
        );
    }
    Some((instances, url))
}

async fn state_of(h: &Harness, id: &str) -> (String, u64) {
    let t = h.get("demo", &format!("/v1/tasks/{id}")).await.json();
    (
        t["state"].as_str().unwrap_or("?").to_string(),
        t["version"].as_u64().unwrap_or(u64::MAX),
    )
}

fn quarantined_rows(hs: &[Harness]) -> u64 {
    hs.iter()
        .map(|h| h.state().stats.totals().quarantined_rows)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_due_rows_are_quarantined_once_across_instances_and_the_rest_expire() {
    let Some((hs, url)) = cluster(2, |c| c.sweep_ms = 20).await else {
        return;
    };
    let db = pg::admin(&url).await;
    let unparseable = hs[0]
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
        .await;
    let wrong_id = hs[0]
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
        .await;
    let clash = hs[1]
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
        .await;
    let good = hs[1]
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
        .await;
    let bystander = hs[0]
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
        .await;
    db.batch_execute(&format!(
        "BEGIN;
         UPDATE tasks SET view = 'not json' WHERE id = '{unparseable}';
         UPDATE tasks SET view = (SELECT view FROM tasks WHERE id = '{bystander}')
             WHERE id = '{wrong_id}';
         INSERT INTO history (task_id, version, event) VALUES ('{clash}', 1, '{{}}');
         UPDATE tasks SET expires_at_ms = 0
             WHERE id IN ('{unparseable}', '{wrong_id}', '{clash}', '{good}');
         COMMIT;"
    ))
    .await
    .unwrap();
    let short = hs[0]
        .create("demo", json!({"ttlMs": 200, "maxAttempts": 1}))
        .await;
    let t0 = Instant::now();
    while state_of(&hs[1], &short).await.0 != "expired" && t0.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(state_of(&hs[1], &short).await, ("expired".into(), 1));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // Swept in the same batch as the constraint-breaking row.
    assert_eq!(state_of(&hs[0], &good).await, ("expired".into(), 1));
    // Both sweepers keep ticking: each bad row is reported once in all.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(quarantined_rows(&hs), 3);
    let rows = db
        .query(
            "SELECT source, row_key, error FROM quarantine ORDER BY row_key",
            &[],
        )
        .await
        .unwrap();
    let mut keys: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
    let mut want = vec![unparseable.clone(), wrong_id.clone(), clash.clone()];
    keys.sort();
    want.sort();
    assert_eq!(keys, want);
    for r in &rows {
        let (source, key, error): (String, String, String) = (r.get(0), r.get(1), r.get(2));
        assert_eq!(source, "tasks");
        let why = if key == unparseable {
            "tasks.view"
        } else if key == wrong_id {
            "names task"
        } else {
            "23505"
        };
        assert!(
            error.starts_with("ttl sweep: ") && error.contains(why),
            "{error}"
        );
    }
    // The rows are kept as they were.
    let view: String = db
        .query_one("SELECT view FROM tasks WHERE id = $1", &[&unparseable])
        .await
        .unwrap()
        .get(0);
    assert_eq!(view, "not json");
    assert_eq!(state_of(&hs[1], &bystander).await, ("queued".into(), 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparseable_outbox_row_is_quarantined_and_the_others_are_posted() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = Arc::clone(&seen2);
            async move {
                seen.lock()
                    .unwrap()
                    .push(headers["webhook-id"].to_str().unwrap().to_string());
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // Ten notifications, committed by an instance with no receiver.
    let Some((quiet, url)) = cluster(1, |_| {}).await else {
        return;
    };
    let mut keys = Vec::new();
    for _ in 0..10 {
        let id = quiet[0].create_default().await;
        quiet[0].ok_callback(&id, "s", start_ev(1)).await;
        quiet[0]
            .ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12"))
            .await;
        keys.push(format!("{id}:succeeded:2"));
    }
    let db = pg::admin(&url).await;
    let bad: i64 = db
        .query_one("SELECT min(seq) FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    db.execute("UPDATE outbox SET state = 'bogus' WHERE seq = $1", &[&bad])
        .await
        .unwrap();
    // Two instances with the receiver.
    let mut senders = Vec::new();
    for _ in 0..2 {
        senders.push(
            harness(|c| {
                c.data = url.clone().into();
                c.notify_url = Some(hook.clone());
            })
            .await,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().len() < 9 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut posted = seen.lock().unwrap().clone();
    posted.sort();
    let mut want = keys[1..].to_vec();
    want.sort();
    assert_eq!(posted, want);
    assert_eq!(quarantined_rows(&senders), 1);
    let row = db
        .query_one(
            "SELECT row_key, error FROM quarantine WHERE source = 'outbox'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), bad.to_string());
    assert!(row.get::<_, String>(1).contains("outbox.state"));
    let (state, sent): (String, bool) = {
        let r = db
            .query_one("SELECT state, sent FROM outbox WHERE seq = $1", &[&bad])
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((state.as_str(), sent), ("bogus", false));
}

/// Ends every other session on the database, as an administrator (or a
/// failover) would: the pooled connections and the LISTEN connection.
async fn terminate_sessions(db: &tokio_postgres::Client) {
    db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
        &[],
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_database_and_killed_sessions_answer_503_storage_unavailable() {
    let Some((hs, url)) = cluster(1, |_| {}).await else {
        return;
    };
    let h = &hs[0];
    let before = h.create_default().await;
    let db = pg::admin(&url).await;
    db.batch_execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$")
        .await
        .unwrap();
    terminate_sessions(&db).await;
    // Every write is refused as unavailable (the first ones on a killed
    // connection, then read-only), never as a bug.
    let mut read_only = 0;
    for _ in 0..20 {
        let r = h
            .post(
                "demo",
                "/v1/tasks",
                &[],
                r#"{"ttlMs":60000,"maxAttempts":1}"#,
            )
            .await;
        assert_error(&r, 503, "storage-unavailable", "postgres");
        assert_eq!(r.header("retry-after"), Some("5"));
        if r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("25006")
        {
            read_only += 1;
        }
    }
    assert!(read_only > 0, "no write reached a read-only session");
    assert_eq!(
        h.get("demo", &format!("/v1/tasks/{before}")).await.status,
        200
    );
    // Writable again: writes go through once the sessions are renewed.
    db.batch_execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$")
        .await
        .unwrap();
    terminate_sessions(&db).await;
    let mut created = false;
    for _ in 0..40 {
        let r = h
            .post(
                "demo",
                "/v1/tasks",
                &[],
                r#"{"ttlMs":60000,"maxAttempts":1}"#,
            )
            .await;
        if r.status == 201 {
            created = true;
            break;
        }
        assert_error(&r, 503, "storage-unavailable", "postgres");
    }
    assert!(created);
}

//! Bad rows and a failing disk, on a real SQLite file: one row that does
//! not parse must not stop the TTL sweeper or the notify sender for every
//! other row (it is quarantined and reported once), and a full, locked or
//! read-only store answers 503 `storage-unavailable`, not 500 `internal`.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::json;
use taskwire_server::client;

fn db(dir: &Path) -> Connection {
    let conn = Connection::open(dir.join("taskwire.sqlite3")).expect("open the server's file");
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn
}

fn view_text(conn: &Connection, id: &str) -> String {
    conn.query_row("SELECT view FROM tasks WHERE id = ?1", [id], |r| r.get(0))
        .unwrap()
}

fn quarantine_rows(conn: &Connection) -> Vec<(String, String, String)> {
    let mut stmt = conn
        .prepare("SELECT source, CAST(row_key AS TEXT), error FROM quarantine ORDER BY error")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

async fn get(addr: &str, path: &str) -> client::Reply {
    client::request(addr, "GET", path, &[("authorization", "Bearer demo")], "")
        .await
        .expect("get")
}

async fn create_ok(addr: &str, ttl_ms: u64) -> String {
    let r = create(addr, json!({"ttlMs": ttl_ms, "maxAttempts": 1})).await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    r.json()["id"].as_str().unwrap().to_string()
}

async fn state_of(addr: &str, id: &str) -> (String, u64) {
    let t = get(addr, &format!("/v1/tasks/{id}")).await.json();
    (
        t["state"].as_str().unwrap_or("?").to_string(),
        t["version"].as_u64().unwrap_or(u64::MAX),
    )
}

/// `id`'s state once it is expired, or when `limit` has passed.
async fn state_once_expired(addr: &str, id: &str, limit: Duration) -> (String, u64) {
    let t0 = Instant::now();
    loop {
        let state = state_of(addr, id).await;
        if state.0 == "expired" || t0.elapsed() >= limit {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_due_rows_are_quarantined_once_and_a_short_ttl_task_still_expires() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn_logged(server_command(dir.path(), &["--sweep-ms", "50"]));
    let addr = server.addr.clone();
    let unparseable = create_ok(&addr, 3_600_000).await;
    let wrong_id = create_ok(&addr, 3_600_000).await;
    let clash = create_ok(&addr, 3_600_000).await;
    let good_with_clash = create_ok(&addr, 3_600_000).await;
    let bystander = create_ok(&addr, 3_600_000).await;
    let conn = db(dir.path());
    let original = view_text(&conn, &wrong_id);
    // Not JSON; a view copied from another task; a history entry already
    // at the version an expiry would write (a constraint the write
    // breaks). All due now, with one healthy task due in the same sweep.
    conn.execute(
        "UPDATE tasks SET view = '{\"id\": \"truncated', expires_at_ms = 0 WHERE id = ?1",
        [&unparseable],
    )
    .unwrap();
    conn.execute(
        "UPDATE tasks SET view = (SELECT view FROM tasks WHERE id = ?2), expires_at_ms = 0
         WHERE id = ?1",
        [&wrong_id, &bystander],
    )
    .unwrap();
    conn.execute_batch("BEGIN").unwrap();
    conn.execute(
        "INSERT INTO history (task_id, version, event) VALUES (?1, 1, '{}')",
        [&clash],
    )
    .unwrap();
    conn.execute(
        "UPDATE tasks SET expires_at_ms = 0 WHERE id IN (?1, ?2)",
        [&clash, &good_with_clash],
    )
    .unwrap();
    conn.execute_batch("COMMIT").unwrap();
    let corrupt_views: Vec<String> = [&unparseable, &wrong_id, &clash]
        .iter()
        .map(|id| view_text(&conn, id))
        .collect();

    // A healthy task with a 200 ms TTL expires on time.
    let short = create_ok(&addr, 200).await;
    let t0 = Instant::now();
    assert_eq!(
        state_once_expired(&addr, &short, Duration::from_secs(3)).await,
        ("expired".into(), 1)
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(
        state_of(&addr, &good_with_clash).await,
        ("expired".into(), 1)
    );
    // Many more ticks: each bad row is reported exactly once.
    tokio::time::sleep(Duration::from_millis(600)).await;
    for (id, why) in [
        (&unparseable, "tasks.view"),
        (&wrong_id, "names task"),
        (&clash, "UNIQUE constraint failed: history"),
    ] {
        let lines = server.stderr_lines(id);
        assert_eq!(lines.len(), 1, "{id}: {lines:?}");
        assert!(lines[0].contains("quarantined tasks row"), "{}", lines[0]);
        assert!(lines[0].contains(why), "{}", lines[0]);
    }
    // Nothing is lost: the bad rows are exactly as they were, the task
    // whose view was copied is untouched, the quarantine says why.
    let after: Vec<String> = [&unparseable, &wrong_id, &clash]
        .iter()
        .map(|id| view_text(&conn, id))
        .collect();
    assert_eq!(after, corrupt_views);
    assert_eq!(state_of(&addr, &bystander).await, ("queued".into(), 0));
    let q = quarantine_rows(&conn);
    let keys: Vec<&str> = q.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(q.len(), 3, "{q:?}");
    for id in [&unparseable, &wrong_id, &clash] {
        assert!(keys.contains(&id.as_str()), "{q:?}");
    }
    assert!(q
        .iter()
        .all(|r| r.0 == "tasks" && r.2.starts_with("ttl sweep: ")));
    let feed = get(&addr, "/v1/notifications").await.json();
    let notified: Vec<&str> = feed["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(notified.len(), 2, "{feed}");
    assert!(notified.contains(&short.as_str()) && notified.contains(&good_with_clash.as_str()));

    // After a restart they stay set aside, and are not reported again.
    server.kill();
    let server = spawn_logged(server_command(dir.path(), &["--sweep-ms", "50"]));
    let short = create_ok(&server.addr, 100).await;
    // Many sweeper ticks (for the check that nothing is reported again),
    // then as long as a loaded machine needs for the TTL sweep itself.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        state_once_expired(&server.addr, &short, Duration::from_secs(5))
            .await
            .0,
        "expired"
    );
    assert_eq!(server.stderr_lines("quarantined"), Vec::<String>::new());
    // Repaired and released by an operator, a row is swept again.
    conn.execute(
        "UPDATE tasks SET view = ?2 WHERE id = ?1",
        [&wrong_id, &original],
    )
    .unwrap();
    conn.execute("DELETE FROM quarantine WHERE row_key = ?1", [&wrong_id])
        .unwrap();
    assert_eq!(
        state_once_expired(&server.addr, &wrong_id, Duration::from_secs(3)).await,
        ("expired".into(), 1)
    );
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparseable_outbox_row_is_quarantined_once_and_the_others_are_posted() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let seen = Arc::clone(&seen2);
            async move {
                let id = headers["webhook-id"].to_str().unwrap().to_string();
                seen.lock().unwrap().push(id);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    // Ten notifications committed with no receiver configured yet.
    let mut h = harness(|_| {}).await;
    let mut ids = Vec::new();
    for _ in 0..10 {
        let id = h.create_default().await;
        h.ok_callback(&id, "s", start_ev(1)).await;
        h.ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12")).await;
        ids.push(id);
    }
    if let Some(s) = h.server.take() {
        s.stop().await;
    }
    // The oldest one's state is garbage.
    let conn = db(h.dir.path());
    let bad_seq: i64 = conn
        .query_row(
            "SELECT seq FROM outbox WHERE task_id = ?1",
            [&ids[0]],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE outbox SET state = 'bogus' WHERE seq = ?1",
        [bad_seq],
    )
    .unwrap();

    h.config.notify_url = Some(hook);
    h.restart().await;
    let want: Vec<String> = ids[1..]
        .iter()
        .map(|id| format!("{id}:succeeded:2"))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().len() < want.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Past the retry tick: nothing more is posted, and the bad row was
    // reported once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut posted = seen.lock().unwrap().clone();
    posted.sort();
    let mut want = want;
    want.sort();
    assert_eq!(posted, want);
    assert_eq!(h.state().stats.totals().quarantined_rows, 1);
    let q = quarantine_rows(&conn);
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!(
        (q[0].0.as_str(), q[0].1.as_str()),
        ("outbox", bad_seq.to_string().as_str())
    );
    assert!(q[0].2.contains("outbox.state"), "{q:?}");
    // Kept as it was: not sent, not rewritten.
    let row: Option<(String, i64)> = conn
        .query_row(
            "SELECT state, sent FROM outbox WHERE seq = ?1",
            params![bad_seq],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .unwrap();
    assert_eq!(row, Some(("bogus".into(), 0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_503_storage_unavailable_and_the_server_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn_logged(limited(dir.path(), 3 * 1024, &[]));
    let addr = server.addr.clone();
    let input = "x".repeat(60_000);
    let mut acked = Vec::new();
    let mut refused = None;
    for _ in 0..200 {
        let r = create(
            &addr,
            json!({"ttlMs": 3_600_000, "maxAttempts": 1, "input": input}),
        )
        .await;
        if r.status == 201 {
            acked.push(r.json()["id"].as_str().unwrap().to_string());
        } else {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("the file limit is reached");
    assert!(acked.len() > 10, "{} created first", acked.len());
    assert_error(&r, 503, "storage-unavailable", "store");
    assert_eq!(r.header("retry-after"), Some("5"));
    // Writes keep failing the same way, reads still work.
    let task = &acked[0];
    let cb = taskwire_server::signature::callback_body(
        task,
        &json!({"type": "start", "atMs": 1, "worker": "w"}),
    );
    let headers = secret().headers("s1", now_secs(), cb.as_bytes());
    let hs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = client::request(
        &addr,
        "POST",
        &format!("/v1/tasks/{task}/callbacks"),
        &hs,
        cb,
    )
    .await
    .unwrap();
    assert_error(&r, 503, "storage-unavailable", "store");
    assert_eq!(get(&addr, &format!("/v1/tasks/{task}")).await.status, 200);

    // Space again: the same process writes again.
    lift_file_limit(&server);
    let r = create(
        &addr,
        json!({"ttlMs": 3_600_000, "maxAttempts": 1, "input": input}),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    acked.push(r.json()["id"].as_str().unwrap().to_string());

    // Every acknowledged task is there after a restart; the file is sound.
    server.kill();
    let server = spawn_logged(server_command(dir.path(), &[]));
    for id in &acked {
        let r = get(&server.addr, &format!("/v1/tasks/{id}")).await;
        assert_eq!(r.status, 200, "{id}");
        assert_eq!(r.json()["input"].as_str().map(str::len), Some(60_000));
    }
    let ok: String = db(dir.path())
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    server.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_locked_by_another_process_answers_503_until_it_lets_go() {
    let h = harness(|_| {}).await;
    let before = h.create_default().await;
    let holder = db(h.dir.path());
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The writer waits out its 5 s busy_timeout, then gives up.
    let r = h
        .post(
            "demo",
            "/v1/tasks",
            &[],
            r#"{"ttlMs":60000,"maxAttempts":1}"#,
        )
        .await;
    assert_error(&r, 503, "storage-unavailable", "locked");
    assert_eq!(r.header("retry-after"), Some("5"));
    assert_eq!(
        h.get("demo", &format!("/v1/tasks/{before}")).await.status,
        200
    );
    holder.execute_batch("ROLLBACK").unwrap();
    h.create_default().await;
}

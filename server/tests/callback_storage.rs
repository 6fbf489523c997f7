//! A remembered `webhook-id` is stored as a reference to the history entry
//! holding its event, not as a second copy of the event (issue 16, finding
//! 13), on SQLite and PostgreSQL. Pinned here:
//! - a repeated id is still judged exactly: the same event is
//!   `duplicate-callback`, any other (one field off, or the `expire` the
//!   history recorded for a callback that expired its task) is
//!   `callback-conflict`, also after a restart;
//! - the rows really hold no second copy;
//! - a database from a newer server is refused with a clear message.
//!
//! Databases of the old schema: `schema_migration.rs`.

mod common;

use std::path::Path;

use common::judge::{bump_at, expect_reason, user_version};
use common::*;
use serde_json::{json, Value};
use taskwire_server::Config;

/// Two tasks: one through start and progress, one expired by a late
/// callback. Returns their ids.
async fn remember_callbacks(h: &Harness) -> (String, String) {
    let a = h.create_default().await;
    h.ok_callback(&a, "s", start_ev(1)).await;
    h.ok_callback(&a, "p1", progress_ev(2, 25)).await;
    let b = h
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
        .await;
    h.ok_callback(&b, "s", start_ev(1)).await;
    let late = h
        .ok_callback(&b, "late", succeed_ev(u64::MAX >> 12, "sha256:aa"))
        .await;
    assert_eq!(late["state"], "expired", "{late}");
    (a, b)
}

async fn judged_exactly(h: &Harness, a: &str, b: &str) {
    expect_reason(h, a, "s", &start_ev(1), "duplicate-callback").await;
    expect_reason(h, a, "p1", &progress_ev(2, 25), "duplicate-callback").await;
    // One field off, each: a conflict.
    expect_reason(h, a, "s", &bump_at(&start_ev(1), 0.5), "callback-conflict").await;
    let mut other_worker = start_ev(1);
    other_worker["worker"] = json!("w2");
    expect_reason(h, a, "s", &other_worker, "callback-conflict").await;
    let mut other_cursor = progress_ev(2, 25);
    other_cursor["cursor"] = json!("c-other");
    expect_reason(h, a, "p1", &other_cursor, "callback-conflict").await;
    // The callback that expired b carried a success; its history entry
    // is an `expire`. Only the success repeats it.
    let late = succeed_ev(u64::MAX >> 12, "sha256:aa");
    expect_reason(h, b, "late", &late, "duplicate-callback").await;
    let mut other_hash = late.clone();
    other_hash["resultHash"] = json!("sha256:bb");
    expect_reason(h, b, "late", &other_hash, "callback-conflict").await;
    let (_, answer) = h.resume("demo", b, "cursor=0").await;
    let recorded = serde_json::to_value(&answer.events()[1].event).unwrap();
    assert_eq!(recorded["type"], "expire", "{recorded}");
    expect_reason(h, b, "late", &recorded, "callback-conflict").await;
}

fn sqlite_rows(dir: &Path, task: &str) -> Vec<(String, Option<i64>, Option<String>)> {
    let conn = rusqlite::Connection::open(dir.join("taskwire.sqlite3")).unwrap();
    let mut stmt = conn
        .prepare("SELECT callback_id, version, event FROM callbacks WHERE task_id = ?1 ORDER BY callback_id")
        .unwrap();
    let rows = stmt
        .query_map([task], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

#[tokio::test]
async fn sqlite_keeps_each_event_once_and_judges_repeated_ids_exactly() {
    let mut h = harness(|_| {}).await;
    let (a, b) = remember_callbacks(&h).await;
    judged_exactly(&h, &a, &b).await;
    h.restart().await;
    judged_exactly(&h, &a, &b).await;
    let dir = h.config.data.clone();
    // The helpers send ids made the task's own (`task_scoped`).
    assert_eq!(
        sqlite_rows(&dir, &a),
        vec![
            (task_scoped(&a, "p1"), Some(2), None),
            (task_scoped(&a, "s"), Some(1), None)
        ]
    );
    let rows = sqlite_rows(&dir, &b);
    assert_eq!(rows[1], (task_scoped(&b, "s"), Some(1), None));
    assert_eq!(rows[0].0, task_scoped(&b, "late"));
    assert_eq!(
        rows[0].1, None,
        "the history holds an expire, not this event"
    );
    let kept: Value = serde_json::from_str(rows[0].2.as_deref().unwrap()).unwrap();
    assert_eq!(kept["type"], "succeed");
    assert_eq!(user_version(&dir.join("taskwire.sqlite3")), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_each_event_once_and_judges_repeated_ids_exactly() {
    let Some(url) = pg::database().await else {
        return;
    };
    let mut h = harness(|c| c.data = url.clone().into()).await;
    let (a, b) = remember_callbacks(&h).await;
    judged_exactly(&h, &a, &b).await;
    h.restart().await;
    judged_exactly(&h, &a, &b).await;
    let db = pg::admin(&url).await;
    let rows: Vec<(String, Option<i64>, Option<String>)> = db
        .query(
            "SELECT callback_id, version, event FROM callbacks WHERE task_id = ANY($1)
             ORDER BY task_id = $2 DESC, callback_id",
            &[&vec![a.clone(), b.clone()], &a],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        rows[..2],
        [
            (task_scoped(&a, "p1"), Some(2), None),
            (task_scoped(&a, "s"), Some(1), None)
        ]
    );
    assert_eq!(rows[3], (task_scoped(&b, "s"), Some(1), None));
    assert_eq!((&rows[2].0, rows[2].1), (&task_scoped(&b, "late"), None));
    assert!(rows[2].2.as_deref().unwrap().contains("\"succeed\""));
    let version: i32 = db
        .query_one("SELECT version FROM taskwire_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 5);
}

// ---- newer databases are refused -----------------------------------------

async fn refused(config: Config) -> String {
    match taskwire_server::start(config).await {
        Ok(_) => panic!("a newer schema must be refused"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn a_sqlite_file_from_a_newer_server_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taskwire.sqlite3");
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch("CREATE TABLE tasks (id TEXT); PRAGMA user_version = 99;")
        .unwrap();
    let e = refused(test_config(dir.path())).await;
    assert!(
        e.contains("taskwire.sqlite3") && e.contains("schema version 99"),
        "{e}"
    );
    assert!(e.contains("newer taskwire-server"), "{e}");
    assert_eq!(user_version(&file), 99, "left as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_from_a_newer_server_is_refused() {
    let Some(url) = pg::database().await else {
        return;
    };
    let db = pg::admin(&url).await;
    db.batch_execute(
        "CREATE TABLE taskwire_schema (only_row boolean PRIMARY KEY DEFAULT true, version integer NOT NULL);
         INSERT INTO taskwire_schema (version) VALUES (99);",
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.data = url.into();
    let e = refused(config).await;
    assert!(
        e.contains("schema version 99") && e.contains("newer taskwire-server"),
        "{e}"
    );
    let tables: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'tasks'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "nothing created");
}

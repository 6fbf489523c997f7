//! A database of schema 1 (before schema versions, when `callbacks.event`
//! held a copy of every remembered event) is migrated on open, on SQLite
//! and on PostgreSQL (issue 16, finding 13), and every callback id it
//! remembered is judged as before.
//!
//! `tests/fixtures/schema1.sqlite3` was written by the server of schema 1
//! (commit a2cc858) through its HTTP API, by `fixtures/make_schema1.py`;
//! `schema1.json` lists what was sent and answered. The PostgreSQL test
//! loads the same rows into the schema of that commit. A PostgreSQL
//! database of schema 3 gains the batch columns and table (schema 4).

mod common;

use std::path::Path;

use common::judge::{bump_at, expect_reason, expect_reason_exact, user_version};
use common::*;
use serde_json::{json, Value};

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn manifest() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("schema1.json")).unwrap()).unwrap()
}

/// Every id the old server remembered is judged as it was, history is
/// unchanged, and new callbacks still apply and are remembered.
async fn judged_as_before(h: &Harness, history: &[(String, i64, String)]) {
    for task in manifest()["tasks"].as_array().unwrap() {
        let id = task["id"].as_str().unwrap();
        let (_, answer) = h.resume("demo", id, "cursor=0").await;
        let served: Vec<(String, i64, Value)> = answer
            .events()
            .iter()
            .map(|e| {
                let event = serde_json::to_value(&e.event).unwrap();
                (id.to_string(), e.version as i64, event)
            })
            .collect();
        let stored: Vec<(String, i64, Value)> = history
            .iter()
            .filter(|(t, _, _)| t == id)
            .map(|(t, v, e)| (t.clone(), *v, serde_json::from_str(e).unwrap()))
            .collect();
        assert_eq!(served, stored, "history of {}", task["name"]);
        for sent in task["callbacks"].as_array().unwrap() {
            if sent["answer"]["changed"] != true {
                continue;
            }
            let cb = sent["callbackId"].as_str().unwrap();
            let event = &sent["event"];
            expect_reason_exact(h, id, cb, event, "duplicate-callback").await;
            expect_reason_exact(h, id, cb, &bump_at(event, 0.5), "callback-conflict").await;
        }
    }
    let by_name = |name: &str| {
        manifest()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["id"].as_str().unwrap().to_string())
            .unwrap()
    };
    // The callback that expired its task: its history entry is `expire`.
    let expired = by_name("expired-by-callback");
    let (_, answer) = h.resume("demo", &expired, "cursor=0").await;
    let recorded = serde_json::to_value(&answer.events().last().unwrap().event).unwrap();
    expect_reason_exact(h, &expired, "late", &recorded, "callback-conflict").await;
    let running = by_name("running");
    let now = 1.0
        + manifest()["tasks"][3]["callbacks"][0]["event"]["atMs"]
            .as_f64()
            .unwrap();
    let step =
        json!({"type": "progress", "atMs": now, "progress": 40, "cursor": "after-migration"});
    let a = h.ok_callback(&running, "p-new", step.clone()).await;
    assert_eq!(
        (a["changed"].clone(), a["version"].clone()),
        (json!(true), json!(2))
    );
    expect_reason(h, &running, "p-new", &step, "duplicate-callback").await;
}

fn fixture_rows(file: &Path, sql: &str) -> Vec<Vec<rusqlite::types::Value>> {
    let conn = rusqlite::Connection::open(file).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    let rows = stmt
        .query_map([], |r| {
            (0..n).map(|i| r.get(i)).collect::<Result<Vec<_>, _>>()
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn history_of(file: &Path) -> Vec<(String, i64, String)> {
    use rusqlite::types::Value as V;
    fixture_rows(
        file,
        "SELECT task_id, version, event FROM history ORDER BY task_id, version",
    )
    .into_iter()
    .map(|r| match &r[..] {
        [V::Text(t), V::Integer(v), V::Text(e)] => (t.clone(), *v, e.clone()),
        other => panic!("history row {other:?}"),
    })
    .collect()
}

#[tokio::test]
async fn a_schema_1_sqlite_file_is_migrated_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taskwire.sqlite3");
    std::fs::copy(fixture("schema1.sqlite3"), &file).unwrap();
    // Really the old schema: unversioned, every event copied.
    assert_eq!(user_version(&file), 0);
    let old = fixture_rows(&file, "SELECT task_id, callback_id, event FROM callbacks");
    assert!(old.len() >= 10, "{old:?}");
    let history = history_of(&file);

    let h = harness(|c| c.data = dir.path().to_path_buf()).await;
    assert_eq!(user_version(&file), 5);
    let rows = fixture_rows(
        &file,
        "SELECT count(*), count(version), count(event) FROM callbacks",
    );
    use rusqlite::types::Value as V;
    // Every row kept; all but the expiry's now point at history.
    assert_eq!(
        rows[0],
        vec![
            V::Integer(old.len() as i64),
            V::Integer(old.len() as i64 - 1),
            V::Integer(1)
        ]
    );
    judged_as_before(&h, &history).await;
}

/// A schema-1 file from after `callbacks.tenant` was added (it had the
/// column and its UNIQUE index, but no version yet) keeps every row's
/// tenant through the rebuild, so its ids are still refused on the
/// tenant's other tasks.
#[tokio::test]
async fn a_schema_1_file_with_tenants_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("taskwire.sqlite3");
    std::fs::copy(fixture("schema1.sqlite3"), &file).unwrap();
    {
        // What the server of that time did to such a file on open.
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute_batch(
            "ALTER TABLE callbacks ADD COLUMN tenant TEXT;
             -- The rows it wrote had their tenant; an id used on several
             -- tasks can only be from before (it would have been refused).
             UPDATE callbacks SET tenant = (SELECT tenant FROM tasks WHERE id = task_id)
             WHERE callback_id IN (SELECT callback_id FROM callbacks
                                   GROUP BY callback_id HAVING count(*) = 1);
             CREATE UNIQUE INDEX callbacks_tenant_callback_id ON callbacks (tenant, callback_id);",
        )
        .unwrap();
    }
    let old = fixture_rows(&file, "SELECT count(tenant) FROM callbacks");
    let history = history_of(&file);

    let h = harness(|c| c.data = dir.path().to_path_buf()).await;
    assert_eq!(user_version(&file), 5);
    assert_eq!(
        fixture_rows(&file, "SELECT count(tenant) FROM callbacks"),
        old
    );
    judged_as_before(&h, &history).await;
    // One of the old ids with a tenant, on another task of it: refused.
    use rusqlite::types::Value as V;
    let with_tenant = fixture_rows(
        &file,
        "SELECT callback_id FROM callbacks WHERE tenant = 'demo' ORDER BY callback_id LIMIT 1",
    );
    let [V::Text(id)] = &with_tenant[0][..] else {
        panic!("no id kept its tenant: {with_tenant:?}");
    };
    let other = h.create_default().await;
    let body = taskwire_server::signature::callback_body(&other, &start_ev(1));
    let r = h
        .callback_raw(&other, id, now_secs(), body.as_bytes())
        .await;
    assert_error(&r, 422, "callback-id-reused-for-other-task", "webhook-id");
}

/// The schema of a2cc858's PostgreSQL store, verbatim (what a schema-1
/// database looks like).
const PG_SCHEMA_1: &str = "
CREATE TABLE tasks (id text PRIMARY KEY, tenant text NOT NULL, view text NOT NULL,
    version bigint NOT NULL, live boolean NOT NULL, expires_at_ms double precision NOT NULL,
    kind text, input text);
CREATE INDEX tasks_due ON tasks (expires_at_ms) WHERE live;
CREATE TABLE history (task_id text NOT NULL, version bigint NOT NULL, event text NOT NULL,
    PRIMARY KEY (task_id, version));
CREATE TABLE callbacks (task_id text NOT NULL, callback_id text NOT NULL, event text NOT NULL,
    PRIMARY KEY (task_id, callback_id));
CREATE TABLE idempotency (tenant text NOT NULL, key text NOT NULL, request text NOT NULL,
    task_id text NOT NULL, PRIMARY KEY (tenant, key));
CREATE TABLE deliveries (tenant text NOT NULL, key text NOT NULL, receipt text NOT NULL,
    PRIMARY KEY (tenant, key));
CREATE TABLE outbox (seq bigserial PRIMARY KEY, tenant text NOT NULL, key text NOT NULL UNIQUE,
    task_id text NOT NULL, state text NOT NULL, at_ms double precision NOT NULL,
    sent boolean NOT NULL DEFAULT false, attempts integer NOT NULL DEFAULT 0,
    next_attempt_ms double precision NOT NULL DEFAULT 0);
CREATE INDEX outbox_tenant ON outbox (tenant, seq);
CREATE INDEX outbox_pending ON outbox (next_attempt_ms) WHERE NOT sent;
";

/// Loads the fixture's rows (written by the old server) into a schema-1
/// PostgreSQL database.
async fn pg_schema_1(url: &str) -> Vec<(String, i64, String)> {
    use rusqlite::types::Value as V;
    let db = pg::admin(url).await;
    db.batch_execute(PG_SCHEMA_1).await.unwrap();
    let file = fixture("schema1.sqlite3");
    let text = |v: &V| match v {
        V::Text(t) => Some(t.clone()),
        V::Null => None,
        other => panic!("{other:?}"),
    };
    for r in fixture_rows(
        &file,
        "SELECT id, tenant, view, version, live, expires_at_ms, kind, input FROM tasks",
    ) {
        let (V::Integer(version), V::Integer(live), V::Real(expires)) = (&r[3], &r[4], &r[5])
        else {
            panic!("task row {r:?}");
        };
        db.execute(
            "INSERT INTO tasks VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &text(&r[0]),
                &text(&r[1]),
                &text(&r[2]),
                version,
                &(*live == 1),
                expires,
                &text(&r[6]),
                &text(&r[7]),
            ],
        )
        .await
        .unwrap();
    }
    let history = history_of(&file);
    for (t, v, e) in &history {
        db.execute("INSERT INTO history VALUES ($1, $2, $3)", &[t, v, e])
            .await
            .unwrap();
    }
    for r in fixture_rows(&file, "SELECT task_id, callback_id, event FROM callbacks") {
        db.execute(
            "INSERT INTO callbacks VALUES ($1, $2, $3)",
            &[&text(&r[0]), &text(&r[1]), &text(&r[2])],
        )
        .await
        .unwrap();
    }
    history
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_1_postgres_database_is_migrated_by_the_first_instance_to_start() {
    let Some(url) = pg::database().await else {
        return;
    };
    let history = pg_schema_1(&url).await;
    let db = pg::admin(&url).await;
    let count = |sql: &'static str| {
        let db = &db;
        async move { db.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let before = count("SELECT count(*) FROM callbacks").await;
    // Two instances start at once: one migrates, the other finds it done.
    let (a, b) = tokio::join!(
        harness(|c| c.data = url.clone().into()),
        harness(|c| c.data = url.clone().into())
    );
    assert_eq!(count("SELECT count(*) FROM callbacks").await, before);
    assert_eq!(
        count("SELECT count(version) FROM callbacks").await,
        before - 1
    );
    assert_eq!(count("SELECT count(event) FROM callbacks").await, 1);
    assert_eq!(
        count("SELECT version::bigint FROM taskwire_schema").await,
        5
    );
    judged_as_before(&a, &history).await;
    // Schema 4: the old tasks are in no batch, and batches work.
    assert_eq!(
        count("SELECT count(*) FROM tasks WHERE batch_id IS NOT NULL").await,
        0
    );
    let r = a
        .post(
            "demo",
            "/v1/batches",
            &[],
            r#"{"items":[{"ttlMs":60000,"maxAttempts":1}]}"#,
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let item = r.json()["tasks"][0]["id"].as_str().unwrap().to_string();
    b.ok_callback(&item, "s", start_ev(1)).await;
    let batch = r.json()["batchId"].as_str().unwrap().to_string();
    let delta = b
        .get("demo", &format!("/v1/batches/{batch}/resume?cursor=1"))
        .await
        .json();
    assert_eq!(delta["cursor"], 2, "{delta}");
    assert_eq!(delta["tasks"][0]["events"][0]["version"], 1, "{delta}");
    // The other instance reads the same rows.
    let running = manifest()["tasks"][3]["id"].as_str().unwrap().to_string();
    let repeat = manifest()["tasks"][3]["callbacks"][0]["event"].clone();
    expect_reason_exact(&b, &running, "s", &repeat, "duplicate-callback").await;
}

/// A PostgreSQL database of schema 3 (today's without the batch columns
/// and table) is migrated by the first instance to start: its tasks stay
/// as they were, in no batch, and batches work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_3_postgres_database_gains_batches_on_start() {
    let Some(url) = pg::database().await else {
        return;
    };
    let mut first = harness(|c| c.data = url.clone().into()).await;
    let old = first.create_default().await;
    first.ok_callback(&old, "s", start_ev(1)).await;
    if let Some(server) = first.server.take() {
        server.stop().await;
    }
    let db = pg::admin(&url).await;
    db.batch_execute(
        "DROP TABLE batches;
         ALTER TABLE tasks DROP COLUMN batch_id, DROP COLUMN batch_index, DROP COLUMN batch_seq;
         ALTER TABLE history DROP COLUMN batch_seq;
         UPDATE taskwire_schema SET version = 3;",
    )
    .await
    .unwrap();
    let h = harness(|c| c.data = url.clone().into()).await;
    let version: i32 = db
        .query_one("SELECT version FROM taskwire_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 5);
    let got = h.get("demo", &format!("/v1/tasks/{old}")).await.json();
    assert_eq!(
        (got["state"].as_str(), got.get("batchId")),
        (Some("running"), None)
    );
    let body = r#"{"items":[{"ttlMs":60000,"maxAttempts":1},{"ttlMs":60000,"maxAttempts":1}]}"#;
    let created = h.post("demo", "/v1/batches", &[], body).await.json();
    let item = created["tasks"][1]["id"].as_str().unwrap().to_string();
    h.ok_callback(&item, "s", start_ev(1)).await;
    let path = format!(
        "/v1/batches/{}/resume?cursor=1",
        created["batchId"].as_str().unwrap()
    );
    let delta = h.get("demo", &path).await.json();
    assert_eq!(delta["tasks"][0]["task"]["id"], item.as_str(), "{delta}");
    assert_eq!(delta["tasks"].as_array().map(Vec::len), Some(1), "{delta}");
}

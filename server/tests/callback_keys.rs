//! `callbacks` keyed by (tenant, callback id) hashed (store/callback_ids.rs,
//! issue 30): a database of the layout before it (keyed by task, with a
//! UNIQUE index on `(tenant, callback_id)`; main at 48c6492) opens, is
//! re-keyed, and every id it remembered is judged as before, on SQLite and
//! on PostgreSQL: the same event again is a duplicate, another one a
//! conflict, the id on another task of the tenant is refused; a row
//! without a tenant (from before the column) counts on its own task only,
//! as it did. PostgreSQL's key function gives the bytes Rust computes.

mod common;

use common::judge::{bump_at, expect_reason};
use common::*;
use taskwire_server::client::Reply;
use taskwire_server::signature::callback_body;
use taskwire_server::store::callback_ids::{task_key, tenant_key};

/// Tasks whose callbacks the old layout remembers: `a` (a start and a
/// progress, with tenant), `legacy` (a start whose row loses its tenant,
/// as rows from before `callbacks.tenant`).
struct Remembered {
    a: String,
    legacy: String,
}

async fn remember(h: &Harness) -> Remembered {
    let a = h.create_default().await;
    h.ok_callback(&a, "s", start_ev(1)).await;
    h.ok_callback(&a, "p1", progress_ev(2, 25)).await;
    let legacy = h.create_default().await;
    h.ok_callback(&legacy, "s", start_ev(1)).await;
    Remembered { a, legacy }
}

/// Posts `event` on `task` under exactly the `webhook-id` `id`.
async fn post_as(h: &Harness, task: &str, id: &str, event: &serde_json::Value) -> Reply {
    let body = callback_body(task, event);
    h.callback_raw(task, id, now_secs(), body.as_bytes()).await
}

async fn judged_as_before(h: &Harness, r: &Remembered) {
    let a = &r.a;
    expect_reason(h, a, "s", &start_ev(1), "duplicate-callback").await;
    expect_reason(h, a, "p1", &progress_ev(2, 25), "duplicate-callback").await;
    expect_reason(h, a, "s", &bump_at(&start_ev(1), 0.5), "callback-conflict").await;
    // The tenant's id, on another of its tasks: refused, nothing changes.
    let other = h.create_default().await;
    let reused = post_as(h, &other, &task_scoped(a, "p1"), &start_ev(1)).await;
    assert_error(
        &reused,
        422,
        "callback-id-reused-for-other-task",
        "webhook-id",
    );
    let (_, answer) = h.resume("demo", &other, "cursor=0").await;
    assert!(answer.events().is_empty(), "{:?}", answer.events());
    // The row without a tenant: a duplicate on its task, not checked on
    // the others (as before the re-keying).
    let legacy_id = task_scoped(&r.legacy, "s");
    expect_reason(h, &r.legacy, "s", &start_ev(1), "duplicate-callback").await;
    let free = post_as(h, &other, &legacy_id, &start_ev(1)).await;
    assert_eq!(free.status, 200, "{:?}", free.json());
    assert_eq!(free.json()["changed"], true);
    // New ids are remembered as before.
    h.ok_callback(a, "p2", progress_ev(3, 50)).await;
    expect_reason(h, a, "p2", &progress_ev(3, 50), "duplicate-callback").await;
    let again = post_as(h, &other, &task_scoped(a, "p2"), &progress_ev(4, 60)).await;
    assert_error(
        &again,
        422,
        "callback-id-reused-for-other-task",
        "webhook-id",
    );
}

/// main's `callbacks` (48c6492's sqlite_schema.rs), rows kept.
const SQLITE_OLD_LAYOUT: &str = "
CREATE TABLE callbacks_old (
    task_id     TEXT NOT NULL,
    callback_id TEXT NOT NULL,
    version     INTEGER,
    event       TEXT,
    tenant      TEXT,
    PRIMARY KEY (task_id, callback_id),
    CHECK ((version IS NULL) <> (event IS NULL))
) WITHOUT ROWID;
INSERT INTO callbacks_old SELECT task_id, callback_id, version, event, tenant FROM callbacks;
DROP TABLE callbacks;
ALTER TABLE callbacks_old RENAME TO callbacks;
CREATE UNIQUE INDEX callbacks_tenant_callback_id ON callbacks (tenant, callback_id);
";

#[tokio::test]
async fn a_sqlite_file_of_the_layout_before_keys_is_rekeyed_and_judged_as_before() {
    let mut h = harness(|_| {}).await;
    let r = remember(&h).await;
    h.server.take().unwrap().stop().await;
    let file = h.config.data.join("taskwire.sqlite3");
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute_batch(SQLITE_OLD_LAYOUT).unwrap();
        conn.execute(
            "UPDATE callbacks SET tenant = NULL WHERE task_id = ?1",
            [&r.legacy],
        )
        .unwrap();
    }
    h.restart().await;
    let conn = rusqlite::Connection::open(&file).unwrap();
    // Re-keyed: the index is gone, each row keyed by its tenant or task.
    let index: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'callbacks_tenant_callback_id'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(index, 0);
    let mut stmt = conn
        .prepare("SELECT key, task_id, callback_id, tenant FROM callbacks")
        .unwrap();
    let rows: Vec<(Vec<u8>, String, String, Option<String>)> = stmt
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 3);
    for (key, task, id, tenant) in &rows {
        let expected = match tenant {
            Some(t) => tenant_key(t, id),
            None => task_key(task, id),
        };
        assert_eq!(key[..], expected[..], "{task} {id}");
    }
    judged_as_before(&h, &r).await;
    h.restart().await;
    expect_reason(&h, &r.a, "p2", &progress_ev(3, 50), "duplicate-callback").await;
}

/// main's `callbacks` on PostgreSQL: its schema script's table, then
/// callback_ids.rs's column and UNIQUE index; rows kept.
const POSTGRES_OLD_LAYOUT: &str = "
ALTER TABLE callbacks RENAME TO callbacks_new;
ALTER TABLE callbacks_new DROP CONSTRAINT callbacks_tenant_callback_id;
CREATE TABLE callbacks (
    task_id     text NOT NULL,
    callback_id text NOT NULL,
    version     bigint,
    event       text,
    PRIMARY KEY (task_id, callback_id),
    CONSTRAINT callbacks_event_once CHECK ((version IS NULL) <> (event IS NULL))
);
ALTER TABLE callbacks ADD COLUMN IF NOT EXISTS tenant text;
CREATE UNIQUE INDEX IF NOT EXISTS callbacks_tenant_callback_id ON callbacks (tenant, callback_id);
INSERT INTO callbacks SELECT task_id, callback_id, version, event, tenant FROM callbacks_new;
DROP TABLE callbacks_new;
DROP FUNCTION taskwire_callback_key;
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_of_the_layout_before_keys_is_rekeyed_and_judged_as_before() {
    let Some(url) = pg::database().await else {
        return;
    };
    let mut h = harness(|c| c.data = url.clone().into()).await;
    let r = remember(&h).await;
    h.server.take().unwrap().stop().await;
    let db = pg::admin(&url).await;
    db.batch_execute(POSTGRES_OLD_LAYOUT).await.unwrap();
    db.execute(
        "UPDATE callbacks SET tenant = NULL WHERE task_id = $1",
        &[&r.legacy],
    )
    .await
    .unwrap();
    h.restart().await;
    let rows = db
        .query(
            "SELECT key, task_id, callback_id, tenant FROM callbacks",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let (key, task, id, tenant): (Vec<u8>, String, String, Option<String>) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let expected = match &tenant {
            Some(t) => tenant_key(t, &id),
            None => task_key(&task, &id),
        };
        assert_eq!(key[..], expected[..], "{task} {id}");
    }
    let indexes: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'callbacks'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexes, 1, "only the primary key on `key`");
    judged_as_before(&h, &r).await;
    h.restart().await;
    expect_reason(&h, &r.a, "p2", &progress_ev(3, 50), "duplicate-callback").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_computes_the_keys_rust_computes() {
    let Some(url) = pg::database().await else {
        return;
    };
    let h = harness(|c| c.data = url.clone().into()).await;
    let db = pg::admin(&url).await;
    for (tenant, id) in [("demo", "cb-1"), ("ab", "c"), ("téna✓nt", "msg_é✓")] {
        let row = db
            .query_one(
                "SELECT taskwire_callback_key(1, $1, $2), taskwire_callback_key(2, $1, $2)",
                &[&tenant, &id],
            )
            .await
            .unwrap();
        let (by_tenant, by_task): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
        assert_eq!(by_tenant[..], tenant_key(tenant, id)[..], "{tenant} {id}");
        assert_eq!(by_task[..], task_key(tenant, id)[..], "{tenant} {id}");
    }
    drop(h);
}

//! Batches (PROTOCOL.md §Batches) on PostgreSQL: the scenarios of
//! `batch_scenarios/` on one instance, then what only several instances
//! and writers can do: a held batch request on one instance woken by a
//! commit on another (also across a lost LISTEN connection), and many
//! callbacks racing on the items of one batch through several writers
//! while a client follows the batch by its cursor. Without PostgreSQL
//! binaries the tests skip (tests/common/pg.rs).

mod batch_scenarios;
mod common;
mod tokens;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use batch_scenarios::*;
use common::lifecycle::{ev, start};
use common::*;
use serde_json::{json, Value};
use taskwire_server::client::{self, Reply};
use taskwire_server::store::postgres::LISTENER_NAME;
use taskwire_server::Config;

/// `n` instances on one fresh database (`None`: no PostgreSQL, skip).
async fn instances(n: usize, tweak: impl Fn(&mut Config)) -> Option<(Vec<Harness>, String)> {
    let url = pg::database().await?;
    let mut hs = Vec::new();
    for _ in 0..n {
        hs.push(
            harness(|c| {
                c.data = url.clone().into();
                tweak(c);
            })
            .await,
        );
    }
    Some((hs, url))
}

/// One instance on a fresh database.
async fn one(tweak: impl Fn(&mut Config)) -> Option<Harness> {
    Some(instances(1, tweak).await?.0.remove(0))
}

/// The scenarios of `batch_scenarios/` that need no config of their own,
/// one after the other on one instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_scenarios_hold_on_postgres() {
    let Some(h) = one(|_| {}).await else { return };
    created_whole_scenario(&h).await;
    idempotent_create_scenario(&h).await;
    cursor_scenario(&h).await;
    held_request_scenario(&h).await;
    stream_scenario(&h).await;
    expiry_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_batches_name_the_item_and_create_nothing_on_postgres() {
    let Some(h) = one(four_open_tasks).await else {
        return;
    };
    bad_batches_scenario(&h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_token_follows_its_batch_only_on_postgres() {
    let Some(h) = one(browser_keys).await else {
        return;
    };
    batch_token_scenario(&h).await;
}

/// Holds `GET /v1/batches/{batch}/resume?cursor=…&waitMs=10000` on `h`.
fn hold(h: &Harness, batch: &str, cursor: u64) -> tokio::task::JoinHandle<(Reply, Instant)> {
    let addr = h.addr.clone();
    let path = format!("/v1/batches/{batch}/resume?cursor={cursor}&waitMs=10000");
    tokio::spawn(async move {
        let r = client::request(&addr, "GET", &path, &[("authorization", "Bearer demo")], "")
            .await
            .unwrap();
        (r, Instant::now())
    })
}

/// A held batch request on B answers within a few seconds of a commit on
/// A, far inside its 10 s wait: B heard A's NOTIFY batch line.
async fn woken_across(
    a: &Harness,
    b: &Harness,
    batch: &str,
    cursor: u64,
    item: &str,
    cut: impl std::future::Future<Output = ()>,
) -> Value {
    let held = hold(b, batch, cursor);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "held while nothing changed");
    cut.await;
    let committed = Instant::now();
    a.ok_callback(item, &format!("p{cursor}"), progress_ev(cursor, cursor))
        .await;
    let (r, answered) = held.await.unwrap();
    let took = answered.duration_since(committed);
    assert!(
        took < Duration::from_secs(5),
        "woken by the commit: {took:?}"
    );
    assert_eq!(r.status, 200, "{:?}", r.json());
    let answer = r.json();
    assert_eq!(answer["mode"], "delta", "{answer}");
    assert_eq!(ids_of(&answer), vec![item.to_string()]);
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_batch_request_on_one_instance_wakes_from_a_commit_on_another() {
    let Some((hs, _)) = instances(2, |_| {}).await else {
        return;
    };
    let (a, b) = (&hs[0], &hs[1]);
    let (batch, ids) = batch(a, 3).await;
    a.ok_callback(&ids[1], "s", start_ev(1)).await;
    let answer = woken_across(a, b, &batch, 2, &ids[1], async {}).await;
    assert_eq!(answer["cursor"], 3);
    assert_eq!(answer["tasks"][0]["events"][0]["version"], 2);
    // And the other way round, on another item.
    a.ok_callback(&ids[2], "s", start_ev(1)).await;
    let answer = woken_across(b, a, &batch, 4, &ids[2], async {}).await;
    assert_eq!(answer["cursor"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_batch_request_wakes_across_a_lost_listen_connection() {
    let Some((hs, url)) = instances(2, |_| {}).await else {
        return;
    };
    let (a, b) = (&hs[0], &hs[1]);
    let (batch, ids) = batch(a, 2).await;
    a.ok_callback(&ids[0], "s", start_ev(1)).await;
    // Every LISTEN connection cut just before the commit: its NOTIFY is
    // lost for B, which must reconnect and read the batch's cursor again.
    let admin = pg::admin(&url).await;
    let cut = async {
        let killed = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name = $1 AND datname = current_database()",
                &[&LISTENER_NAME],
            )
            .await
            .unwrap();
        assert_eq!(killed.len(), 2, "one LISTEN connection per instance");
    };
    woken_across(a, b, &batch, 2, &ids[0], cut).await;
}

/// Follows `batch` on `h` from cursor 0 by long-polls until every item is
/// terminal, checking each answer as a client applies it: the cursor
/// never goes back, and every task of a delta continues exactly where
/// this client's copy of it stands (no entry skipped, none repeated).
/// Returns the copy and how many answers it took.
async fn follow_to_the_end(h: &Harness, batch: &str) -> (HashMap<String, Value>, usize) {
    let mut views: HashMap<String, Value> = HashMap::new();
    let mut cursor = 0;
    let until = Instant::now() + Duration::from_secs(60);
    for answers in 1.. {
        assert!(Instant::now() < until, "never all terminal at {cursor}");
        let a = follow(h, batch, &format!("cursor={cursor}&waitMs=5000")).await;
        let next = a["cursor"].as_u64().unwrap();
        assert!(next >= cursor, "the cursor went back: {cursor} -> {next}");
        let tasks = a["tasks"].as_array().unwrap();
        match a["mode"].as_str().unwrap() {
            "snapshot" => {
                assert_eq!(cursor, 0, "a snapshot only for cursor 0: {a}");
                for t in tasks {
                    let id = t["task"]["id"].as_str().unwrap().to_string();
                    views.insert(id, t["task"].clone());
                }
            }
            "delta" => {
                assert!(next > cursor, "{a}");
                assert!(!tasks.is_empty(), "a delta names what changed: {a}");
                for t in tasks {
                    let id = t["task"]["id"].as_str().unwrap();
                    assert_eq!(t["mode"], "delta", "{id} within the window: {t}");
                    let held = views[id]["version"].as_u64().unwrap();
                    let versions: Vec<u64> = t["events"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e["version"].as_u64().unwrap())
                        .collect();
                    let want: Vec<u64> =
                        (held + 1..=t["task"]["version"].as_u64().unwrap()).collect();
                    assert_eq!(versions, want, "{id} at cursor {cursor} held {held}");
                    views.insert(id.to_string(), t["task"].clone());
                }
            }
            "caught-up" => assert_eq!(next, cursor),
            other => panic!("mode {other}"),
        }
        cursor = next;
        if a["open"] == 0 {
            return (views, answers);
        }
    }
    unreachable!()
}

/// Many callbacks at once on the items of one batch, spread over two
/// instances of three writers each (so that group commits hold several
/// items, and writers race on the batch row), while a client on each
/// instance follows the batch by its cursor. Every client ends with every
/// task exactly as stored, having seen each entry once; the cursor ends
/// at 1 + the number of transactions that appended history to an item
/// (each history row records its transaction's cursor: one cursor per
/// transaction, one transaction per cursor), and renewals that append
/// nothing (heartbeats, duplicates) move nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_callbacks_on_one_batch_move_its_cursor_once_per_commit_and_miss_nothing() {
    const ITEMS: usize = 24;
    let Some((hs, url)) = instances(2, |c| {
        c.pg_writers = 3;
        c.retention = 1000;
    })
    .await
    else {
        return;
    };
    let hs = Arc::new(hs);
    let (batch, ids) = batch(&hs[0], ITEMS).await;
    let followers: Vec<_> = (0..2)
        .map(|i| {
            let (hs, batch) = (Arc::clone(&hs), batch.clone());
            tokio::spawn(async move { follow_to_the_end(&hs[i], &batch).await })
        })
        .collect();
    let chains: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| {
            let (hs, id) = (Arc::clone(&hs), id.clone());
            tokio::spawn(async move {
                let started = start(1, 60_000);
                let steps = [
                    ("s", started.clone()),
                    ("h1", ev("heartbeat", 1, json!({}))),
                    (
                        "p1",
                        ev("progress", 1, json!({"progress": 10, "cursor": "c1"})),
                    ),
                    ("s", started),
                    ("h2", ev("heartbeat", 1, json!({}))),
                    (
                        "p2",
                        ev("progress", 1, json!({"progress": 60, "cursor": "c2"})),
                    ),
                    (
                        "ok",
                        ev(
                            "succeed",
                            1,
                            json!({"resultRef": "blob://r", "resultHash": "sha256:ab"}),
                        ),
                    ),
                ];
                for (k, (cb, event)) in steps.into_iter().enumerate() {
                    hs[(n + k) % 2].ok_callback(&id, cb, event).await;
                }
            })
        })
        .collect();
    for chain in chains {
        chain.await.unwrap();
    }
    let stored = follow(&hs[0], &batch, "cursor=0").await;
    for follower in followers {
        let (views, answers) = follower.await.unwrap();
        assert!(answers > 2, "followed as it went: {answers} answers");
        for t in stored["tasks"].as_array().unwrap() {
            let id = t["task"]["id"].as_str().unwrap();
            assert_eq!(views[id], t["task"], "{id} converged");
            assert_eq!(t["task"]["state"], "succeeded");
            assert_eq!(t["task"]["version"], 4, "start, 2 progress, succeed");
        }
    }
    let db = pg::admin(&url).await;
    let row = db
        .query_one(
            "SELECT (SELECT seq FROM batches WHERE id = $1),
                    count(DISTINCT h.batch_seq), count(DISTINCT h.xmin::text),
                    count(DISTINCT (h.batch_seq, h.xmin::text)),
                    min(h.batch_seq), max(h.batch_seq), count(*)
             FROM history h JOIN tasks t ON t.id = h.task_id WHERE t.batch_id = $1",
            &[&batch],
        )
        .await
        .unwrap();
    let [seq, seqs, transactions, pairs, lowest, highest, entries]: [i64; 7] =
        std::array::from_fn(|i| row.get(i));
    assert_eq!(entries, (ITEMS * 4) as i64);
    assert_eq!(seqs, transactions, "one cursor per transaction");
    assert_eq!(pairs, transactions, "one transaction per cursor");
    assert_eq!(
        seq,
        transactions + 1,
        "raised once per history-appending commit"
    );
    assert_eq!((lowest, highest), (2, seq), "no cursor without history");
    assert!(
        transactions < entries,
        "some commits held several items' changes: {transactions} of {entries}"
    );
    // Each item's row records the cursor of its last change.
    let stale: i64 = db
        .query_one(
            "SELECT count(*) FROM tasks t WHERE t.batch_id = $1 AND t.batch_seq <>
                 (SELECT max(batch_seq) FROM history WHERE task_id = t.id)",
            &[&batch],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stale, 0);
}

/// Batches racing on two instances against one open-task quota (10): the
/// items are counted under the tenant's quota lock, so exactly three
/// batches of three fit, however the eight creates interleave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_batches_on_two_instances_share_one_open_task_count() {
    let Some((hs, _)) = instances(2, |c| c.quotas.max_open_tasks = Some(10)).await else {
        return;
    };
    let hs = Arc::new(hs);
    let creates: Vec<_> = (0..8)
        .map(|i| {
            let hs = Arc::clone(&hs);
            tokio::spawn(async move {
                let body = items(3).to_string();
                hs[i % 2]
                    .post("demo", "/v1/batches", &[], &body)
                    .await
                    .status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for c in creates {
        statuses.push(c.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(statuses, [201, 201, 201, 429, 429, 429, 429, 429]);
    // One slot left, seen from either instance.
    assert_eq!(
        hs[1]
            .post(
                "demo",
                "/v1/tasks",
                &[],
                r#"{"ttlMs":60000,"maxAttempts":1}"#
            )
            .await
            .status,
        201
    );
    let r = hs[0]
        .post("demo", "/v1/batches", &[], &items(1).to_string())
        .await;
    assert_error(&r, 429, "open-task-quota", "");
}

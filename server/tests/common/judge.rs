//! Helpers of the callback-storage and schema-migration tests: a callback
//! that must be judged with a given reason, an event one field off, and a
//! SQLite file's schema version.

use std::path::Path;

use serde_json::{json, Value};

use super::{Harness, ReplyJson};

/// The event with `atMs` moved by `by`: one field off.
pub fn bump_at(event: &Value, by: f64) -> Value {
    let mut e = event.clone();
    e["atMs"] = json!(e["atMs"].as_f64().unwrap() + by);
    e
}

/// Posts a callback (its id made the task's own, as [`Harness::callback`]
/// does) that must be answered 200, unchanged, with `reason`.
pub async fn expect_reason(
    h: &Harness,
    task: &str,
    id: &str,
    event: &Value,
    reason: &str,
) -> Value {
    let r = h.callback(task, id, event).await;
    judged(r, id, event, reason)
}

/// As [`expect_reason`], under exactly the `webhook-id` `id` (the ids an
/// old server remembered, from before ids had to be a task's own).
pub async fn expect_reason_exact(
    h: &Harness,
    task: &str,
    id: &str,
    event: &Value,
    reason: &str,
) -> Value {
    let body = taskwire_server::signature::callback_body(task, event);
    let r = h
        .callback_raw(task, id, super::now_secs(), body.as_bytes())
        .await;
    judged(r, id, event, reason)
}

fn judged(r: super::Reply, id: &str, event: &Value, reason: &str) -> Value {
    assert_eq!(r.status, 200, "{id} {event}: {:?}", r.json());
    let a = r.json();
    assert_eq!(a["reason"], reason, "{id} {event}: {a}");
    assert_eq!(a["changed"], false, "{id}: {a}");
    assert_eq!(
        a["duplicateCallback"],
        reason == "duplicate-callback",
        "{a}"
    );
    a
}

/// `PRAGMA user_version` of a SQLite file.
pub fn user_version(file: &Path) -> i64 {
    let conn = rusqlite::Connection::open(file).unwrap();
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

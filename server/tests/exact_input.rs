//! `input` is kept as the exact JSON it was sent, and idempotent creates
//! compare bodies with exact numbers (PROTOCOL.md, "Create a task").

mod common;

use common::*;
use serde_json::json;

const KEY: &str = "idempotency-key";

fn text(r: &taskwire_server::client::Reply) -> &str {
    std::str::from_utf8(&r.body).unwrap()
}

/// The exact text of the answer's `input` member (`input` is the last
/// member the server writes).
fn input_text(r: &taskwire_server::client::Reply) -> String {
    let body = text(r);
    let at = body.find(",\"input\":").expect("an input member") + ",\"input\":".len();
    body[at..body.len() - 1].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_round_trips_byte_for_byte_and_survives_a_restart() {
    let mut h = harness(|_| {}).await;
    let input = r#"{"n": 9007199254740993, "big": 123456789012345678901234567890,
        "tiny": 1.000000000000000000001, "neg": -0.0, "e": 1E+2, "s": "\u00e9\n", "a": [1,2]}"#;
    let body = format!(r#"{{"ttlMs":3600000,"maxAttempts":1,"input":{input}}}"#);
    let created = h.post("demo", "/v1/tasks", &[], &body).await;
    assert_eq!(created.status, 201, "{}", text(&created));
    assert_eq!(created.header("content-type"), Some("application/json"));
    assert_eq!(input_text(&created), input);
    let id = created.json()["id"].as_str().unwrap().to_string();
    let got = h.get("demo", &format!("/v1/tasks/{id}")).await;
    assert_eq!(got.status, 200);
    assert_eq!(input_text(&got), input);
    assert_eq!(got.json()["kind"], serde_json::Value::Null);
    h.restart().await;
    let again = h.get("demo", &format!("/v1/tasks/{id}")).await;
    assert_eq!(input_text(&again), input);
    // A replay answers the stored text too.
    let k = [(KEY, "exact-1")];
    let first = h.post("demo", "/v1/tasks", &k, &body).await;
    assert_eq!(first.status, 201);
    let replay = h.post("demo", "/v1/tasks", &k, &body).await;
    assert_eq!(replay.status, 200);
    assert_eq!(input_text(&replay), input);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_creates_compare_numbers_exactly() {
    let h = harness(|_| {}).await;
    let k = [(KEY, "exact-2")];
    let first = h
        .post(
            "demo",
            "/v1/tasks",
            &k,
            r#"{"ttlMs":60000,"maxAttempts":1,"input":{"n":9007199254740993}}"#,
        )
        .await;
    assert_eq!(first.status, 201, "{}", text(&first));
    let id = first.json()["id"].clone();
    // Beyond double precision is still another number.
    for other in [
        r#"{"ttlMs":60000,"maxAttempts":1,"input":{"n":9007199254740992}}"#,
        r#"{"ttlMs":60000.000000000000001,"maxAttempts":1,"input":{"n":9007199254740993}}"#,
        r#"{"ttlMs":60000,"maxAttempts":1,"input":{"n":9007199254740993,"m":null}}"#,
    ] {
        let r = h.post("demo", "/v1/tasks", &k, other).await;
        assert_error(&r, 422, "idempotency-key-reused", "Idempotency-Key");
    }
    // The same values written another way are the same request.
    for same in [
        r#"{"ttlMs":60000,"maxAttempts":1,"input":{"n":9007199254740993}}"#,
        r#" { "input" : { "n" : 9007199254740993.000 }, "maxAttempts" : 1e0, "ttlMs" : 6e4 } "#,
        r#"{"ttlMs":60000,"maxAttempts":1,"kind":null,"input":{"n":90071992547409930e-1},"x":1}"#,
    ] {
        let r = h.post("demo", "/v1/tasks", &k, same).await;
        assert_eq!(r.status, 200, "{same}: {}", text(&r));
        assert_eq!(r.json()["id"], id);
    }
}

/// Rows written by servers that compared doubles keep working: a replay
/// of their body is still a 200, another body still a 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_rows_of_earlier_servers_still_match() {
    let h = harness(|_| {}).await;
    let k = [(KEY, "legacy-1")];
    let body = json!({"ttlMs": 60000, "maxAttempts": 2, "kind": "k", "input": {"a": [1, 2.5]}});
    let first = h.post("demo", "/v1/tasks", &k, &body.to_string()).await;
    assert_eq!(first.status, 201);
    // What the earlier server stored for this body.
    let legacy = json!({"ttlMs": 60000.0, "maxAttempts": 2, "kind": "k", "input": {"a": [1, 2.5]}});
    let conn = rusqlite::Connection::open(h.dir.path().join("taskwire.sqlite3")).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    let n = conn
        .execute(
            "UPDATE idempotency SET request = ?1 WHERE key = 'legacy-1'",
            [legacy.to_string()],
        )
        .unwrap();
    assert_eq!(n, 1);
    let replay = h.post("demo", "/v1/tasks", &k, &body.to_string()).await;
    assert_eq!(replay.status, 200, "{}", text(&replay));
    assert_eq!(replay.json()["id"], first.json()["id"]);
    let other = json!({"ttlMs": 60000, "maxAttempts": 3, "kind": "k", "input": {"a": [1, 2.5]}});
    let r = h.post("demo", "/v1/tasks", &k, &other.to_string()).await;
    assert_error(&r, 422, "idempotency-key-reused", "Idempotency-Key");
}

/// The create body as servers before exact comparison read it: core's
/// codec into a general JSON tree.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct EarlierRead {
    ttl_ms: f64,
    max_attempts: f64,
    kind: Option<String>,
    input: Option<serde_json::Value>,
}

/// The server writes the legacy form itself now; for any input it must be
/// the bytes earlier servers stored (computed here as they computed them),
/// or a genuine replay after an upgrade would be refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_rows_match_whatever_the_input() {
    let h = harness(|_| {}).await;
    let conn = rusqlite::Connection::open(h.dir.path().join("taskwire.sqlite3")).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    let cases = [
        (
            "60000",
            r#"{"b":1,"a":{"d":[1.0,-0,-3,2.5e-7,1e21,0.1],"c":"\u00e9\n\u0001/\"\\"},"b":4,"":[]}"#,
        ),
        (
            "1.5e3",
            "[9007199254740993, 1e16, 123456789012345678901234567890, -0.0, 1E+2, true, null]",
        ),
        ("3600000", r#""just a string""#),
        ("60000", "null"),
        ("0.5", "{}"),
    ];
    for (i, (ttl, input)) in cases.iter().enumerate() {
        let k = [(KEY, format!("legacy-any-{i}"))];
        let k = [(k[0].0, k[0].1.as_str())];
        let body = format!(r#"{{"ttlMs":{ttl},"maxAttempts":2,"kind":"k","input":{input}}}"#);
        let first = h.post("demo", "/v1/tasks", &k, &body).await;
        assert_eq!(first.status, 201, "{body}: {}", text(&first));
        let read: EarlierRead = taskwire_wire::from_json_serde(&body, "body").unwrap();
        let legacy = json!({
            "ttlMs": read.ttl_ms,
            "maxAttempts": read.max_attempts as u64,
            "kind": read.kind,
            "input": read.input,
        })
        .to_string();
        let n = conn
            .execute(
                "UPDATE idempotency SET request = ?1 WHERE key = ?2",
                [legacy.as_str(), k[0].1],
            )
            .unwrap();
        assert_eq!(n, 1);
        let replay = h.post("demo", "/v1/tasks", &k, &body).await;
        assert_eq!(replay.status, 200, "{legacy}: {}", text(&replay));
        assert_eq!(replay.json()["id"], first.json()["id"]);
    }
}

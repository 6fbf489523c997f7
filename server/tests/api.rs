//! The HTTP API of PROTOCOL.md against a real server (loopback HTTP, SQLite
//! file in a temp dir).

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use taskwire_core::{Mirror, Next, ResumeMode, State};
use taskwire_server::signature::callback_body;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_has_the_json_shape() {
    let h = harness(|_| {}).await;
    let id = h.create_default().await;

    assert_error(&h.get("demo", "/v1/nope").await, 404, "not-found", "path");
    assert_error(
        &h.req("DELETE", "/v1/tasks", &[], "").await,
        405,
        "method-not-allowed",
        "method",
    );
    assert_error(
        &h.req("PUT", &format!("/v1/tasks/{id}/resume"), &[], "")
            .await,
        405,
        "method-not-allowed",
        "method",
    );
    // Auth.
    assert_error(
        &h.req("GET", &format!("/v1/tasks/{id}"), &[], "").await,
        401,
        "unauthorized",
        "Authorization",
    );
    assert_error(
        &h.get("nobody", &format!("/v1/tasks/{id}")).await,
        401,
        "unauthorized",
        "Authorization",
    );
    assert_error(
        &h.req(
            "GET",
            &format!("/v1/tasks/{id}"),
            &[("authorization", "Basic abc")],
            "",
        )
        .await,
        401,
        "unauthorized",
        "Authorization",
    );
    // Unknown task, another tenant's task, over-long id.
    assert_error(
        &h.get("demo", "/v1/tasks/tsk_nope").await,
        404,
        "not-found",
        "taskId",
    );
    assert_error(
        &h.get("other", &format!("/v1/tasks/{id}")).await,
        404,
        "not-found",
        "taskId",
    );
    let long = "x".repeat(256);
    assert_error(
        &h.get("demo", &format!("/v1/tasks/{long}")).await,
        400,
        "invalid-request",
        "taskId",
    );
    // Create bodies.
    for (body, field) in [
        ("{", "body"),
        ("[]", "body"),
        (r#"{"maxAttempts":1}"#, "ttlMs"),
        (r#"{"ttlMs":0,"maxAttempts":1}"#, "body.ttlMs"),
        (r#"{"ttlMs":-5,"maxAttempts":1}"#, "body.ttlMs"),
        (r#"{"ttlMs":10,"maxAttempts":0}"#, "body.maxAttempts"),
        (r#"{"ttlMs":10,"maxAttempts":1.5}"#, "body.maxAttempts"),
        (r#"{"ttlMs":"10","maxAttempts":1}"#, "body.ttlMs"),
    ] {
        assert_error(
            &h.post("demo", "/v1/tasks", &[], body).await,
            400,
            "invalid-request",
            field,
        );
    }
    let long_kind = json!({"ttlMs": 10, "maxAttempts": 1, "kind": "k".repeat(65)}).to_string();
    assert_error(
        &h.post("demo", "/v1/tasks", &[], &long_kind).await,
        400,
        "invalid-request",
        "body.kind",
    );
    assert_error(
        &h.post(
            "demo",
            "/v1/tasks",
            &[("idempotency-key", &"k".repeat(256))],
            r#"{"ttlMs":10,"maxAttempts":1}"#,
        )
        .await,
        400,
        "invalid-request",
        "Idempotency-Key",
    );
    // Resume parameters.
    let base = format!("/v1/tasks/{id}/resume");
    for (query, field) in [
        ("", "cursor"),
        ("?cursor=-1", "cursor"),
        ("?cursor=1.5", "cursor"),
        ("?cursor=abc", "cursor"),
        ("?cursor=9007199254740992", "cursor"),
        ("?cursor=0&waitMs=30001", "waitMs"),
        ("?cursor=0&waitMs=-1", "waitMs"),
        ("?cursor=0&snapshot=maybe", "snapshot"),
    ] {
        assert_error(
            &h.get("demo", &format!("{base}{query}")).await,
            400,
            "invalid-request",
            field,
        );
    }
    assert_error(
        &h.get("demo", "/v1/tasks/tsk_nope/resume?cursor=0").await,
        404,
        "not-found",
        "taskId",
    );
    assert_error(
        &h.get("demo", "/v1/notifications?limit=0").await,
        400,
        "invalid-request",
        "limit",
    );
    assert_error(
        &h.get("demo", "/v1/notifications?limit=1001").await,
        400,
        "invalid-request",
        "limit",
    );
    assert_error(
        &h.get("demo", "/v1/notifications?after=x").await,
        400,
        "invalid-request",
        "after",
    );
    // 413 on every body-taking endpoint, with the JSON shape.
    let big = "a".repeat(64 * 1024 + 1);
    assert_error(
        &h.post("demo", "/v1/tasks", &[], &big).await,
        413,
        "payload-too-large",
        "body",
    );
    assert_error(
        &h.callback_raw(&id, "cb", now_secs(), big.as_bytes()).await,
        413,
        "payload-too-large",
        "body",
    );
    assert_error(
        &h.post("demo", &format!("/v1/tasks/{id}/deliveries"), &[], &big)
            .await,
        413,
        "payload-too-large",
        "body",
    );
    // Exactly 64 KiB is not too large (it is just not JSON).
    let edge = "a".repeat(64 * 1024);
    assert_error(
        &h.post("demo", "/v1/tasks", &[], &edge).await,
        400,
        "invalid-request",
        "body",
    );
    // Nothing above touched the task.
    assert_eq!(
        h.get("demo", &format!("/v1/tasks/{id}")).await.json()["version"],
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_need_a_fresh_valid_signature_and_touch_nothing_otherwise() {
    let h = harness(|_| {}).await;
    let id = h.create_default().await;
    let path = format!("/v1/tasks/{id}/callbacks");
    let body = callback_body(&id, &start_ev(1200));
    let now = now_secs();
    let signed = secret().headers("cb-1", now, body.as_bytes());
    let pick = |skip: &str| -> Vec<(&str, String)> {
        signed.iter().filter(|(k, _)| *k != skip).cloned().collect()
    };
    let send = |headers: Vec<(&'static str, String)>, body: String| {
        let h = &h;
        let path = path.clone();
        async move {
            let hs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            h.req("POST", &path, &hs, body).await
        }
    };
    // Missing headers.
    for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
        assert_error(
            &send(pick(name), body.clone()).await,
            401,
            "unauthorized",
            name,
        );
    }
    // A bearer token is not a signature.
    assert_error(
        &h.post("demo", &path, &[], &body).await,
        401,
        "unauthorized",
        "webhook-id",
    );
    // Tampered body: also proves the signature is checked before parsing
    // (the tampered body is not even JSON).
    assert_error(
        &send(signed.to_vec(), "not json".into()).await,
        401,
        "unauthorized",
        "webhook-signature",
    );
    // Wrong secret.
    let other = taskwire_server::signature::Secret::parse("whsec_b3RoZXItc2VjcmV0").unwrap();
    assert_error(
        &send(
            other.headers("cb-1", now, body.as_bytes()).to_vec(),
            body.clone(),
        )
        .await,
        401,
        "unauthorized",
        "webhook-signature",
    );
    // Stale and future timestamps (signed correctly).
    for ts in [now - 301, now + 301] {
        assert_error(
            &h.callback_raw(&id, "cb-1", ts, body.as_bytes()).await,
            401,
            "unauthorized",
            "webhook-timestamp",
        );
    }
    // Replaying a valid signature on another task's path still needs the id
    // in the signature: a different webhook-id with the old signature fails.
    let mut replay = signed.to_vec();
    replay[0].1 = "cb-2".into();
    assert_error(
        &send(replay, body.clone()).await,
        401,
        "unauthorized",
        "webhook-signature",
    );
    // Valid signature, invalid event: 400 naming the field, nothing stored.
    let bad = callback_body(
        &id,
        &json!({"type":"progress","atMs":1,"progress":101,"cursor":"c"}),
    );
    assert_error(
        &h.callback_raw(&id, "cb-x", now, bad.as_bytes()).await,
        400,
        "invalid-request",
        "event.progress",
    );
    assert_error(
        &h.callback_raw(&id, "cb-x", now, b"{").await,
        400,
        "invalid-request",
        "event",
    );
    assert_error(
        &h.callback_raw(&id, "", now, body.as_bytes()).await,
        400,
        "invalid-request",
        "webhook-id",
    );
    let long_id = "c".repeat(256);
    assert_error(
        &h.callback_raw(&id, &long_id, now, body.as_bytes()).await,
        400,
        "invalid-request",
        "webhook-id",
    );
    // Valid signature, unknown task: there is no secret to check it
    // against, so it is refused like a bad signature (existence is not
    // revealed to whoever holds some secret).
    assert_error(
        &h.callback("tsk_nope", "cb-1", &start_ev(1)).await,
        401,
        "unauthorized",
        "webhook-signature",
    );
    let task = h.get("demo", &format!("/v1/tasks/{id}")).await.json();
    assert_eq!(
        (task["version"].clone(), task["state"].clone()),
        (json!(0), json!("queued"))
    );
    // The genuine one still works (nothing was burnt by the failures).
    let ok = send(signed.to_vec(), body.clone()).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.json()["reason"], "started");
    let stats = h.state().stats.totals();
    assert_eq!(stats.rejected_signatures, 10, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_summary_timeline_over_http() {
    let h = harness(|_| {}).await;
    let id = h.create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 3, "kind": "summary", "input": {"doc": "doc-1"}})).await;
    let steps = [
        ("cb-1", start_ev(1200), "started", 1, "running"),
        ("cb-2", progress_ev(6400, 25), "progress", 2, "running"),
        ("cb-3", progress_ev(13100, 55), "progress", 3, "running"),
        ("cb-4", progress_ev(20700, 82), "progress", 4, "running"),
        (
            "cb-5",
            succeed_ev(24300, "sha256:ab12"),
            "succeeded",
            5,
            "succeeded",
        ),
    ];
    for (cb, event, reason, version, state) in &steps {
        let a = h.ok_callback(&id, cb, event.clone()).await;
        assert_eq!(a["reason"], *reason, "{a}");
        assert_eq!(a["version"], *version);
        assert_eq!(a["state"], *state);
        assert_eq!(a["changed"], true);
        assert_eq!(a["duplicateCallback"], false);
        assert_eq!(a["notify"], *reason == "succeeded");
    }
    // Redelivery (same id, same event), conflict (same id, other event),
    // duplicate success (new id, same hash), result conflict.
    let a = h.ok_callback(&id, "cb-4", progress_ev(20700, 82)).await;
    assert_eq!(
        (
            a["reason"].clone(),
            a["duplicateCallback"].clone(),
            a["changed"].clone()
        ),
        (json!("duplicate-callback"), json!(true), json!(false))
    );
    let a = h.ok_callback(&id, "cb-4", progress_ev(20700, 83)).await;
    assert_eq!(a["reason"], "callback-conflict");
    let a = h
        .ok_callback(&id, "cb-6", succeed_ev(24400, "sha256:ab12"))
        .await;
    assert_eq!(
        (a["reason"].clone(), a["duplicate"].clone()),
        (json!("duplicate-result"), json!(true))
    );
    let a = h
        .ok_callback(&id, "cb-7", succeed_ev(24400, "sha256:ffff"))
        .await;
    assert_eq!(a["reason"], "result-conflict");
    assert_eq!(a["version"], 5);

    // The PROTOCOL.md example: a client at version 3 gets exactly 4 and 5.
    let (reply, answer) = h.resume("demo", &id, "cursor=3&waitMs=25000").await;
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let body = reply.json();
    assert_eq!(body["mode"], "delta");
    assert_eq!(
        body["events"],
        json!([
            {"version": 4, "event": {"type": "progress", "atMs": 20700, "progress": 82, "cursor": "c82"}},
            {"version": 5, "event": {"type": "succeed", "atMs": 24300, "resultRef": "blob://summaries/doc-1", "resultHash": "sha256:ab12"}}
        ])
    );
    assert_eq!(body["task"]["state"], "succeeded");
    assert_eq!(body["task"]["progress"], 100);
    assert_eq!(body["task"]["attempts"], 1);
    // A client mirror replays it through core's reducer without complaint.
    let mut mirror = Mirror::new(&id).unwrap();
    let (_, from_zero) = h.resume("demo", &id, "cursor=0").await;
    let out = mirror.merge(&from_zero);
    assert!(out.rejected.is_empty(), "{out:?}");
    assert_eq!(mirror.version(), 5);
    assert_eq!(answer.task().unwrap().version, 5);
    // GET carries kind and input.
    let task = h.get("demo", &format!("/v1/tasks/{id}")).await.json();
    assert_eq!(task["kind"], "summary");
    assert_eq!(task["input"], json!({"doc": "doc-1"}));
    assert_eq!(task["resultHash"], "sha256:ab12");
    // Exactly one notification.
    let feed = h.get("demo", "/v1/notifications").await.json();
    let list = feed["notifications"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{feed}");
    assert_eq!(list[0]["key"], format!("{id}:succeeded:5"));
    assert_eq!(list[0]["taskId"], id);
    assert_eq!(list[0]["state"], "succeeded");
    assert_eq!(list[0]["atMs"], 24300);
    assert_eq!(feed["next"], list[0]["seq"]);
    let after = list[0]["seq"].as_u64().unwrap();
    let empty = h
        .get("demo", &format!("/v1/notifications?after={after}"))
        .await
        .json();
    assert_eq!(empty, json!({"notifications": [], "next": after}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_modes_cursor_ahead_and_forced_snapshot() {
    let h = harness(|c| c.retention = 8).await;
    let id = h.create_default().await;
    h.ok_callback(&id, "s", start_ev(1)).await;
    for p in 1..=10u64 {
        h.ok_callback(&id, &format!("p{p}"), progress_ev(1 + p, p))
            .await;
    }
    // version 11 now.
    let mode = |a: &taskwire_core::ResumeAnswer| a.mode();
    let (r, a) = h.resume("demo", &id, "cursor=11").await;
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(mode(&a), ResumeMode::CaughtUp);
    let (_, a) = h.resume("demo", &id, "cursor=9").await;
    assert_eq!(mode(&a), ResumeMode::Delta);
    assert_eq!(
        a.events().iter().map(|e| e.version).collect::<Vec<_>>(),
        vec![10, 11]
    );
    // A gap equal to the window is a delta, one more is a snapshot.
    let (_, a) = h.resume("demo", &id, "cursor=3").await;
    assert_eq!((mode(&a), a.events().len()), (ResumeMode::Delta, 8));
    let (_, a) = h.resume("demo", &id, "cursor=2").await;
    assert_eq!(mode(&a), ResumeMode::Snapshot);
    assert_eq!(a.task().unwrap().version, 11);
    // Cursor ahead of the task: snapshot (never caught-up).
    let (_, a) = h.resume("demo", &id, "cursor=50").await;
    assert_eq!(mode(&a), ResumeMode::Snapshot);
    // Forced snapshot even when caught up.
    let (_, a) = h.resume("demo", &id, "cursor=11&snapshot=1").await;
    assert_eq!(mode(&a), ResumeMode::Snapshot);
    // A fresh client further behind than the window gets a snapshot.
    let mut mirror = Mirror::new(&id).unwrap();
    let (_, a) = h.resume("demo", &id, "cursor=0").await;
    let out = mirror.merge(&a);
    assert_eq!(out.next, Next::None);
    assert_eq!(mirror.version(), 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_long_poll_wakes_on_the_commit_not_at_wait_ms() {
    let h = harness(|_| {}).await;
    let id = h.create_default().await;
    h.ok_callback(&id, "s", start_ev(1)).await;
    // Nothing new: held until waitMs, then caught-up.
    let t = Instant::now();
    let (_, a) = h.resume("demo", &id, "cursor=1&waitMs=300").await;
    assert_eq!(a.mode(), ResumeMode::CaughtUp);
    assert!(
        t.elapsed() >= Duration::from_millis(290),
        "{:?}",
        t.elapsed()
    );
    // Held with a long wait, woken by a callback.
    let addr = h.addr.clone();
    let path = format!("/v1/tasks/{id}/resume?cursor=1&waitMs=20000");
    let held = tokio::spawn(async move {
        let t = Instant::now();
        let r = taskwire_server::client::request(
            &addr,
            "GET",
            &path,
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
        .unwrap();
        (r, t.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished(), "the request must be held");
    h.ok_callback(&id, "p", progress_ev(2, 40)).await;
    let (r, elapsed) = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .unwrap()
        .unwrap();
    assert!(elapsed < Duration::from_secs(10), "woke after {elapsed:?}");
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let body = r.json();
    assert_eq!(body["mode"], "delta", "{body}");
    assert_eq!(body["events"][0]["version"], 2);
    assert_eq!(body["task"]["progress"], 40);
    // Terminal tasks are never held.
    h.ok_callback(&id, "f", fail_ev(3, false)).await;
    let t = Instant::now();
    let (_, a) = h.resume("demo", &id, "cursor=3&waitMs=20000").await;
    assert_eq!(a.task().unwrap().state, State::Failed);
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_watchers_of_one_task_all_wake() {
    let h = harness(|_| {}).await;
    let id = h.create_default().await;
    let mut held = Vec::new();
    for _ in 0..50 {
        let addr = h.addr.clone();
        let path = format!("/v1/tasks/{id}/resume?cursor=0&waitMs=20000");
        held.push(tokio::spawn(async move {
            taskwire_server::client::request(
                &addr,
                "GET",
                &path,
                &[("authorization", "Bearer demo")],
                "",
            )
            .await
            .unwrap()
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    h.ok_callback(&id, "s", start_ev(1)).await;
    for w in held {
        let r = tokio::time::timeout(Duration::from_secs(10), w)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.json()["events"][0]["version"], 1);
    }
    // The hub forgets a task when its last waiter leaves.
    assert_eq!(h.state().hub.watched(), 0);
}

/// Reads SSE frames until the stream ends (or the deadline).
async fn read_sse(
    mut res: hyper::Response<hyper::body::Incoming>,
    deadline: Duration,
) -> (String, bool) {
    use http_body_util::BodyExt;
    let mut text = String::new();
    let ended = tokio::time::timeout(deadline, async {
        while let Some(frame) = res.body_mut().frame().await {
            match frame {
                Ok(f) => {
                    if let Some(d) = f.data_ref() {
                        text.push_str(std::str::from_utf8(d).unwrap());
                    }
                }
                Err(_) => return false,
            }
        }
        true
    })
    .await;
    (text, ended.unwrap_or(false))
}

fn sse_messages(text: &str) -> Vec<(String, String, Value)> {
    text.split("\n\n")
        .filter(|block| block.contains("event:"))
        .map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim_start().to_string())
                    .unwrap_or_default()
            };
            (
                field("event:"),
                field("id:"),
                serde_json::from_str(&field("data:")).unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_answers_last_event_id_streams_deltas_and_ends_after_terminal() {
    let h = harness(|c| c.heartbeat_ms = 100).await;
    let id = h.create_default().await;
    h.ok_callback(&id, "s", start_ev(1)).await;
    h.ok_callback(&id, "p1", progress_ev(2, 10)).await;
    let mut conn = taskwire_server::client::Conn::open(&h.addr).await.unwrap();
    let res = conn
        .stream(
            "GET",
            &format!("/v1/tasks/{id}/events?cursor=0"),
            &[("authorization", "Bearer demo"), ("last-event-id", "1")],
            "",
        )
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let hv = |n: &str| {
        res.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    assert_eq!(hv("content-type").as_deref(), Some("text/event-stream"));
    assert_eq!(hv("cache-control").as_deref(), Some("no-store"));
    assert_eq!(hv("x-accel-buffering").as_deref(), Some("no"));
    let reader = tokio::spawn(read_sse(res, Duration::from_secs(15)));
    tokio::time::sleep(Duration::from_millis(350)).await; // let heartbeats flow
    h.ok_callback(&id, "p2", progress_ev(3, 50)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.ok_callback(&id, "ok", succeed_ev(4, "sha256:ab12")).await;
    let (text, ended) = reader.await.unwrap();
    assert!(
        ended,
        "the stream must end after the terminal message: {text}"
    );
    assert!(text.contains(": hb"), "heartbeat comments expected: {text}");
    let messages = sse_messages(&text);
    // First: answers Last-Event-ID 1 (not ?cursor=0): the delta with v2.
    assert_eq!(messages[0].0, "resume");
    assert_eq!(messages[0].1, "2");
    assert_eq!(messages[0].2["mode"], "delta");
    assert_eq!(messages[0].2["events"][0]["version"], 2);
    // Then deltas answering the previous id, ending with the terminal one.
    let last = messages.last().unwrap();
    assert_eq!(last.1, "4");
    assert_eq!(last.2["task"]["state"], "succeeded");
    let mut mirror = Mirror::new(&id).unwrap();
    // Replaying the stream from version 1 gives the server's task.
    let (_, v1) = h.resume("demo", &id, "cursor=0").await;
    let mut at_v1 = v1.clone();
    if let taskwire_core::ResumeAnswer::Delta { events, task } = &mut at_v1 {
        events.truncate(1);
        *task = None;
    }
    mirror.merge(&at_v1);
    for (_, _, data) in &messages {
        let answer: taskwire_core::ResumeAnswer = serde_json::from_value(data.clone()).unwrap();
        let out = mirror.merge(&answer);
        assert!(out.rejected.is_empty(), "{out:?}");
    }
    assert_eq!(mirror.version(), 4);
    assert_eq!(mirror.state(), Some(State::Succeeded));

    // A terminal task's stream is one message, then the end.
    let mut conn = taskwire_server::client::Conn::open(&h.addr).await.unwrap();
    let res = conn
        .stream(
            "GET",
            &format!("/v1/tasks/{id}/events"),
            &[("authorization", "Bearer demo")],
            "",
        )
        .await
        .unwrap();
    let (text, ended) = read_sse(res, Duration::from_secs(5)).await;
    assert!(ended);
    let messages = sse_messages(&text);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].2["mode"], "delta");
    // Errors before the stream starts are plain HTTP errors.
    assert_error(
        &h.get("other", &format!("/v1/tasks/{id}/events")).await,
        404,
        "not-found",
        "taskId",
    );
    let r = h
        .req(
            "GET",
            &format!("/v1/tasks/{id}/events"),
            &[("authorization", "Bearer demo"), ("last-event-id", "x")],
            "",
        )
        .await;
    assert_error(&r, 400, "invalid-request", "Last-Event-ID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_create_per_tenant() {
    let h = harness(|_| {}).await;
    let key = [("idempotency-key", "order-42")];
    let first = h
        .post(
            "demo",
            "/v1/tasks",
            &key,
            r#"{"ttlMs":60000,"maxAttempts":2,"input":{"a":1,"b":[1,2]}}"#,
        )
        .await;
    assert_eq!(first.status, 201);
    let id = first.json()["id"].as_str().unwrap().to_string();
    h.ok_callback(&id, "s", start_ev(1)).await;
    // Same body (other key order, whitespace): 200, the same task as it is now.
    let again = h
        .post(
            "demo",
            "/v1/tasks",
            &key,
            r#"{ "input": {"b":[1,2],"a":1}, "maxAttempts": 2, "ttlMs": 60000 }"#,
        )
        .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["id"], id.as_str());
    assert_eq!(again.json()["version"], 1);
    // Different body: 422.
    let other = h
        .post(
            "demo",
            "/v1/tasks",
            &key,
            r#"{"ttlMs":60000,"maxAttempts":3}"#,
        )
        .await;
    assert_error(&other, 422, "idempotency-key-reused", "Idempotency-Key");
    // The same key in another tenant is another task.
    let theirs = h
        .post(
            "other",
            "/v1/tasks",
            &key,
            r#"{"ttlMs":60000,"maxAttempts":3}"#,
        )
        .await;
    assert_eq!(theirs.status, 201);
    assert_ne!(theirs.json()["id"], id.as_str());
    // Without a key every create is new; ids are unguessable.
    let a = h.create_default().await;
    let b = h.create_default().await;
    assert_ne!(a, b);
    assert!(a.starts_with("tsk_") && a.len() == 36, "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_idempotent_per_tenant() {
    let h = harness(|_| {}).await;
    let id = h.create_default().await;
    let path = format!("/v1/tasks/{id}/deliveries");
    assert_error(
        &h.post("demo", &path, &[], "").await,
        400,
        "invalid-request",
        "Idempotency-Key",
    );
    assert_error(
        &h.post("demo", &path, &[("idempotency-key", "d1")], "")
            .await,
        409,
        "not-succeeded",
        "taskId",
    );
    h.ok_callback(&id, "s", start_ev(1)).await;
    h.ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12")).await;
    let first = h
        .post("demo", &path, &[("idempotency-key", "d1")], "")
        .await;
    assert_eq!(first.status, 201);
    let body = first.json();
    assert_eq!(
        (
            body["ok"].clone(),
            body["duplicate"].clone(),
            body["reason"].clone()
        ),
        (json!(true), json!(false), json!("delivered"))
    );
    assert_eq!(body["receipt"]["taskId"], id.as_str());
    assert_eq!(body["receipt"]["resultHash"], "sha256:ab12");
    assert_eq!(body["receipt"]["idempotencyKey"], "d1");
    let again = h
        .post("demo", &path, &[("idempotency-key", "d1")], "")
        .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["reason"], "duplicate-delivery");
    assert_eq!(again.json()["receipt"], body["receipt"]);
    // The key on another task: 422, and that receipt is not revealed.
    let id2 = h.create_default().await;
    h.ok_callback(&id2, "s", start_ev(1)).await;
    h.ok_callback(&id2, "ok", succeed_ev(2, "sha256:cd34"))
        .await;
    let reused = h
        .post(
            "demo",
            &format!("/v1/tasks/{id2}/deliveries"),
            &[("idempotency-key", "d1")],
            "",
        )
        .await;
    assert_error(&reused, 422, "key-reused-for-other-task", "Idempotency-Key");
    assert!(!String::from_utf8_lossy(&reused.body).contains("receipt"));
    // Other tenant: the task does not exist for them; their keys are theirs.
    assert_error(
        &h.post("other", &path, &[("idempotency-key", "d1")], "")
            .await,
        404,
        "not-found",
        "taskId",
    );
    assert_error(
        &h.post(
            "demo",
            "/v1/tasks/tsk_nope/deliveries",
            &[("idempotency-key", "zz")],
            "",
        )
        .await,
        404,
        "not-found",
        "taskId",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_never_see_each_other() {
    let h = harness(|_| {}).await;
    let mine = h.create_default().await;
    let theirs = h
        .create("other", json!({"ttlMs": 60000, "maxAttempts": 1}))
        .await;
    for (token, id) in [("demo", &theirs), ("other", &mine)] {
        assert_error(
            &h.get(token, &format!("/v1/tasks/{id}")).await,
            404,
            "not-found",
            "taskId",
        );
        assert_error(
            &h.get(token, &format!("/v1/tasks/{id}/resume?cursor=0"))
                .await,
            404,
            "not-found",
            "taskId",
        );
        assert_error(
            &h.get(token, &format!("/v1/tasks/{id}/events")).await,
            404,
            "not-found",
            "taskId",
        );
    }
    h.ok_callback(&mine, "s", start_ev(1)).await;
    h.ok_callback(&mine, "f", fail_ev(2, false)).await;
    assert_eq!(
        h.get("demo", "/v1/notifications").await.json()["notifications"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        h.get("other", "/v1/notifications").await.json()["notifications"],
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflight_for_listed_origins_only() {
    let h = harness(|c| c.cors_origins = vec!["http://localhost:5173".into()]).await;
    let preflight = |origin: &'static str| {
        let h = &h;
        async move {
            h.req(
                "OPTIONS",
                "/v1/tasks/x/resume",
                &[
                    ("origin", origin),
                    ("access-control-request-method", "GET"),
                    (
                        "access-control-request-headers",
                        "authorization,last-event-id",
                    ),
                ],
                "",
            )
            .await
        }
    };
    let ok = preflight("http://localhost:5173").await;
    assert!(ok.status == 204 || ok.status == 200, "{}", ok.status);
    assert_eq!(
        ok.header("access-control-allow-origin"),
        Some("http://localhost:5173")
    );
    let allowed = ok
        .header("access-control-allow-headers")
        .unwrap()
        .to_ascii_lowercase();
    for name in [
        "authorization",
        "content-type",
        "idempotency-key",
        "last-event-id",
    ] {
        assert!(allowed.contains(name), "{allowed}");
    }
    assert!(ok
        .header("access-control-allow-methods")
        .unwrap()
        .contains("POST"));
    let no = preflight("http://evil.example").await;
    assert_eq!(no.header("access-control-allow-origin"), None);
    // Actual requests from the origin are tagged too.
    let r = h
        .req(
            "GET",
            "/v1/notifications",
            &[
                ("origin", "http://localhost:5173"),
                ("authorization", "Bearer demo"),
            ],
            "",
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://localhost:5173")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_expires_silent_tasks_and_wakes_watchers() {
    let h = harness(|c| c.sweep_ms = 50).await;
    let id = h
        .create("demo", json!({"ttlMs": 400, "maxAttempts": 1}))
        .await;
    let running = h
        .create("demo", json!({"ttlMs": 400, "maxAttempts": 1}))
        .await;
    h.ok_callback(&running, "s", start_ev(1)).await;
    let t = Instant::now();
    let (_, a) = h.resume("demo", &id, "cursor=0&waitMs=10000").await;
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(a.mode(), ResumeMode::Delta);
    assert_eq!(a.task().unwrap().state, State::Expired);
    let entry = &a.events()[0];
    assert_eq!(entry.version, 1);
    assert_eq!(entry.event.kind(), taskwire_core::EventKind::Expire);
    assert_eq!(entry.event.at_ms().get(), a.task().unwrap().expires_at_ms);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = h.get("demo", &format!("/v1/tasks/{running}")).await.json();
    assert_eq!(
        (r["state"].clone(), r["version"].clone()),
        (json!("expired"), json!(2))
    );
    // One notification each, never more.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let feed = h.get("demo", "/v1/notifications").await.json();
    let keys: Vec<&str> = feed["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys.contains(&format!("{id}:expired:1").as_str()));
    assert!(keys.contains(&format!("{running}:expired:2").as_str()));
    // A late callback is absorbed.
    let a = h
        .ok_callback(&running, "late", succeed_ev(5, "sha256:ab12"))
        .await;
    assert_eq!(a["reason"], "terminal-conflict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_survives_a_restart() {
    let mut h = harness(|_| {}).await;
    let created = h
        .post(
            "demo",
            "/v1/tasks",
            &[("idempotency-key", "k1")],
            r#"{"ttlMs":3600000,"maxAttempts":3}"#,
        )
        .await;
    let id = created.json()["id"].as_str().unwrap().to_string();
    h.ok_callback(&id, "cb-1", start_ev(1200)).await;
    h.ok_callback(&id, "cb-2", progress_ev(6400, 25)).await;
    h.ok_callback(&id, "cb-3", succeed_ev(24300, "sha256:ab12"))
        .await;
    let delivered = h
        .post(
            "demo",
            &format!("/v1/tasks/{id}/deliveries"),
            &[("idempotency-key", "d1")],
            "",
        )
        .await
        .json();
    h.restart().await;
    let (_, a) = h.resume("demo", &id, "cursor=1").await;
    assert_eq!(
        a.events().iter().map(|e| e.version).collect::<Vec<_>>(),
        vec![2, 3]
    );
    // Callback ids, idempotency keys, receipts and the outbox persisted.
    let a = h.ok_callback(&id, "cb-2", progress_ev(6400, 25)).await;
    assert_eq!(a["reason"], "duplicate-callback");
    let again = h
        .post(
            "demo",
            "/v1/tasks",
            &[("idempotency-key", "k1")],
            r#"{"ttlMs":3600000,"maxAttempts":3}"#,
        )
        .await;
    assert_eq!((again.status, again.json()["id"].clone()), (200, json!(id)));
    let d = h
        .post(
            "demo",
            &format!("/v1/tasks/{id}/deliveries"),
            &[("idempotency-key", "d1")],
            "",
        )
        .await;
    assert_eq!(d.json()["receipt"], delivered["receipt"]);
    assert_eq!(
        h.get("demo", "/v1/notifications").await.json()["notifications"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_are_posted_signed_and_retried() {
    use std::sync::{Arc, Mutex};
    // A webhook receiver that fails the first attempt.
    type Seen = Vec<(String, axum::http::HeaderMap, Vec<u8>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let seen = Arc::clone(&seen2);
                async move {
                    let id = headers
                        .get("webhook-id")
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string();
                    let n = {
                        let mut list = seen.lock().unwrap();
                        list.push((id, headers, body.to_vec()));
                        list.len()
                    };
                    if n == 1 {
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        axum::http::StatusCode::OK
                    }
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let h = harness(|c| c.notify_url = Some(hook)).await;
    let id = h.create_default().await;
    h.ok_callback(&id, "s", start_ev(1)).await;
    h.ok_callback(&id, "ok", succeed_ev(2, "sha256:ab12")).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let list = seen.lock().unwrap().clone();
    assert_eq!(list.len(), 2, "one failure, one success, then nothing more");
    let key = format!("{id}:succeeded:2");
    for (webhook_id, headers, body) in &list {
        assert_eq!(webhook_id, &key);
        assert!(verifies(&secret(), headers, body), "signed like callbacks");
        let v: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(v["key"], key.as_str());
        assert_eq!(v["state"], "succeeded");
    }
}

//! PROTOCOL.md §Executor callback, "Binding and secrets" and "Limits": a
//! signature holds for one task of one tenant, secrets are per tenant and
//! rotate, a tenant's callback id belongs to one task, the signature
//! headers come once each, and the headers are judged before any of the
//! body is read, which must then arrive in time. Real server, real
//! SQLite file, real HTTP (raw TCP where a request must stall).

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use taskwire_server::client::Reply;
use taskwire_server::signature::{callback_body, signed_headers, Secret};
use taskwire_server::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const DEMO_SECRET: &str = "whsec_ZGVtby1zZWNyZXQtb25l"; // "demo-secret-one"
const DEMO_NEXT: &str = "whsec_ZGVtby1zZWNyZXQtdHdv"; // "demo-secret-two"
const OTHER_SECRET: &str = "whsec_b3RoZXItc2VjcmV0"; // "other-secret"

fn per_tenant(c: &mut Config) {
    c.callback_secrets = vec![
        format!("demo={DEMO_SECRET}"),
        format!("other={OTHER_SECRET}"),
    ];
}

fn key(text: &str) -> Secret {
    Secret::parse(text).unwrap()
}

/// A callback as an executor sent it: exactly these headers and bytes.
#[derive(Clone)]
struct Captured {
    headers: [(&'static str, String); 3],
    body: String,
}

fn capture(secrets: &[Secret], task: &str, callback_id: &str, event: &Value) -> Captured {
    let body = callback_body(task, event);
    Captured {
        headers: signed_headers(secrets, callback_id, now_secs(), body.as_bytes()),
        body,
    }
}

/// Sends `c` unchanged to `task`'s callback path.
async fn send(h: &Harness, task: &str, c: &Captured) -> Reply {
    let headers: Vec<(&str, &str)> = c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    h.req(
        "POST",
        &format!("/v1/tasks/{task}/callbacks"),
        &headers,
        c.body.clone(),
    )
    .await
}

/// The task as its tenant sees it.
async fn task(h: &Harness, token: &str, id: &str) -> Value {
    let r = h.get(token, &format!("/v1/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()
}

/// A running task of `token`'s tenant, started with `secret`.
async fn running(h: &Harness, token: &str, secret: &Secret) -> String {
    let id = h
        .create(token, json!({"ttlMs": 3_600_000, "maxAttempts": 3}))
        .await;
    let start = capture(
        std::slice::from_ref(secret),
        &id,
        &format!("{id}-start"),
        &start_ev(1),
    );
    assert_eq!(send(h, &id, &start).await.status, 200);
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_replayed_on_another_tenants_task_is_refused_and_changes_nothing() {
    // The issue's setup: one secret (the development one) for every tenant.
    let h = harness(|_| {}).await;
    let dev = secret();
    let a = running(&h, "demo", &dev).await;
    let b = running(&h, "other", &dev).await;
    let done = capture(
        std::slice::from_ref(&dev),
        &a,
        "cb-succeed",
        &succeed_ev(5, "sha256:aaaa"),
    );
    assert_eq!(send(&h, &a, &done).await.json()["reason"], "succeeded");
    // The same bytes, within the tolerance, on tenant B's task.
    assert_error(&send(&h, &b, &done).await, 401, "unauthorized", "taskId");
    let t = task(&h, "other", &b).await;
    assert_eq!(
        (t["state"].clone(), t["version"].clone()),
        (json!("running"), json!(1))
    );
    assert_eq!(t.get("resultRef"), None);

    // With secrets per tenant, A's signature is not even valid for B.
    let h = harness(per_tenant).await;
    let (sa, sb) = (key(DEMO_SECRET), key(OTHER_SECRET));
    let a = running(&h, "demo", &sa).await;
    let b = running(&h, "other", &sb).await;
    let done = capture(
        std::slice::from_ref(&sa),
        &a,
        "cb-succeed",
        &succeed_ev(5, "sha256:aaaa"),
    );
    assert_eq!(send(&h, &a, &done).await.json()["reason"], "succeeded");
    assert_error(
        &send(&h, &b, &done).await,
        401,
        "unauthorized",
        "webhook-signature",
    );
    // Even re-signed for B's task with A's secret.
    let forged = capture(
        std::slice::from_ref(&sa),
        &b,
        "cb-forged",
        &succeed_ev(5, "sha256:aaaa"),
    );
    assert_error(
        &send(&h, &b, &forged).await,
        401,
        "unauthorized",
        "webhook-signature",
    );
    assert_eq!(task(&h, "other", &b).await["state"], "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_replayed_on_another_task_of_the_tenant_is_refused() {
    let h = harness(per_tenant).await;
    let sa = key(DEMO_SECRET);
    let t1 = running(&h, "demo", &sa).await;
    let t2 = running(&h, "demo", &sa).await;
    let fail = capture(
        std::slice::from_ref(&sa),
        &t1,
        "cb-fail",
        &fail_ev(5, false),
    );
    assert_eq!(send(&h, &t1, &fail).await.json()["reason"], "failed");
    let r = send(&h, &t2, &fail).await;
    assert_error(&r, 401, "unauthorized", "event.taskId");
    let t = task(&h, "demo", &t2).await;
    assert_eq!(
        (t["state"].clone(), t["version"].clone()),
        (json!("running"), json!(1))
    );
    // A body that names no task is refused too: its signature is bound to
    // nothing.
    let unbound = fail_ev(6, false).to_string();
    let headers = sa.headers("cb-unbound", now_secs(), unbound.as_bytes());
    let hs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = h
        .req("POST", &format!("/v1/tasks/{t2}/callbacks"), &hs, unbound)
        .await;
    assert_error(&r, 400, "invalid-request", "event.taskId");
    assert_eq!(task(&h, "demo", &t2).await["version"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_accepts_every_listed_secret_and_refuses_a_removed_one() {
    let mut h = harness(|c| {
        c.callback_secrets = vec![
            format!("demo={DEMO_SECRET}"),
            format!("demo={DEMO_NEXT}"),
            format!("other={OTHER_SECRET}"),
        ]
    })
    .await;
    let (old, new) = (key(DEMO_SECRET), key(DEMO_NEXT));
    let id = running(&h, "demo", &old).await;
    let p1 = capture(std::slice::from_ref(&new), &id, "p1", &progress_ev(2, 10));
    assert_eq!(send(&h, &id, &p1).await.json()["reason"], "progress");
    // A sender mid-rotation signs with both, in one header.
    let p2 = capture(&[old.clone(), new.clone()], &id, "p2", &progress_ev(3, 20));
    assert_eq!(send(&h, &id, &p2).await.json()["reason"], "progress");
    // Another tenant's secret and the development one are not the tenant's.
    for wrong in [key(OTHER_SECRET), secret()] {
        let c = capture(&[wrong], &id, "p-wrong", &progress_ev(4, 30));
        assert_error(
            &send(&h, &id, &c).await,
            401,
            "unauthorized",
            "webhook-signature",
        );
    }

    // The old secret is removed: refused from the restart on.
    h.config.callback_secrets = vec![format!("demo={DEMO_NEXT}"), format!("other={OTHER_SECRET}")];
    h.restart().await;
    let p3 = capture(std::slice::from_ref(&old), &id, "p3", &progress_ev(4, 30));
    assert_error(
        &send(&h, &id, &p3).await,
        401,
        "unauthorized",
        "webhook-signature",
    );
    let p3 = capture(std::slice::from_ref(&new), &id, "p3", &progress_ev(4, 30));
    assert_eq!(send(&h, &id, &p3).await.json()["version"], 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_id_used_on_one_task_is_refused_on_another_of_the_tenant() {
    let h = harness(per_tenant).await;
    let (sa, sb) = (key(DEMO_SECRET), key(OTHER_SECRET));
    let t1 = running(&h, "demo", &sa).await;
    let t2 = running(&h, "demo", &sa).await;
    let p = capture(
        std::slice::from_ref(&sa),
        &t1,
        "shared-id",
        &progress_ev(2, 10),
    );
    assert_eq!(send(&h, &t1, &p).await.json()["reason"], "progress");
    // Signed correctly for t2, but under t1's id.
    let again = capture(
        std::slice::from_ref(&sa),
        &t2,
        "shared-id",
        &progress_ev(2, 10),
    );
    let r = send(&h, &t2, &again).await;
    assert_error(&r, 422, "callback-id-reused-for-other-task", "webhook-id");
    assert_eq!(task(&h, "demo", &t2).await["version"], 1);
    // On its own task it is still a redelivery.
    assert_eq!(
        send(&h, &t1, &p).await.json()["reason"],
        "duplicate-callback"
    );
    // Ids are per tenant: another tenant's executor may use the same one.
    let tb = running(&h, "other", &sb).await;
    let theirs = capture(
        std::slice::from_ref(&sb),
        &tb,
        "shared-id",
        &progress_ev(2, 10),
    );
    assert_eq!(send(&h, &tb, &theirs).await.json()["reason"], "progress");

    // Only remembered ids count (core fix 1): an id that changed nothing
    // on a queued task is still free for another task.
    let queued = h.create_default().await;
    let early = capture(
        std::slice::from_ref(&sa),
        &queued,
        "early-id",
        &progress_ev(2, 10),
    );
    assert_eq!(
        send(&h, &queued, &early).await.json()["reason"],
        "not-running"
    );
    let used = capture(
        std::slice::from_ref(&sa),
        &t2,
        "early-id",
        &progress_ev(2, 10),
    );
    assert_eq!(send(&h, &t2, &used).await.json()["reason"], "progress");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_callback_id_raced_on_many_tasks_applies_once() {
    let h = harness(|_| {}).await;
    let dev = secret();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        tasks.push(running(&h, "demo", &dev).await);
    }
    let mut sends = Vec::new();
    for id in &tasks {
        let c = capture(
            std::slice::from_ref(&dev),
            id,
            "raced-id",
            &progress_ev(2, 10),
        );
        let (addr, id) = (h.addr.clone(), id.clone());
        sends.push(tokio::spawn(async move {
            let hs: Vec<(&str, &str)> = c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let path = format!("/v1/tasks/{id}/callbacks");
            taskwire_server::client::request(&addr, "POST", &path, &hs, c.body.clone())
                .await
                .unwrap()
        }));
    }
    let mut statuses = Vec::new();
    for s in sends {
        statuses.push(s.await.unwrap().status);
    }
    statuses.sort();
    assert_eq!(statuses, [200, 422, 422, 422, 422, 422, 422, 422]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_header_sent_twice_is_refused_by_name() {
    let h = harness(|_| {}).await;
    let dev = secret();
    let id = running(&h, "demo", &dev).await;
    let good = capture(std::slice::from_ref(&dev), &id, "p1", &progress_ev(2, 10));
    for (i, name) in ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .iter()
        .enumerate()
    {
        // The second line repeats the first exactly: even an identical
        // copy is refused, not resolved.
        let mut headers: Vec<(&str, &str)> =
            good.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        headers.push((good.headers[i].0, good.headers[i].1.as_str()));
        let r = h
            .req(
                "POST",
                &format!("/v1/tasks/{id}/callbacks"),
                &headers,
                good.body.clone(),
            )
            .await;
        assert_error(
            &r,
            401,
            "unauthorized",
            &format!("{name}: header sent more than once"),
        );
    }
    assert_eq!(task(&h, "demo", &id).await["version"], 1);
    assert_eq!(send(&h, &id, &good).await.json()["reason"], "progress");
}

/// Sends a request head (and `body_part` of its body) on a raw socket and
/// returns what came back within `within`, and how long it took.
async fn stall(addr: &str, head: &str, body_part: &[u8], within: Duration) -> (String, Duration) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body_part).await.unwrap();
    let t0 = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(buf.get(..n).unwrap_or(&[])),
            }
        }
    })
    .await;
    (String::from_utf8_lossy(&got).into_owned(), t0.elapsed())
}

fn head(task: &str, signature_headers: &str, length: u64) -> String {
    format!(
        "POST /v1/tasks/{task}/callbacks HTTP/1.1\r\nhost: test\r\n\
         content-type: application/json\r\ncontent-length: {length}\r\n{signature_headers}\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_judged_before_any_of_the_body_is_read() {
    let h = harness(|_| {}).await;
    let id = running(&h, "demo", &secret()).await;
    let ts = now_secs();
    let tag = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let cases = [
        ("", 60_000, "401 ", "webhook-id: header is required"),
        (
            &format!("webhook-id: a\r\nwebhook-timestamp: {}\r\nwebhook-signature: {tag}\r\n", ts - 600),
            60_000,
            "401 ",
            "webhook-timestamp",
        ),
        (
            &format!("webhook-id: a\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: v1,nope\r\n"),
            60_000,
            "401 ",
            "no well-formed v1 signature",
        ),
        (
            &format!("webhook-id: a\r\nwebhook-id: b\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {tag}\r\n"),
            60_000,
            "401 ",
            "webhook-id: header sent more than once",
        ),
        (
            &format!("webhook-id: {}\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {tag}\r\n", "x".repeat(256)),
            60_000,
            "400 ",
            "webhook-id: must be at most 255 bytes",
        ),
        (
            &format!("webhook-id: a\r\nwebhook-timestamp: {ts}\r\nwebhook-signature: {tag}\r\n"),
            10_000_000,
            "413 ",
            "payload-too-large",
        ),
    ];
    for (headers, length, status, says) in cases {
        // The body never comes: an answer can only be the headers' verdict.
        let (answer, took) = stall(
            &h.addr,
            &head(&id, headers, length),
            b"{",
            Duration::from_secs(5),
        )
        .await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{headers:?}: {answer:?}"
        );
        assert!(answer.contains(says), "{answer}");
        assert!(
            took < Duration::from_secs(2),
            "{headers:?}: answered after {took:?}"
        );
    }
    assert_eq!(task(&h, "demo", &id).await["version"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_in_time_is_408() {
    let h = harness(|c| c.callback_body_timeout_ms = 300).await;
    let dev = secret();
    for known in [true, false] {
        let id = match known {
            true => running(&h, "demo", &dev).await,
            false => "tsk_unknown".to_string(),
        };
        // Well-formed headers (a wrong signature cannot be told before the
        // body), 2 of 100 bytes sent.
        let signed = dev.headers("slow", now_secs(), b"never sent");
        let headers: String = signed
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        let (answer, took) = stall(
            &h.addr,
            &head(&id, &headers, 100),
            b"{ ",
            Duration::from_secs(5),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 408 "), "{answer:?}");
        assert!(answer.contains("\"request-timeout\""), "{answer}");
        assert!(
            answer.contains("body: not received within 300 ms"),
            "{answer}"
        );
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(3),
            "{took:?}"
        );
        if known {
            assert_eq!(task(&h, "demo", &id).await["version"], 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_in_many_chunks_of_every_size_is_read_whole() {
    let h = harness(|_| {}).await;
    let dev = secret();
    let id = running(&h, "demo", &dev).await;
    // A result long enough for pieces above and below 4 KiB.
    let event =
        json!({"type": "succeed", "atMs": 5, "resultRef": "r".repeat(9000), "resultHash": "h"});
    let c = capture(std::slice::from_ref(&dev), &id, "chunked", &event);
    let headers: String = c
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let mut body = Vec::new();
    let bytes = c.body.as_bytes();
    let mut at = 0;
    for size in [1, 1, 7, 5000, 3, 4096, 2].iter().cycle() {
        let end = (at + size).min(bytes.len());
        body.extend_from_slice(format!("{:x}\r\n", end - at).as_bytes());
        body.extend_from_slice(&bytes[at..end]);
        body.extend_from_slice(b"\r\n");
        at = end;
        if at == bytes.len() {
            break;
        }
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let head = format!(
        "POST /v1/tasks/{id}/callbacks HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n{headers}\r\n"
    );
    let (answer, _) = stall(&h.addr, &head, &body, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(answer.contains("\"reason\":\"succeeded\""), "{answer}");
    assert_eq!(task(&h, "demo", &id).await["resultRef"], event["resultRef"]);
}

/// A `fail` without `attempt` that was a no-op while the task was queued
/// is not remembered by its id (core fix 1 lets an early callback apply
/// later), but the signed request is: the same bytes replayed after
/// `start`, within the timestamp tolerance, are a duplicate callback and
/// change nothing (issue 24, F1b). The same event signed again, as a
/// resend is, applies: seed 000's rule, kept exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noop_fail_without_attempt_replayed_after_start_is_a_duplicate_and_applies_signed_again()
{
    let h = harness(|_| {}).await;
    let dev = secret();
    let id = h
        .create("demo", json!({"ttlMs": 3_600_000, "maxAttempts": 1}))
        .await;
    let early = capture(
        std::slice::from_ref(&dev),
        &id,
        "fail-1",
        &fail_ev(5, false),
    );
    let r = send(&h, &id, &early).await.json();
    assert_eq!(
        (r["reason"].clone(), r["changed"].clone()),
        (json!("not-running"), json!(false))
    );
    let start = capture(std::slice::from_ref(&dev), &id, "start-1", &start_ev(10));
    assert_eq!(send(&h, &id, &start).await.json()["reason"], "started");
    // The captured bytes, unchanged.
    let r = send(&h, &id, &early).await.json();
    assert_eq!(
        (
            r["reason"].clone(),
            r["changed"].clone(),
            r["state"].clone()
        ),
        (json!("duplicate-callback"), json!(false), json!("running")),
        "a replay of the queued-time fail changes nothing"
    );
    // Signed again a second later (a resend): judged, and it applies.
    let body = callback_body(&id, &fail_ev(5, false));
    let r = h
        .callback_raw(&id, "fail-1", now_secs() + 1, body.as_bytes())
        .await
        .json();
    assert_eq!(
        (
            r["reason"].clone(),
            r["changed"].clone(),
            r["state"].clone()
        ),
        (json!("failed"), json!(true), json!("failed")),
        "without attempt, a resend of the queued-time fail applies (seed 000)"
    );
}

/// Issue 16's replay, with the attempt token: attempt 1's late `fail`
/// (its lease lapsed, the task was given a new attempt, so the fail was
/// `stale-attempt` and not remembered) replayed byte for byte while
/// attempt 2 runs is fenced off again, and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_of_an_old_attempt_replayed_in_a_new_one_is_fenced() {
    use common::lifecycle::{create_with, start, wait_for};
    let h = harness(|_| {}).await;
    let dev = secret();
    let id = create_with(&h, json!({"unknownGraceMs": 0})).await;
    let first = capture(std::slice::from_ref(&dev), &id, "s1", &start(1, 200));
    assert_eq!(send(&h, &id, &first).await.json()["reason"], "started");
    wait_for(&h, &id, "queued").await;
    let mut late = fail_ev(common::lifecycle::now_ms(), false);
    late["attempt"] = json!(1);
    let late = capture(std::slice::from_ref(&dev), &id, "f1", &late);
    assert_eq!(send(&h, &id, &late).await.json()["reason"], "stale-attempt");
    let second = capture(std::slice::from_ref(&dev), &id, "s2", &start(2, 60_000));
    assert_eq!(send(&h, &id, &second).await.json()["reason"], "started");
    // The same bytes: the signed request was used (a duplicate); signed
    // again, the attempt token fences it (stale).
    let again = Captured {
        headers: signed_headers(
            std::slice::from_ref(&dev),
            "f1",
            now_secs() + 1,
            late.body.as_bytes(),
        ),
        body: late.body.clone(),
    };
    for (c, reason) in [(&late, "duplicate-callback"), (&again, "stale-attempt")] {
        let r = send(&h, &id, c).await.json();
        assert_eq!(
            (
                r["reason"].clone(),
                r["changed"].clone(),
                r["state"].clone()
            ),
            (json!(reason), json!(false), json!("running")),
            "{r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_16_kib_is_431_and_one_under_it_is_served() {
    let h = harness(|_| {}).await;
    for (padding, status) in [(15 * 1024, "404 "), (17 * 1024, "431 ")] {
        let head = format!(
            "GET /v1/tasks/tsk_nope HTTP/1.1\r\nhost: test\r\nauthorization: Bearer demo\r\n\
             x-padding: {}\r\nconnection: close\r\n\r\n",
            "p".repeat(padding)
        );
        let (answer, _) = stall(&h.addr, &head, b"", Duration::from_secs(5)).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{padding}: {answer:.80}"
        );
    }
}

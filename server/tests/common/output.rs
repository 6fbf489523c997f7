//! Live output scenarios (PROTOCOL.md §Live output), run on SQLite
//! (tests/output.rs) and PostgreSQL (tests/postgres_output.rs).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use taskwire_core::OutputMirror;
use taskwire_server::client::{self, Reply};

use super::lifecycle::{create_with, ev, start, succeed, task};
use super::{assert_error, now_secs, secret, Harness, ReplyJson};

static APPENDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The body an executor signs for an append.
pub fn append_body(task: &str, stream: &str, attempt: u64, offset: u64, text: &str) -> String {
    json!({"taskId": task, "stream": stream, "attempt": attempt, "offset": offset, "text": text})
        .to_string()
}

/// POSTs `body` to `task`'s `stream`, signed with the development secret.
pub async fn append_raw(h: &Harness, task: &str, stream: &str, body: String) -> Reply {
    let n = APPENDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("out_{}_{n}", std::process::id());
    let signed = secret().headers(&id, now_secs(), body.as_bytes());
    let headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    h.req(
        "POST",
        &format!("/v1/tasks/{task}/output/{stream}"),
        &headers,
        body,
    )
    .await
}

/// Appends `text` to `draft` at `(attempt, offset)`.
pub async fn append(h: &Harness, task: &str, attempt: u64, offset: u64, text: &str) -> Reply {
    append_raw(
        h,
        task,
        "draft",
        append_body(task, "draft", attempt, offset, text),
    )
    .await
}

/// An append that must be delivered with `reason`; returns the answer.
pub async fn delivered(h: &Harness, task: &str, chunk: (u64, u64, &str), reason: &str) -> Value {
    let r = append(h, task, chunk.0, chunk.1, chunk.2).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let a = r.json();
    assert_eq!(a["reason"], reason, "{a}");
    a
}

/// The `output` of a long-poll that asks for `draft` from `(attempt,
/// offset)` (not held).
pub async fn output_from(h: &Harness, task: &str, attempt: u64, offset: u64) -> Value {
    let r = h
        .get(
            "demo",
            &format!(
                "/v1/tasks/{task}/resume?cursor=0&output=draft&outputAttempt={attempt}&outputOffset={offset}"
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()["output"].clone()
}

/// Duplicate, conflict, gap, fencing, supersede, close; no task version.
pub async fn append_rules_scenario(h: &Harness) {
    let id = create_with(h, json!({"maxAttempts": 3})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    let version = task(h, &id).await["version"].clone();
    let a = delivered(h, &id, (1, 0, "Hello"), "appended").await;
    assert_eq!(
        (a["offset"].clone(), a["expected"].clone()),
        (json!(0), json!(5))
    );
    delivered(h, &id, (1, 0, "Hello"), "duplicate-chunk").await;
    delivered(h, &id, (1, 0, "Hel"), "duplicate-chunk").await;
    assert_error(
        &append(h, &id, 1, 0, "Howdy").await,
        409,
        "chunk-conflict",
        "body.text",
    );
    let gap = append(h, &id, 1, 9, "x").await;
    assert_error(&gap, 409, "output-gap", "body.offset");
    assert!(
        gap.json()["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("starts at 5"),
        "{:?}",
        gap.json()
    );
    assert_error(
        &append(h, &id, 2, 0, "x").await,
        409,
        "not-started",
        "body.attempt",
    );
    // An overlap that agrees appends only what is new.
    let a = delivered(h, &id, (1, 3, "lo, world"), "appended").await;
    assert_eq!(
        (a["offset"].clone(), a["expected"].clone()),
        (json!(5), json!(12))
    );
    assert_eq!(
        task(h, &id).await["version"],
        version,
        "output makes no version"
    );
    assert_eq!(output_from(h, &id, 0, 0).await["text"], "Hello, world");

    // Attempt 1 fails and is retried: its text is replaced, its chunks fenced.
    h.ok_callback(
        &id,
        "f1",
        ev("fail", 1, json!({"error": "boom", "retryable": true})),
    )
    .await;
    h.ok_callback(&id, "s2", start(2, 60_000)).await;
    let replaced = output_from(h, &id, 1, 12).await;
    assert_eq!(
        (
            replaced["attempt"].clone(),
            replaced["offset"].clone(),
            replaced["text"].clone()
        ),
        (json!(2), json!(0), json!("")),
        "a follower of attempt 1 learns at once that attempt 2 started"
    );
    assert_error(
        &append(h, &id, 1, 12, "!").await,
        409,
        "stale-attempt",
        "body.attempt",
    );
    let a = delivered(h, &id, (2, 0, "Bonjour"), "appended").await;
    assert_eq!(a["superseded"], true, "{a}");
    let out = output_from(h, &id, 1, 12).await;
    assert_eq!(
        (out["attempt"].clone(), out["text"].clone()),
        (json!(2), json!("Bonjour"))
    );
    assert_eq!(out["complete"], false);

    // The task ends: the output is closed, a resend is still a duplicate.
    h.ok_callback(&id, "ok2", succeed(2)).await;
    assert_error(
        &append(h, &id, 2, 7, "!").await,
        409,
        "output-closed",
        "body.attempt",
    );
    delivered(h, &id, (2, 0, "Bonjour"), "duplicate-chunk").await;
    let end = output_from(h, &id, 2, 7).await;
    assert_eq!(
        (end["text"].clone(), end["complete"].clone()),
        (json!(""), json!(true))
    );
}

/// Bad input gets a stable code naming the field; a body signed for
/// another stream or task is refused as unsigned.
pub async fn refusals_scenario(h: &Harness) {
    let id = create_with(h, json!({})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    let bad_name = append_raw(h, &id, "Draft!", append_body(&id, "Draft!", 1, 0, "x")).await;
    assert_error(&bad_name, 400, "invalid-request", "stream");
    assert_error(
        &append(h, &id, 1, 0, "").await,
        400,
        "invalid-request",
        "body.text",
    );
    assert_error(
        &append(h, &id, 0, 0, "x").await,
        400,
        "invalid-request",
        "body.attempt",
    );
    let big = "x".repeat(65_537);
    assert_error(
        &append(h, &id, 1, 0, &big).await,
        400,
        "invalid-request",
        "body.text",
    );
    let past = append(h, &id, 1, 1_048_575, "xy").await;
    assert_error(&past, 400, "invalid-request", "body.offset");
    let other_stream = append_raw(h, &id, "draft", append_body(&id, "log", 1, 0, "x")).await;
    assert_error(&other_stream, 401, "unauthorized", "body.taskId");
    let unknown = append(h, "tsk_nope", 1, 0, "x").await;
    assert_error(&unknown, 401, "unauthorized", "webhook-signature");
    let no_sig = h
        .req(
            "POST",
            &format!("/v1/tasks/{id}/output/draft"),
            &[],
            append_body(&id, "draft", 1, 0, "x"),
        )
        .await;
    assert_eq!(no_sig.status, 401);
    let out = h
        .get(
            "demo",
            &format!("/v1/tasks/{id}/resume?cursor=0&output=Nope"),
        )
        .await;
    assert_error(&out, 400, "invalid-request", "output");
    let past = h
        .get(
            "demo",
            &format!("/v1/tasks/{id}/resume?cursor=0&outputOffset=9007199254740992"),
        )
        .await;
    assert_error(&past, 400, "invalid-request", "outputOffset");
}

/// A follower resumes by offset; one that asks for no output gets the
/// answer it got before output existed.
pub async fn resume_scenario(h: &Harness) {
    let id = create_with(h, json!({})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    let plain = format!("/v1/tasks/{id}/resume?cursor=0");
    let before = h.get("demo", &plain).await.body;
    delivered(h, &id, (1, 0, "Hello"), "appended").await;
    delivered(h, &id, (1, 5, ", wörld 😀"), "appended").await;
    assert_eq!(
        h.get("demo", &plain).await.body,
        before,
        "no output unless asked"
    );
    let rest = output_from(h, &id, 1, 5).await;
    assert_eq!(
        rest,
        json!({"stream": "draft", "attempt": 1, "offset": 5, "text": ", wörld 😀", "complete": false})
    );
    // Units are UTF-16: the emoji is two.
    assert_eq!(output_from(h, &id, 1, 12).await["text"], " 😀");
    assert_eq!(output_from(h, &id, 1, 15).await["text"], "");
    let other = h
        .get(
            "demo",
            &format!("/v1/tasks/{id}/resume?cursor=0&output=log"),
        )
        .await
        .json();
    assert_eq!(
        (
            other["output"]["attempt"].clone(),
            other["output"]["text"].clone()
        ),
        (json!(1), json!(""))
    );
    // Another tenant sees nothing of it.
    let r = h
        .get(
            "other",
            &format!("/v1/tasks/{id}/resume?cursor=0&output=draft"),
        )
        .await;
    assert_eq!(r.status, 404);
}

/// A held long-poll that asks for output wakes on a chunk within the
/// wake latency of a task update; one that does not ask is not woken.
pub async fn held_long_poll_scenario(h: &Harness) {
    let id = create_with(h, json!({})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    let version = task(h, &id).await["version"].as_u64().unwrap();
    delivered(h, &id, (1, 0, "Hello"), "appended").await;
    let addr = h.addr.clone();
    let held = format!(
        "/v1/tasks/{id}/resume?cursor={version}&waitMs=10000&output=draft&outputAttempt=1&outputOffset=5"
    );
    let plain = format!("/v1/tasks/{id}/resume?cursor={version}&waitMs=1500");
    let get = |path: String| {
        let addr = addr.clone();
        tokio::spawn(async move {
            let began = Instant::now();
            let r = client::request_within(
                &addr,
                "GET",
                &path,
                &[("authorization", "Bearer demo")],
                "",
                1 << 20,
            )
            .await
            .expect("request");
            (r, began.elapsed())
        })
    };
    let with_output = get(held);
    let without = get(plain);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = Instant::now();
    delivered(h, &id, (1, 5, ", world"), "appended").await;
    let (r, _) = with_output.await.unwrap();
    let woke_after = sent.elapsed();
    let answer = r.json();
    assert_eq!(answer["output"]["text"], ", world", "{answer}");
    assert_eq!(answer["mode"], "caught-up", "no task version: {answer}");
    assert!(
        woke_after < Duration::from_secs(1),
        "woken after {woke_after:?}"
    );
    let (r, took) = without.await.unwrap();
    assert!(r.json().get("output").is_none());
    assert!(
        took >= Duration::from_millis(1400),
        "a plain long-poll is not woken by output ({took:?})"
    );
}

/// Over SSE, the output messages assemble (core's `OutputMirror`, the
/// page's assembler) into the executor's exact text, then close.
pub async fn sse_scenario(h: &Harness) {
    let id = create_with(h, json!({})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    delivered(h, &id, (1, 0, "The quick "), "appended").await;
    let addr = h.addr.clone();
    let path = format!("/v1/tasks/{id}/events?output=draft&outputAttempt=1&outputOffset=4");
    let stream = tokio::spawn(async move {
        client::request_within(
            &addr,
            "GET",
            &path,
            &[("authorization", "Bearer demo")],
            "",
            1 << 20,
        )
        .await
        .expect("request")
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut at = 10;
    for word in ["brown ", "fox ", "jumps."] {
        delivered(h, &id, (1, at, word), "appended").await;
        at += word.len() as u64;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    h.ok_callback(&id, "ok", succeed(1)).await;
    let r = tokio::time::timeout(Duration::from_secs(10), stream)
        .await
        .expect("the stream ends after the end")
        .unwrap();
    let body = String::from_utf8(r.body.to_vec()).unwrap();
    let mut mirror = OutputMirror::new();
    mirror.apply(1, 0, "The ");
    let mut outputs = 0;
    for message in body.split("\n\n") {
        if !message.contains("event: output") {
            continue;
        }
        outputs += 1;
        let data = message
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap();
        let o: Value = serde_json::from_str(data).unwrap();
        let attempt = o["attempt"].as_u64().unwrap();
        mirror.apply(
            attempt,
            o["offset"].as_u64().unwrap(),
            o["text"].as_str().unwrap(),
        );
        if o["complete"] == true {
            mirror.close(attempt);
        }
    }
    assert!(outputs >= 2, "{body}");
    assert_eq!(mirror.text(), "The quick brown fox jumps.", "{body}");
    assert!(mirror.is_closed(), "{body}");
    assert!(body.contains("\"state\":\"succeeded\""), "{body}");
}

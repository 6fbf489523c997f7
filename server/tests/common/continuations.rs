//! A continuation is not a failure (issue 26), over HTTP, shared by the
//! SQLite and PostgreSQL tests: what a page reads with `GET` around an
//! approval, a retry and a lapse. The rule itself is core's
//! (PROTOCOL.md §Continuations); these check that the server stores and
//! shows what core decided, and that its sweeper's lapse and abandon
//! follow it too.

use serde_json::{json, Value};

use super::lifecycle::{act, create_with, ev, start, succeed, task, wait_for};
use super::Harness;

fn progress(attempt: u64, p: u64) -> Value {
    ev(
        "progress",
        attempt,
        json!({"progress": p, "cursor": format!("c{p}")}),
    )
}

fn hold(attempt: u64, hash: &str) -> Value {
    ev(
        "hold",
        attempt,
        json!({"artifactRef": "blob://draft", "artifactHash": hash}),
    )
}

fn retryable_fail(attempt: u64) -> Value {
    ev(
        "fail",
        attempt,
        json!({"error": "timeout", "retryable": true}),
    )
}

/// Holds the running task on `hash` and decides `decision` on it; returns
/// the decision's answer.
async fn hold_and_decide(h: &Harness, id: &str, attempt: u64, hash: &str, decision: &str) -> Value {
    let held = h.ok_callback(id, "hold", hold(attempt, hash)).await;
    assert_eq!(held["state"], "waiting_approval", "{held}");
    act(
        h,
        id,
        "decisions",
        json!({"decision": decision, "artifactHash": hash, "version": held["version"]}),
    )
    .await
}

/// A task with `maxAttempts: 1` held at 89 % and approved: its next
/// attempt runs (the approval spent no attempt), and the bar never drops
/// below 89 on the way to 100. The reported bug: 89 → 0 → 0 → 50 → 100.
pub async fn approval_continues_scenario(h: &Harness) {
    let id = create_with(h, json!({"maxAttempts": 1})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    h.ok_callback(&id, "p89", progress(1, 89)).await;
    let approved = hold_and_decide(h, &id, 1, "sha256:d1", "approve").await;
    assert_eq!(approved["reason"], "approved", "{approved}");
    let queued = task(h, &id).await;
    assert_eq!(
        (
            &queued["state"],
            &queued["progress"],
            &queued["attempts"],
            &queued["continuations"]
        ),
        (&json!("queued"), &json!(89), &json!(1), &json!(1)),
        "the decision keeps progress and grants a start: {queued}"
    );
    let next = h.ok_callback(&id, "s2", start(2, 60_000)).await;
    assert_eq!(
        (&next["reason"], &next["state"]),
        (&json!("started"), &json!("running")),
        "maxAttempts 1 does not stop the continuation: {next}"
    );
    assert_eq!(task(h, &id).await["progress"], 89, "the start keeps it");
    let lower = h.ok_callback(&id, "p50", progress(2, 50)).await;
    assert_eq!(
        (&lower["reason"], &lower["changed"]),
        (&json!("stale-progress"), &json!(false)),
        "{lower}"
    );
    assert_eq!(task(h, &id).await["progress"], 89);
    let done = h.ok_callback(&id, "ok", succeed(2)).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let t = task(h, &id).await;
    assert_eq!(
        (&t["attempts"], &t["maxAttempts"], &t["progress"]),
        (&json!(2), &json!(1), &json!(100)),
        "{t}"
    );
}

/// A retried failure's error stays through the next start (seed fix 5),
/// and is gone once the task continues: after `request_changes`, and after
/// the first progress of the current attempt.
pub async fn stale_error_on_continuation_scenario(h: &Harness) {
    let id = create_with(h, json!({"maxAttempts": 2})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    h.ok_callback(&id, "f1", retryable_fail(1)).await;
    h.ok_callback(&id, "s2", start(2, 60_000)).await;
    assert_eq!(task(h, &id).await["error"], "timeout", "kept by the start");
    let asked = hold_and_decide(h, &id, 2, "sha256:b1", "request_changes").await;
    assert_eq!(asked["reason"], "changes-requested", "{asked}");
    let t = task(h, &id).await;
    assert!(t.get("error").is_none(), "cleared by the continuation: {t}");
    let third = h.ok_callback(&id, "s3", start(3, 60_000)).await;
    assert_eq!(third["state"], "running", "a granted start: {third}");

    let other = create_with(h, json!({"maxAttempts": 2})).await;
    h.ok_callback(&other, "s1", start(1, 60_000)).await;
    h.ok_callback(&other, "f1", retryable_fail(1)).await;
    h.ok_callback(&other, "s2", start(2, 60_000)).await;
    h.ok_callback(&other, "p10", progress(2, 10)).await;
    let t = task(h, &other).await;
    assert!(
        t.get("error").is_none(),
        "cleared by attempt 2's report: {t}"
    );
}

/// The server's own sweeper: a lapse keeps progress and the report that
/// recovers the attempt clears the earlier error; a lease given up for
/// good re-queues with "lease lapsed…", which the next attempt's first
/// report clears. The reported bug: that error stayed while attempt 2 ran
/// fine.
pub async fn stale_error_after_a_lapse_scenario(h: &Harness) {
    let id = create_with(h, json!({"unknownGraceMs": 1_000})).await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    h.ok_callback(&id, "f1", retryable_fail(1)).await;
    h.ok_callback(&id, "s2", start(2, 400)).await;
    h.ok_callback(&id, "p40", progress(2, 40)).await;
    // The progress already cleared "timeout"; the lapse keeps 40 %.
    let unknown = wait_for(h, &id, "unknown").await;
    assert_eq!(unknown["progress"], 40, "{unknown}");
    let back = h.ok_callback(&id, "p30", progress(2, 30)).await;
    assert_eq!(back["reason"], "recovered", "{back}");
    assert_eq!(
        task(h, &id).await["progress"],
        40,
        "never back across a lapse"
    );

    let requeued = wait_for(h, &id, "queued").await;
    assert_eq!(
        requeued["error"], "lease lapsed, no sign in the grace period",
        "{requeued}"
    );
    assert_eq!(requeued["progress"], 0, "the work starts over: {requeued}");
    h.ok_callback(&id, "s3", start(3, 60_000)).await;
    h.ok_callback(&id, "p5", progress(3, 5)).await;
    let t = task(h, &id).await;
    assert!(t.get("error").is_none(), "attempt 3 runs fine: {t}");

    // A recovery clears an earlier failure's error.
    let other = create_with(h, json!({"unknownGraceMs": 60_000})).await;
    h.ok_callback(&other, "s1", start(1, 60_000)).await;
    h.ok_callback(&other, "f1", retryable_fail(1)).await;
    h.ok_callback(&other, "s2", start(2, 300)).await;
    let unknown = wait_for(h, &other, "unknown").await;
    assert_eq!(unknown["error"], "timeout", "{unknown}");
    let back = h
        .ok_callback(&other, "hb", ev("heartbeat", 2, json!({})))
        .await;
    assert_eq!(back["reason"], "recovered", "{back}");
    let t = task(h, &other).await;
    assert!(t.get("error").is_none(), "cleared by the recovery: {t}");
}

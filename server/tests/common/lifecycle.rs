//! The lifecycle scenarios (issue 11) over HTTP, shared by the SQLite and
//! PostgreSQL tests: each takes a harness and checks what a page and an
//! executor see.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{assert_error, Harness, ReplyJson};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Creates a task for tenant `demo` with extra create fields.
pub async fn create_with(h: &Harness, extra: Value) -> String {
    let mut body = json!({"ttlMs": 3_600_000, "maxAttempts": 3});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    h.create("demo", body).await
}

/// An executor event of `attempt`, at now.
pub fn ev(kind: &str, attempt: u64, extra: Value) -> Value {
    let mut e = json!({"type": kind, "atMs": now_ms(), "attempt": attempt});
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    e
}

pub fn start(attempt: u64, lease_ms: u64) -> Value {
    ev(
        "start",
        attempt,
        json!({"worker": format!("w{attempt}"), "leaseMs": lease_ms}),
    )
}

/// The `succeed` of `attempt`, with a result (`blob://r`, `sha256:r`).
pub fn succeed(attempt: u64) -> Value {
    ev(
        "succeed",
        attempt,
        json!({"resultRef": "blob://r", "resultHash": "sha256:r"}),
    )
}

/// POSTs a person's request; must be answered 200.
pub async fn act(h: &Harness, task: &str, what: &str, body: Value) -> Value {
    let r = h
        .post(
            "demo",
            &format!("/v1/tasks/{task}/{what}"),
            &[],
            &body.to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{what}: {:?}", r.json());
    r.json()
}

pub async fn task(h: &Harness, id: &str) -> Value {
    let r = h.get("demo", &format!("/v1/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    r.json()
}

/// Waits (5 s at most) until the task is in `state`.
pub async fn wait_for(h: &Harness, id: &str, state: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let t = task(h, id).await;
        if t["state"] == state {
            return t;
        }
        assert!(Instant::now() < until, "never {state}: {t}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Types of the task's history entries, in order.
pub async fn history(h: &Harness, id: &str) -> Vec<String> {
    let (_, answer) = h.resume("demo", id, "cursor=0").await;
    answer
        .events()
        .iter()
        .map(|e| e.event.kind().as_str().to_string())
        .collect()
}

/// Cancel: at once without a worker, `cancelling` with one, told to the
/// executor in its next answer, acknowledged or not, and never twice.
pub async fn cancel_scenario(h: &Harness) {
    // Queued: cancelled at once, and a repeat is a duplicate.
    let queued = create_with(h, json!({})).await;
    let a = act(h, &queued, "cancel", json!({"reason": "changed my mind"})).await;
    assert_eq!(
        (a["changed"].clone(), a["reason"].clone()),
        (json!(true), json!("cancelled"))
    );
    assert_eq!(a["task"]["state"], "cancelled");
    let again = act(h, &queued, "cancel", json!({})).await;
    assert_eq!(again["reason"], "duplicate-cancel", "{again}");
    assert_eq!(again["task"]["version"], a["task"]["version"]);
    let feed = h.get("demo", "/v1/notifications?after=0").await.json();
    let notes: Vec<&Value> = feed["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["taskId"] == queued.as_str())
        .collect();
    assert_eq!(notes.len(), 1, "one notification: {feed}");
    assert_eq!(notes[0]["state"], "cancelled");

    // Running: cancelling; the executor learns it from its next answer.
    let running = create_with(h, json!({})).await;
    h.ok_callback(&running, "s", start(1, 60_000)).await;
    let a = act(h, &running, "cancel", json!({})).await;
    assert_eq!(a["task"]["state"], "cancelling", "{a}");
    let beat = h
        .ok_callback(&running, "hb", ev("heartbeat", 1, json!({})))
        .await;
    assert_eq!(beat["cancelRequested"], true, "{beat}");
    assert_eq!(beat["changed"], false, "{beat}");
    let done = h
        .ok_callback(&running, "ack", ev("ack_cancel", 1, json!({})))
        .await;
    assert_eq!(
        (done["state"].clone(), done["notify"].clone()),
        (json!("cancelled"), json!(true))
    );

    // The cancel that cannot take effect shows, and a result that comes
    // anyway ends the task cancelled, never delivered.
    let stuck = create_with(h, json!({})).await;
    h.ok_callback(&stuck, "s", start(1, 60_000)).await;
    act(h, &stuck, "cancel", json!({})).await;
    let no = h
        .ok_callback(
            &stuck,
            "no",
            ev(
                "cannot_cancel",
                1,
                json!({"reason": "remote job cannot be aborted"}),
            ),
        )
        .await;
    assert_eq!(no["state"], "cancel_ineffective", "{no}");
    let late = h
        .ok_callback(
            &stuck,
            "ok",
            ev(
                "succeed",
                1,
                json!({"resultRef": "blob://r", "resultHash": "sha256:aa"}),
            ),
        )
        .await;
    assert_eq!(late["reason"], "succeeded-after-cancel", "{late}");
    assert_eq!(late["state"], "cancelled", "{late}");
    let r = h
        .post(
            "demo",
            &format!("/v1/tasks/{stuck}/deliveries"),
            &[("idempotency-key", "d1")],
            "",
        )
        .await;
    assert_eq!(r.status, 409, "a cancelled task's result is not delivered");
}

/// Approval: a hold waits for a person; a decision on another artifact or
/// an older version is stale; approve re-queues, and the next attempt
/// goes on.
pub async fn approval_scenario(h: &Harness) {
    let id = create_with(h, json!({})).await;
    h.ok_callback(&id, "s", start(1, 60_000)).await;
    let held = h
        .ok_callback(
            &id,
            "hold",
            ev(
                "hold",
                1,
                json!({"artifactRef": "blob://draft-1", "artifactHash": "sha256:d1",
                       "question": "Publish this summary?"}),
            ),
        )
        .await;
    assert_eq!(held["state"], "waiting_approval", "{held}");
    let version = held["version"].as_u64().unwrap();
    let stale_hash = act(
        h,
        &id,
        "decisions",
        json!({"decision": "approve", "artifactHash": "sha256:old", "version": version}),
    )
    .await;
    assert_eq!(stale_hash["reason"], "stale-decision", "{stale_hash}");
    assert_eq!(stale_hash["changed"], false);
    let stale_version = act(
        h,
        &id,
        "decisions",
        json!({"decision": "approve", "artifactHash": "sha256:d1", "version": version - 1}),
    )
    .await;
    assert_eq!(stale_version["reason"], "stale-decision", "{stale_version}");
    let approved = act(
        h,
        &id,
        "decisions",
        json!({"decision": "approve", "artifactHash": "sha256:d1", "version": version}),
    )
    .await;
    assert_eq!(approved["reason"], "approved", "{approved}");
    assert_eq!(approved["task"]["state"], "queued");
    assert_eq!(approved["task"]["decision"], "approve", "{approved}");
    assert_eq!(approved["task"]["decisionVersion"], version, "{approved}");
    let next = h.ok_callback(&id, "s2", start(2, 60_000)).await;
    assert_eq!(next["state"], "running", "{next}");
    let (_, answer) = h.resume("demo", &id, "cursor=0").await;
    let decided = serde_json::to_value(&answer.events()[2].event).unwrap();
    assert_eq!(
        (decided["type"].clone(), decided["actor"].clone()),
        (json!("decide"), json!("tenant:demo")),
        "the actor is the caller's credential"
    );

    // Who decided comes from the credential, never the body.
    let r = h
        .post(
            "demo",
            &format!("/v1/tasks/{id}/decisions"),
            &[],
            &json!({"decision": "reject", "artifactHash": "sha256:d1", "version": 1,
                    "actor": "someone-else"})
            .to_string(),
        )
        .await;
    assert_error(&r, 400, "invalid-request", "body.actor");
    let r = h
        .post(
            "demo",
            &format!("/v1/tasks/{id}/decisions"),
            &[],
            &json!({"decision": "maybe", "artifactHash": "sha256:d1", "version": 1}).to_string(),
        )
        .await;
    assert_error(&r, 400, "invalid-request", "decision");
}

/// A dead worker: its lease lapses (`unknown`), the grace period re-queues
/// the task as a new attempt, and the zombie's late result is fenced off.
/// A heartbeat renews without a version.
pub async fn dead_worker_scenario(h: &Harness) {
    let id = create_with(h, json!({"unknownGraceMs": 300})).await;
    h.ok_callback(&id, "s", start(1, 400)).await;
    let v_before = task(h, &id).await["version"].as_u64().unwrap();
    let beat = h
        .ok_callback(&id, "hb", ev("heartbeat", 1, json!({})))
        .await;
    assert_eq!(
        (beat["changed"].clone(), beat["reason"].clone()),
        (json!(false), json!("heartbeat"))
    );
    assert_eq!(task(h, &id).await["version"].as_u64().unwrap(), v_before);
    wait_for(h, &id, "unknown").await;
    let requeued = wait_for(h, &id, "queued").await;
    assert_eq!(requeued["attempts"], 1, "{requeued}");
    let zombie = h
        .ok_callback(
            &id,
            "zombie",
            ev(
                "succeed",
                1,
                json!({"resultRef": "blob://old", "resultHash": "sha256:old"}),
            ),
        )
        .await;
    assert_eq!(zombie["reason"], "stale-attempt", "{zombie}");
    assert_eq!(zombie["changed"], false);
    h.ok_callback(&id, "s2", start(2, 60_000)).await;
    let ok = h
        .ok_callback(
            &id,
            "ok2",
            ev(
                "succeed",
                2,
                json!({"resultRef": "blob://new", "resultHash": "sha256:new"}),
            ),
        )
        .await;
    assert_eq!(ok["state"], "succeeded", "{ok}");
    assert_eq!(
        history(h, &id).await,
        ["start", "lapse", "abandon", "start", "succeed"],
        "no entry for the heartbeat or the zombie"
    );
}

/// The execution deadline: past it the task is `timed_out`, notified,
/// while the TTL is still far.
pub async fn deadline_scenario(h: &Harness) {
    let id = create_with(h, json!({"deadlineMs": 300})).await;
    h.ok_callback(&id, "s", start(1, 60_000)).await;
    let t = wait_for(h, &id, "timed_out").await;
    assert!(t["expiresAtMs"].as_f64().unwrap() > now_ms() as f64 + 3_000_000.0);
    assert_eq!(history(h, &id).await, ["start", "timeout"]);
    // Notified at the time it fell due (the entry's atMs, core's
    // Book::sweep_due), not when the sweeper noticed (PROTOCOL.md §The
    // sweeper).
    let feed = h.get("demo", "/v1/notifications?after=0").await.json();
    let note = feed["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["taskId"] == id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("no notification of {id}: {feed}"));
    assert_eq!(
        (note["state"].clone(), note["atMs"].clone()),
        (json!("timed_out"), t["deadlineAtMs"].clone()),
        "{note}"
    );
}

/// What an executor may not send: a person's requests and the sweeper's
/// events.
pub async fn refusals_scenario(h: &Harness) {
    let id = create_with(h, json!({})).await;
    for (n, event) in [
        json!({"type": "cancel", "atMs": now_ms()}),
        json!({"type": "decide", "atMs": now_ms(), "decision": "approve",
               "artifactHash": "sha256:x", "version": 1}),
        json!({"type": "lapse", "atMs": now_ms()}),
        json!({"type": "timeout", "atMs": now_ms()}),
    ]
    .into_iter()
    .enumerate()
    {
        let r = h.callback(&id, &format!("x{n}"), &event).await;
        assert_error(&r, 422, "not-an-executor-event", "event.type");
    }
    assert_eq!(task(h, &id).await["version"], 0);
}

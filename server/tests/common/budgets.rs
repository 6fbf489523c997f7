//! Budgets and side effects (issue 26, PROTOCOL.md §Budgets and side
//! effects) over HTTP, shared by the SQLite and PostgreSQL tests. The
//! rules are core's; these check what only a store can break: that a
//! reservation is judged under the task's lock, so reservations sent at
//! once (to one server, or to two servers on one database) never grant
//! more than the budget, and that the answers carry what core decided.

use futures_util::future::join_all;
use serde_json::{json, Value};

use super::json::ReplyJson;
use super::lifecycle::{create_with, ev, start, task};
use super::{assert_error, Harness};

fn reserve(attempt: u64, id: &str, tokens: u64) -> Value {
    ev(
        "reserve",
        attempt,
        json!({"reservation": id, "tokens": tokens}),
    )
}

/// Sends `n` reservations of 100 tokens at once against a budget of
/// 1,000, spread over `servers`; exactly 10 are granted.
pub async fn concurrent_reservations_scenario(servers: &[&Harness], n: usize) {
    let first = servers[0];
    let id = create_with(first, json!({"budget": {"maxTokens": 1_000}})).await;
    first.ok_callback(&id, "s", start(1, 60_000)).await;
    let sends = (0..n).map(|i| {
        let h = servers[i % servers.len()];
        let id = id.clone();
        async move {
            let r = h
                .callback(
                    &id,
                    &format!("r{i}"),
                    &reserve(1, &format!("call-{i}"), 100),
                )
                .await;
            assert_eq!(r.status, 200, "{:?}", r.json());
            r.json()["reason"].as_str().unwrap_or_default().to_string()
        }
    });
    let reasons = join_all(sends).await;
    let granted = reasons.iter().filter(|r| *r == "budget-reserved").count();
    let refused = reasons.iter().filter(|r| *r == "over-budget").count();
    assert_eq!((granted, refused), (10, n - 10), "{reasons:?}");
    let view = task(first, &id).await;
    assert_eq!(view["reserved"], json!({"tokens": 1_000, "costCents": 0}));
    assert_eq!(view["version"], 11, "one version per granted reservation");
}

/// Settlement, a dead attempt's reservation charged, effects answered
/// with the first resource id, and `exhaust` with a partial result.
pub async fn ledger_scenario(h: &Harness) {
    let bad = h
        .post(
            "demo",
            "/v1/tasks",
            &[],
            &json!({"ttlMs": 60_000, "maxAttempts": 1, "budget": {}}).to_string(),
        )
        .await;
    assert_error(&bad, 400, "invalid-request", "body.budget.maxTokens");
    let bad = h
        .post(
            "demo",
            "/v1/tasks",
            &[],
            &json!({"ttlMs": 60_000, "maxAttempts": 1, "budget": {"maxCostCents": -1}}).to_string(),
        )
        .await;
    assert_error(&bad, 400, "invalid-request", "body.budget.maxCostCents");

    let id = create_with(
        h,
        json!({"maxAttempts": 2, "budget": {"maxTokens": 1_000, "maxCostCents": 40}}),
    )
    .await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    let granted = h.ok_callback(&id, "a", reserve(1, "a", 600)).await;
    assert_eq!(granted["reason"], "budget-reserved", "{granted}");
    let settled = h
        .ok_callback(
            &id,
            "a-done",
            ev(
                "settle",
                1,
                json!({"reservation": "a", "tokens": 250, "costCents": 9, "toolCalls": 1}),
            ),
        )
        .await;
    assert_eq!(settled["reason"], "budget-settled", "{settled}");
    h.ok_callback(&id, "b", reserve(1, "b", 300)).await;
    let view = task(h, &id).await;
    assert_eq!(
        view["used"],
        json!({"tokens": 250, "costCents": 9, "toolCalls": 1})
    );
    assert_eq!(view["reserved"], json!({"tokens": 300, "costCents": 0}));

    // Attempt 1 dies with "b" open: the next start charges it in full.
    h.ok_callback(
        &id,
        "f1",
        ev("fail", 1, json!({"error": "crash", "retryable": true})),
    )
    .await;
    h.ok_callback(&id, "s2", start(2, 60_000)).await;
    let view = task(h, &id).await;
    assert_eq!(
        view["used"],
        json!({"tokens": 550, "costCents": 9, "toolCalls": 1})
    );
    assert!(view.get("reserved").is_none(), "{view}");

    let effect = |resource: &str| {
        ev(
            "effect",
            2,
            json!({"step": "publish", "action": "post-report", "resourceId": resource}),
        )
    };
    let first = h.ok_callback(&id, "e1", effect("REP-7")).await;
    assert_eq!(
        (&first["reason"], &first["resourceId"]),
        (&json!("effect-recorded"), &json!("REP-7"))
    );
    let again = h.ok_callback(&id, "e2", effect("REP-8")).await;
    assert_eq!(
        (&again["reason"], &again["duplicate"], &again["resourceId"]),
        (&json!("duplicate-effect"), &json!(true), &json!("REP-7")),
        "the first record stands"
    );
    let progress = h
        .ok_callback(
            &id,
            "p",
            ev("progress", 2, json!({"progress": 10, "cursor": ""})),
        )
        .await;
    assert!(progress.get("resourceId").is_none(), "{progress}");

    let over = h.ok_callback(&id, "c", reserve(2, "c", 500)).await;
    assert_eq!(
        (&over["reason"], &over["changed"], &over["next"]),
        (&json!("over-budget"), &json!(false), &json!("continue"))
    );
    let ended = h
        .ok_callback(
            &id,
            "x",
            ev(
                "exhaust",
                2,
                json!({"resultRef": "blob://partial", "resultHash": "sha256:p"}),
            ),
        )
        .await;
    assert_eq!(
        (&ended["reason"], &ended["state"]),
        (&json!("budget-exhausted"), &json!("failed"))
    );
    let view = task(h, &id).await;
    assert_eq!(
        (&view["error"], &view["resultRef"]),
        (&json!("budget-exhausted"), &json!("blob://partial"))
    );
    assert_eq!(view["effects"][0]["resourceId"], "REP-7");

    // The timeline reads the whole history, as the state machine judged it.
    let r = h.get("demo", &format!("/v1/tasks/{id}/timeline")).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    let answer = r.json();
    let kinds: Vec<&str> = answer["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "attempt.started",
            "budget.reserved",
            "model.completed",
            "budget.reserved",
            "retry.scheduled",
            "attempt.started",
            "side_effect.completed",
            "progress",
            "budget.exhausted",
        ]
    );
    assert_eq!(answer["entries"][2]["usage"]["tokens"], 250);
    assert_eq!(answer["entries"][6]["detail"], "REP-7");
    assert_eq!(answer["state"], "failed");
    assert!(answer.get("cancelReport").is_none(), "{answer}");
    let missing = h.get("demo", "/v1/tasks/tsk_missing/timeline").await;
    assert_error(&missing, 404, "not-found", "tsk_missing");
}

/// A cancelled task's timeline carries what the cancel did.
pub async fn cancel_report_scenario(h: &Harness) {
    let id = create_with(
        h,
        json!({"workflowVersion": "v1", "steps": ["draft", "publish", "notify"]}),
    )
    .await;
    h.ok_callback(&id, "s1", start(1, 60_000)).await;
    let step = |name: &str, status: &str, extra: Value| {
        let mut e = ev("step", 1, json!({"name": name, "status": status}));
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    };
    h.ok_callback(
        &id,
        "d",
        step(
            "draft",
            "succeeded",
            json!({"outputRef": "blob://draft", "outputHash": "sha256:d"}),
        ),
    )
    .await;
    h.ok_callback(&id, "p", step("publish", "running", json!({})))
        .await;
    h.ok_callback(
        &id,
        "e",
        ev(
            "effect",
            1,
            json!({"step": "publish", "action": "post", "resourceId": "REP-1"}),
        ),
    )
    .await;
    super::lifecycle::act(h, &id, "cancel", json!({})).await;
    h.ok_callback(&id, "ack", ev("ack_cancel", 1, json!({})))
        .await;
    let r = h.get("demo", &format!("/v1/tasks/{id}/timeline")).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(
        r.json()["cancelReport"],
        json!({
            "finished": ["draft"],
            "interrupted": ["publish"],
            "notRun": ["notify"],
            "effects": [{"step": "publish", "action": "post", "resourceId": "REP-1", "attempt": 1}],
            "kept": [{"step": "draft", "outputRef": "blob://draft", "outputHash": "sha256:d"}]
        })
    );
}

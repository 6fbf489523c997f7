//! People's requests with browser tokens (PROTOCOL.md §Lifecycle and
//! §Credentials): `cancel` and `decisions` need their right on the task,
//! a task out of scope is 404, and the history records the token's user
//! as the actor, never the tenant.

mod common;
mod tokens;

use common::lifecycle::{create_with, ev, start};
use common::*;
use serde_json::{json, Value};
use tokens::*;

async fn post(h: &Harness, token: &str, path: &str, body: Value) -> taskwire_server::client::Reply {
    h.post(token, path, &[], &body.to_string()).await
}

async fn actor_of_last(h: &Harness, task: &str) -> Value {
    let (_, answer) = h.resume("demo", task, "cursor=0").await;
    let last = serde_json::to_value(&answer.events().last().unwrap().event).unwrap();
    last["actor"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_and_decisions_need_their_right_and_record_the_user() {
    let h = harness(|c| c.browser_tokens.keys = key_flags()).await;
    let running = create_with(&h, json!({})).await;
    h.ok_callback(&running, "s", start(1, 60_000)).await;
    let elsewhere = create_with(&h, json!({})).await;
    let cancel = format!("/v1/tasks/{running}/cancel");

    let watch_only = hs256("k1", K1, &claims(&[&running], &["watch"]));
    let r = post(&h, &watch_only, &cancel, json!({})).await;
    assert_error(&r, 403, "right-not-granted", "cancel");
    let other_task = hs256("k1", K1, &claims(&[&elsewhere], &["cancel"]));
    let r = post(&h, &other_task, &cancel, json!({})).await;
    assert_eq!(r.status, 404, "out of scope: {:?}", r.json());

    let may_cancel = hs256("k1", K1, &claims(&[&running], &["cancel"]));
    let r = post(&h, &may_cancel, &cancel, json!({"reason": "not needed"})).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["task"]["state"], "cancelling");
    assert_eq!(actor_of_last(&h, &running).await, "user:alice");

    // A held task: the decision needs `decide`, and records the user too.
    let held = create_with(&h, json!({})).await;
    h.ok_callback(&held, "s", start(1, 60_000)).await;
    let hold = ev(
        "hold",
        1,
        json!({"artifactRef": "blob://draft", "artifactHash": "sha256:d1"}),
    );
    let version = h.ok_callback(&held, "h", hold).await["version"].clone();
    let decision = json!({"decision": "approve", "artifactHash": "sha256:d1", "version": version});
    let decisions = format!("/v1/tasks/{held}/decisions");
    let cancel_only = hs256("k1", K1, &claims(&[&held], &["cancel"]));
    let r = post(&h, &cancel_only, &decisions, decision.clone()).await;
    assert_error(&r, 403, "right-not-granted", "decide");
    let may_decide = hs256("k1", K1, &claims(&[&held], &["decide"]));
    let r = post(&h, &may_decide, &decisions, decision).await;
    assert_eq!(r.json()["reason"], "approved", "{:?}", r.json());
    assert_eq!(actor_of_last(&h, &held).await, "user:alice");

    // A tenant token acts for the tenant as a whole.
    let r = post(
        &h,
        "demo",
        &format!("/v1/tasks/{elsewhere}/cancel"),
        json!({}),
    )
    .await;
    assert_eq!(r.json()["reason"], "cancelled", "{:?}", r.json());
    assert_eq!(actor_of_last(&h, &elsewhere).await, "tenant:demo");
}

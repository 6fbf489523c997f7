//! One page cannot take every watch slot (issue 24, F6). With the default
//! flags, an end user holds at most `--subject-max-watches` long-polls and
//! streams, and each tenant of a server with several at most half of the
//! server's slots; every refusal is answered late, the 503 as the 429s.
//! Another tenant's long-polls are held and answered meanwhile.

mod common;
mod tokens;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use taskwire_server::client::Conn;
use tokens::*;

/// A long-poll on a fresh connection: its status, `Retry-After`, error
/// code, and how long it took to be answered.
fn long_poll(
    h: &Harness,
    token: String,
    task: &str,
) -> tokio::task::JoinHandle<(u16, Option<String>, Value, Duration)> {
    let addr = h.addr.clone();
    let path = format!("/v1/tasks/{task}/resume?cursor=0&waitMs=20000");
    tokio::spawn(async move {
        let t = Instant::now();
        let mut conn = Conn::open(&addr).await.unwrap();
        let auth = format!("Bearer {token}");
        let r = conn
            .send("GET", &path, &[("authorization", &auth)], "")
            .await
            .unwrap();
        let retry = r.header("retry-after").map(String::from);
        (r.status, retry, r.json(), t.elapsed())
    })
}

fn user_token(task: &str, sub: &str) -> String {
    let mut c = claims(&[task], &["watch"]);
    c["sub"] = json!(sub);
    hs256("k1", K1, &c)
}

/// Waits until the server holds `n` watches.
async fn until_held(h: &Harness, n: usize) {
    for _ in 0..200 {
        if h.state().watchers.held() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("held {} of {n}", h.state().watchers.held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_browser_token_holds_its_share_and_another_tenant_is_still_served() {
    // Only the server's cap is small, so the test is cheap; the per-user
    // and per-tenant limits are the defaults.
    let h = harness(|c| {
        c.browser_tokens.keys = key_flags();
        c.max_watchers = Some(300);
    })
    .await;
    let per_user = h.state().watchers.per_subject();
    assert_eq!(per_user, 100, "the default of --subject-max-watches");
    let task = h.create_default().await;
    let page = user_token(&task, "mallory");
    let mut held = Vec::new();
    for _ in 0..per_user {
        held.push(long_poll(&h, page.clone(), &task));
    }
    until_held(&h, per_user).await;
    // The page's next long-polls are refused, late, and keep no slot.
    let refused: Vec<_> = (0..20)
        .map(|_| long_poll(&h, page.clone(), &task))
        .collect();
    for r in refused {
        let (status, retry, body, took) = r.await.unwrap();
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "watch-quota");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("mallory"),
            "{body}"
        );
        assert_eq!(retry.as_deref(), Some("2"));
        assert!(
            took >= Duration::from_millis(450),
            "answered at once: {took:?}"
        );
    }
    assert_eq!(h.state().watchers.held(), per_user);
    // Another tenant's long-poll is held, and answered 200 on a change.
    let theirs = h
        .create("other", json!({"ttlMs": 60_000, "maxAttempts": 1}))
        .await;
    let other = long_poll(&h, "other".into(), &theirs);
    until_held(&h, per_user + 1).await;
    let r = h.callback(&theirs, "s", &start_ev(1)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (status, _, body, _) = other.await.unwrap();
    assert_eq!(
        (status, body["mode"].as_str()),
        (200, Some("delta")),
        "{body}"
    );
    // So is another user of the same tenant.
    let neighbour = long_poll(&h, user_token(&task, "alice"), &task);
    until_held(&h, per_user + 1).await;
    h.ok_callback(&task, "s", start_ev(1)).await;
    let (status, ..) = neighbour.await.unwrap();
    assert_eq!(status, 200);
    for poll in held {
        assert_eq!(poll.await.unwrap().0, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_users_of_one_tenant_hold_at_most_half_the_slots_by_default() {
    let h = harness(|c| {
        c.browser_tokens.keys = key_flags();
        c.max_watchers = Some(40);
        // Tenant other lifts its default, so that it can fill the server
        // and meet the server's own cap below.
        c.quotas.overrides = vec!["other:max-watches=off".into()];
    })
    .await;
    let task = h.create_default().await;
    let mut held = Vec::new();
    for i in 0..20 {
        held.push(long_poll(
            &h,
            user_token(&task, &format!("user-{i}")),
            &task,
        ));
    }
    until_held(&h, 20).await;
    // A 21st user of tenant demo is past the tenant's default half.
    let (status, _, body, took) = long_poll(&h, user_token(&task, "user-20"), &task)
        .await
        .unwrap();
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("watch-quota"))
    );
    assert!(
        body["error"]["message"].as_str().unwrap().contains("demo"),
        "{body}"
    );
    assert!(took >= Duration::from_millis(450), "{took:?}");
    // Tenant other still finds the other half.
    let theirs = h
        .create("other", json!({"ttlMs": 60_000, "maxAttempts": 1}))
        .await;
    let mut others = Vec::new();
    for _ in 0..20 {
        others.push(long_poll(&h, "other".into(), &theirs));
    }
    until_held(&h, 40).await;
    // The server is full now: its 503 is answered late too.
    let (status, retry, body, took) = long_poll(&h, "other".into(), &theirs).await.unwrap();
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("watch-limit"))
    );
    assert_eq!(retry.as_deref(), Some("2"));
    assert!(
        took >= Duration::from_millis(450),
        "answered at once: {took:?}"
    );
    h.ok_callback(&task, "s", start_ev(1)).await;
    let r = h.callback(&theirs, "s", &start_ev(1)).await;
    assert_eq!(r.status, 200);
    for poll in held.into_iter().chain(others) {
        assert_eq!(poll.await.unwrap().0, 200);
    }
}

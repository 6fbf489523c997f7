//! Browser tokens (PROTOCOL.md, "Credentials"): the token matrix on every
//! client endpoint, the key algorithms, URL tokens on the watch routes,
//! streams that end with their token, and start-up refusals.

mod common;
mod tokens;

use std::time::Duration;

use common::*;
use serde_json::json;
use taskwire_server::client::Reply;
use tokens::*;

async fn tokens_harness() -> Harness {
    harness(|c| c.browser_tokens.keys = key_flags()).await
}

/// A task of tenant `demo` that has succeeded (so every endpoint answers
/// 2xx to a credential that may use it, SSE included: its stream ends).
async fn succeeded(h: &Harness) -> String {
    let id = h.create_default().await;
    h.ok_callback(&id, "s", start_ev(10)).await;
    h.ok_callback(&id, "ok", succeed_ev(20, "sha256:ab")).await;
    id
}

/// Every client endpoint for `task`, as (name, method, path, body).
fn endpoints(task: &str) -> Vec<(&'static str, &'static str, String, &'static str)> {
    vec![
        (
            "create",
            "POST",
            "/v1/tasks".into(),
            r#"{"ttlMs":60000,"maxAttempts":1}"#,
        ),
        ("get", "GET", format!("/v1/tasks/{task}"), ""),
        (
            "resume",
            "GET",
            format!("/v1/tasks/{task}/resume?cursor=0"),
            "",
        ),
        ("events", "GET", format!("/v1/tasks/{task}/events"), ""),
        (
            "deliver",
            "POST",
            format!("/v1/tasks/{task}/deliveries"),
            "",
        ),
        ("notifications", "GET", "/v1/notifications".into(), ""),
    ]
}

/// The (status, code) expected on each endpoint of [`endpoints`], in order.
type Row = [(u16, &'static str); 6];

async fn call(h: &Harness, token: Option<&str>, method: &str, path: &str, body: &str) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let key = format!("k-{}", path.len() + body.len());
    let mut headers = vec![
        ("content-type", "application/json"),
        ("idempotency-key", key.as_str()),
    ];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    h.req(method, path, &headers, body.to_string()).await
}

fn code(r: &Reply) -> String {
    r.json()["error"]["code"].as_str().unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_endpoint_answers_each_credential_as_documented() {
    let h = tokens_harness().await;
    let task = succeeded(&h).await;
    let elsewhere = h.create_default().await;
    let all = ["watch", "cancel", "decide", "deliver"];
    let in_scope = hs256("k1", K1, &claims(&[&task], &all));
    let mut expired = claims(&[&task], &all);
    expired["exp"] = json!(now_secs() - 120);
    let mut wrong_aud = claims(&[&task], &all);
    wrong_aud["aud"] = json!("someone-else");
    let mut widened = claims(&[&task, &elsewhere], &all);
    widened["sub"] = json!("mallory");
    let cases: Vec<(&str, Option<String>, Row)> = vec![
        // create, get, resume, events, deliver, notifications
        ("no token", None, [(401, "unauthorized"); 6]),
        (
            "tenant token",
            Some("demo".into()),
            [
                (201, ""),
                (200, ""),
                (200, ""),
                (200, ""),
                (201, ""),
                (200, ""),
            ],
        ),
        (
            "browser token in scope",
            Some(in_scope.clone()),
            [
                (403, "tenant-token-required"),
                (200, ""),
                (200, ""),
                (200, ""),
                (200, ""),
                (403, "tenant-token-required"),
            ],
        ),
        (
            "out of scope",
            Some(hs256("k1", K1, &claims(&[&elsewhere], &all))),
            [
                (403, "tenant-token-required"),
                (404, "not-found"),
                (404, "not-found"),
                (404, "not-found"),
                (404, "not-found"),
                (403, "tenant-token-required"),
            ],
        ),
        (
            "missing right",
            Some(hs256("k1", K1, &claims(&[&task], &["cancel", "decide"]))),
            [
                (403, "tenant-token-required"),
                (403, "right-not-granted"),
                (403, "right-not-granted"),
                (403, "right-not-granted"),
                (403, "right-not-granted"),
                (403, "tenant-token-required"),
            ],
        ),
        (
            "expired",
            Some(hs256("k1", K1, &expired)),
            [(401, "token-expired"); 6],
        ),
        (
            "wrong audience",
            Some(hs256("k1", K1, &wrong_aud)),
            [(401, "unauthorized"); 6],
        ),
        (
            "alg none",
            Some(alg_none("k1", &claims(&[&task], &all))),
            [(401, "unauthorized"); 6],
        ),
        (
            "tampered",
            Some(tampered(&in_scope, &widened)),
            [(401, "unauthorized"); 6],
        ),
        (
            "old key after rotation",
            Some(hs256("k0", K0_RETIRED, &claims(&[&task], &all))),
            [(401, "unauthorized"); 6],
        ),
        (
            "a configured kid, signed with a retired secret",
            Some(hs256("k1", K0_RETIRED, &claims(&[&task], &all))),
            [(401, "unauthorized"); 6],
        ),
        (
            "another tenant's key naming this task",
            Some(hs256("o1", OTHER, &claims(&[&task], &all))),
            [
                (403, "tenant-token-required"),
                (404, "not-found"),
                (404, "not-found"),
                (404, "not-found"),
                (404, "not-found"),
                (403, "tenant-token-required"),
            ],
        ),
    ];
    for (case, token, expected) in &cases {
        for ((name, method, path, body), (status, want)) in
            endpoints(&task).into_iter().zip(expected)
        {
            let r = call(&h, token.as_deref(), method, &path, body).await;
            assert_eq!(r.status, *status, "{case} × {name}: {:?}", r.json());
            if !want.is_empty() {
                assert_eq!(code(&r), *want, "{case} × {name}: {:?}", r.json());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_eddsa_and_es256_keys_are_accepted_and_algorithms_pinned() {
    let h = tokens_harness().await;
    let task = h.create_default().await;
    let path = format!("/v1/tasks/{task}");
    let c = claims(&[&task], &["watch"]);
    for token in [
        hs256("k1", K1, &c),
        hs256("k2", K2, &c),
        eddsa(&c),
        es256(&c),
    ] {
        let r = call(&h, Some(&token), "GET", &path, "").await;
        assert_eq!(r.status, 200, "{:?}", r.json());
    }
    // An HMAC over the public key, under the EdDSA kid: the key's
    // algorithm is the only one it verifies.
    let ed_der =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, ED_PUBLIC).unwrap();
    for (kid, secret) in [("ed", ed_der.as_slice()), ("ec", K1), ("k1", K2)] {
        let r = call(&h, Some(&hs256(kid, secret, &c)), "GET", &path, "").await;
        assert_error(&r, 401, "unauthorized", "token");
    }
    // No kid at all.
    let plain = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &c,
        &jsonwebtoken::EncodingKey::from_secret(K1),
    )
    .unwrap();
    assert_error(
        &call(&h, Some(&plain), "GET", &path, "").await,
        401,
        "unauthorized",
        "kid",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_routes_take_a_browser_token_in_the_url_and_never_a_tenant_token() {
    let h = tokens_harness().await;
    let task = succeeded(&h).await;
    let token = hs256("k1", K1, &claims(&[&task], &["watch"]));
    for route in ["resume?cursor=0&", "events?"] {
        let path = format!("/v1/tasks/{task}/{route}access_token={token}");
        let r = h.req("GET", &path, &[], "").await;
        assert_eq!(r.status, 200, "{route}: {:?}", r.json());
        let r = h
            .req(
                "GET",
                &format!("/v1/tasks/{task}/{route}access_token=demo"),
                &[],
                "",
            )
            .await;
        assert_error(&r, 401, "browser-token-required", "access_token");
        let r = h.get("demo", &path).await;
        assert_error(&r, 400, "invalid-request", "access_token");
    }
    // Elsewhere the URL is not looked at.
    let r = h
        .req(
            "GET",
            &format!("/v1/tasks/{task}?access_token={token}"),
            &[],
            "",
        )
        .await;
    assert_error(&r, 401, "unauthorized", "Authorization");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_opened_with_a_browser_token_ends_when_the_token_does() {
    let h = harness(|c| {
        c.browser_tokens.keys = key_flags();
        c.browser_tokens.leeway_secs = 0;
    })
    .await;
    let task = h.create_default().await;
    let mut c = claims(&[&task], &["watch"]);
    c["exp"] = json!(now_secs() + 2);
    let auth = format!("Bearer {}", hs256("k1", K1, &c));
    let path = format!("/v1/tasks/{task}/events");
    let started = std::time::Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        h.req("GET", &path, &[("authorization", auth.as_str())], ""),
    )
    .await
    .expect("the stream ends by itself");
    assert_eq!(r.status, 200);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // The task is not terminal: the tenant token's stream stays open.
    let held = tokio::time::timeout(Duration::from_secs(5), h.get("demo", &path)).await;
    assert!(held.is_err(), "a tenant token's stream is not cut");
    // Reconnecting with the expired token: 401 token-expired.
    let r = h
        .req("GET", &path, &[("authorization", auth.as_str())], "")
        .await;
    assert_error(&r, 401, "token-expired", "token");
}

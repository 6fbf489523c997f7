//! Browser-token rules: clock skew and lifetime, the scope claims'
//! shapes, and key flags refused at start naming the flag.

mod common;
mod tokens;

use common::*;
use serde_json::json;
use taskwire_server::client::Reply;
use tokens::*;

async fn tokens_harness() -> Harness {
    harness(|c| c.browser_tokens.keys = key_flags()).await
}

async fn get(h: &Harness, token: &str, path: &str) -> Reply {
    h.get(token, path).await
}

fn code(r: &Reply) -> String {
    r.json()["error"]["code"].as_str().unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_skew_is_allowed_within_the_leeway_and_no_further() {
    let h = tokens_harness().await;
    let task = h.create_default().await;
    let path = format!("/v1/tasks/{task}");
    let at = |exp: i64, nbf: Option<i64>| {
        let mut c = claims(&[&task], &["watch"]);
        c["exp"] = json!(exp);
        if let Some(nbf) = nbf {
            c["nbf"] = json!(nbf);
        }
        hs256("k1", K1, &c)
    };
    let now = now_secs();
    let status = |r: Reply| (r.status, code(&r));
    // Default leeway: 30 s.
    assert_eq!(status(get(&h, &at(now - 10, None), &path).await).0, 200);
    assert_eq!(
        status(get(&h, &at(now + 600, Some(now + 10)), &path).await).0,
        200
    );
    assert_eq!(
        status(get(&h, &at(now - 45, None), &path).await),
        (401, "token-expired".into())
    );
    let r = get(&h, &at(now + 600, Some(now + 60)), &path).await;
    assert_error(&r, 401, "unauthorized", "nbf");
    // Longer than --browser-token-max-ttl-secs (1 h): refused.
    let r = get(&h, &at(now + 2 * 3600, None), &path).await;
    assert_error(&r, 401, "unauthorized", "token.exp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_out_of_shape_are_401_naming_the_claim() {
    let h = tokens_harness().await;
    let task = h.create_default().await;
    let path = format!("/v1/tasks/{task}");
    let with = |key: &str, value: serde_json::Value| {
        let mut c = claims(&[&task], &["watch"]);
        if value.is_null() {
            c.as_object_mut().unwrap().remove(key);
        } else {
            c[key] = value;
        }
        hs256("k1", K1, &c)
    };
    for (token, field) in [
        (with("rights", json!(["watch", "admin"])), "token.rights"),
        (with("sub", json!(" ")), "token.sub"),
        (with("tasks", json!([])), "tasks or batch"),
        (with("tasks", json!(vec!["t"; 101])), "token.tasks"),
        (with("sub", serde_json::Value::Null), "sub"),
        (with("exp", serde_json::Value::Null), "exp"),
        (with("exp", json!("soon")), "token"),
        (with("rights", json!("watch")), "claims"),
    ] {
        assert_error(&get(&h, &token, &path).await, 401, "unauthorized", field);
    }
    // A batch-only token is a valid token that covers no single task.
    let mut batch = claims(&[], &["watch"]);
    batch.as_object_mut().unwrap().remove("tasks");
    batch["batch"] = json!("b1");
    let r = get(&h, &hs256("k1", K1, &batch), &path).await;
    assert_error(&r, 404, "not-found", "taskId");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_key_flags_are_refused_at_start_naming_the_flag() {
    let short = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b"short");
    let good = key_flags()[0].clone();
    for (keys, audience, needle) in [
        (
            vec!["demo:k1".to_string()],
            "taskwire",
            "expected TENANT:KID=ALG:KEY",
        ),
        (vec!["k1=HS256:AAAA".into()], "taskwire", "TENANT:KID"),
        (
            vec![format!("demo:k1=HS256:{short}")],
            "taskwire",
            "at least 32 bytes",
        ),
        (
            vec!["demo:k1=HS256:not base64!".into()],
            "taskwire",
            "not base64",
        ),
        (
            vec![format!("demo:k1=RS256:{ED_PUBLIC}")],
            "taskwire",
            "HS256, EdDSA or ES256",
        ),
        (
            vec![format!("demo:k1=EdDSA:{EC_PUBLIC}")],
            "taskwire",
            "not an Ed25519",
        ),
        (
            vec![format!("demo:k1=ES256:{ED_PUBLIC}")],
            "taskwire",
            "not a P-256",
        ),
        (
            vec![format!("nobody:k1=EdDSA:{ED_PUBLIC}")],
            "taskwire",
            "has no --token",
        ),
        (
            vec!["demo:k 1=HS256:AAAA".into()],
            "taskwire",
            "KID must be",
        ),
        (
            vec![good.clone(), good.replace("demo:", "other:")],
            "taskwire",
            "given twice",
        ),
        (vec![good.clone()], " ", "--browser-token-audience"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = test_config(dir.path());
        config.browser_tokens.keys = keys.clone();
        config.browser_tokens.audience = audience.into();
        let err = match taskwire_server::start(config).await {
            Ok(_) => panic!("{keys:?} must be refused"),
            Err(e) => e,
        };
        assert!(err.starts_with("--browser-token-"), "{err}");
        assert!(err.contains(needle), "{err} should say {needle:?}");
        // A secret never reaches the message.
        assert!(
            !err.contains(&base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                K1
            )),
            "{err}"
        );
    }
}

use super::*;
use axum::http::HeaderValue;

fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

fn verify(
    secrets: &[Secret],
    pairs: &[(&'static str, String)],
    body: &[u8],
    now: i64,
) -> Result<String, Refused> {
    let signed = SignedHeaders::parse(&headers(pairs), now)?;
    let mut v = signed.verifier(secrets);
    // In two pieces, as a body arrives.
    let (a, b) = body.split_at(body.len() / 2);
    v.update(a);
    v.update(b);
    if v.finish(&signed) {
        Ok(signed.id)
    } else {
        Err(Refused("webhook-signature: no valid signature".into()))
    }
}

#[test]
fn matches_the_standard_webhooks_reference_vector() {
    // The example in the Standard Webhooks spec and its libraries.
    let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let body = br#"{"test": 2432232314}"#;
    assert_eq!(
        secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    );
}

#[test]
fn verifies_rotates_and_refuses() {
    let secret = Secret::parse(DEV_SECRET).unwrap();
    let one = std::slice::from_ref(&secret);
    let body = b"{}";
    let good = secret.headers("cb_1", 1000, body);
    assert_eq!(verify(one, &good, body, 1000).unwrap(), "cb_1");
    // Several signatures, one valid.
    let mut rotated = good.clone();
    rotated[2].1 = format!("v1,AAAA {}", good[2].1);
    assert!(verify(one, &rotated, body, 1200).is_ok());
    // Several secrets (a rotation on the server side), one matches.
    let other = Secret::random().unwrap();
    assert!(verify(&[other.clone(), secret.clone()], &good, body, 1000).is_ok());
    assert!(verify(std::slice::from_ref(&other), &good, body, 1000).is_err());
    // Stale, either way.
    assert!(verify(one, &good, body, 1000 + 301).is_err());
    assert!(verify(one, &good, body, 1000 - 301).is_err());
    // Tampered body, other id, missing header.
    assert!(verify(one, &good, b"{ }", 1000).is_err());
    let mut other_id = good.clone();
    other_id[0].1 = "cb_2".into();
    assert!(verify(one, &other_id, body, 1000).is_err());
    let err = verify(one, &good[1..], body, 1000).unwrap_err();
    assert!(err.0.starts_with("webhook-id:"), "{}", err.0);
}

#[test]
fn a_header_sent_twice_is_refused_by_name() {
    let secret = Secret::parse(DEV_SECRET).unwrap();
    let good = secret.headers("cb_1", 1000, b"{}");
    for (i, name) in ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .iter()
        .enumerate()
    {
        let mut twice = good.to_vec();
        twice.push(good[i].clone());
        let err = SignedHeaders::parse(&headers(&twice), 1000).unwrap_err();
        assert!(
            err.0
                .starts_with(&format!("{name}: header sent more than once")),
            "{}",
            err.0
        );
    }
}

#[test]
fn malformed_signatures_are_refused_before_the_body() {
    let good = Secret::parse(DEV_SECRET)
        .unwrap()
        .headers("cb_1", 1000, b"{}");
    for bad in ["", "v1,", "v1,***", "v2,AAAA", "v1,AAAA", "AAAA"] {
        let mut h = good.clone();
        h[2].1 = bad.into();
        let err = SignedHeaders::parse(&headers(&h), 1000).unwrap_err();
        assert!(
            err.0.starts_with("webhook-signature:"),
            "{bad:?}: {}",
            err.0
        );
    }
}

#[test]
fn a_decoy_never_accepts() {
    let key = Secret::random().unwrap();
    let good = key.headers("cb_1", 1000, b"{}");
    let signed = SignedHeaders::parse(&headers(&good), 1000).unwrap();
    let mut v = signed.decoy(&key);
    v.update(b"{}");
    assert!(!v.finish(&signed));
}

#[test]
fn callback_bodies_name_their_task() {
    let event: taskwire_core::Event =
        taskwire_wire::from_json(r#"{"type":"start","atMs":1,"worker":"w"}"#, "e").unwrap();
    assert_eq!(
        callback_body("tsk_1", &event),
        r#"{"taskId":"tsk_1","type":"start","atMs":1,"worker":"w"}"#
    );
    assert_eq!(callback_body("tsk_1", &1), "null", "not an object");
}

#[test]
fn secrets_must_be_whsec_base64() {
    assert!(Secret::parse("abc").is_err());
    assert!(Secret::parse("whsec_***").is_err());
    assert!(Secret::parse("whsec_").is_err());
    assert_eq!(
        Secret::parse(DEV_SECRET).unwrap(),
        Secret::parse(DEV_SECRET).unwrap()
    );
}

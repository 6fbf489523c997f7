//! Minting browser tokens for the tests, as an application's backend does
//! (jsonwebtoken, the server's own dependency), and the keys the test
//! servers are configured with. Test-only keys: never use them elsewhere.
#![allow(dead_code)]

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::common::now_secs;

pub const K1: &[u8] = b"k1: a test-only HMAC key, 32+ bytes long";
pub const K2: &[u8] = b"k2: the key rotated in next to k1, long";
/// A key the server was once configured with and no longer is.
pub const K0_RETIRED: &[u8] = b"k0: retired before these tests started";
pub const OTHER: &[u8] = b"o1: tenant other's own HMAC key, 32 bytes";

/// Ed25519 (PKCS#8) and its public key (SPKI DER, base64).
pub const ED_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIAC2J0Bu67mY1O3DJrtVnKANmSqRVGdeZI/zWpG6HLzz
-----END PRIVATE KEY-----
";
pub const ED_PUBLIC: &str = "MCowBQYDK2VwAyEAfQV9OA3fPV90x+0Lz7tK5IDqVUjx0NSRmKbYl1xHGck=";
/// P-256 (PKCS#8) and its public key (SPKI DER, base64).
pub const EC_PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgD4QgF/E7I+MErRog
8TPQXnEvtz2PyufPxpx2QGjpCEmhRANCAATD2JBEwZZe0TdhmGqIxovhXL0PP3Y2
osiTj4ZLbLV1mXlWE3E5zd853+J8P6SVypS8LGvuSlfokwHaPMXxS1t5
-----END PRIVATE KEY-----
";
pub const EC_PUBLIC: &str = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEw9iQRMGWXtE3YZhqiMaL4Vy9Dz92NqLIk4+GS2y1dZl5VhNxOc3fOd/ifD+klcqUvCxr7kpX6JMB2jzF8UtbeQ==";

/// The `--browser-token-key` values of the test servers: k1 and k2 (a
/// rotation in progress), an Ed25519 and a P-256 key for tenant `demo`,
/// and one key of tenant `other`.
pub fn key_flags() -> Vec<String> {
    vec![
        format!("demo:k1=HS256:{}", STANDARD.encode(K1)),
        format!("demo:k2=HS256:{}", STANDARD.encode(K2)),
        format!("demo:ed=EdDSA:{ED_PUBLIC}"),
        format!("demo:ec=ES256:{EC_PUBLIC}"),
        format!("other:o1=HS256:{}", STANDARD.encode(OTHER)),
    ]
}

/// Claims for `tasks` with `rights`, valid for 10 minutes.
pub fn claims(tasks: &[&str], rights: &[&str]) -> Value {
    json!({
        "sub": "alice",
        "aud": "taskwire",
        "exp": now_secs() + 600,
        "tasks": tasks,
        "rights": rights,
    })
}

/// An HS256 token signed with `secret` under `kid`.
pub fn hs256(kid: &str, secret: &[u8], claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret)).unwrap()
}

/// An EdDSA token under kid `ed`.
pub fn eddsa(claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("ed".into());
    let key = EncodingKey::from_ed_pem(ED_PRIVATE.as_bytes()).unwrap();
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// An ES256 token under kid `ec`.
pub fn es256(claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("ec".into());
    let key = EncodingKey::from_ec_pem(EC_PRIVATE.as_bytes()).unwrap();
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// A token that says `alg: none`, with an empty signature.
pub fn alg_none(kid: &str, claims: &Value) -> String {
    let header = json!({"alg": "none", "typ": "JWT", "kid": kid});
    format!("{}.{}.", b64(&header), b64(claims))
}

/// `token` with its claims replaced and its signature kept.
pub fn tampered(token: &str, claims: &Value) -> String {
    let mut parts = token.split('.');
    let (head, _, sig) = (parts.next().unwrap(), parts.next(), parts.next().unwrap());
    format!("{head}.{}.{sig}", b64(claims))
}

pub fn b64(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

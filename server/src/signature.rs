//! Standard Webhooks signatures (HMAC-SHA256), for callbacks in and
//! notifications out.
//!
//! Signed content: `"{webhook-id}.{webhook-timestamp}.{body}"`; header
//! `webhook-signature: v1,<base64>` (several, space-separated, may be
//! sent during a key rotation; one valid one suffices). The secret is
//! `whsec_<base64 key>`.
//!
//! Verification works on the raw body bytes, before anything parses them,
//! so an unsigned request never reaches the JSON parser or the store.

use axum::http::HeaderMap;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How far `webhook-timestamp` may be from the server's clock, either way.
pub const TOLERANCE_SECS: i64 = 5 * 60;

/// The development secret used when none is configured. Printed at
/// start-up; never use it outside a laptop.
pub const DEV_SECRET: &str = "whsec_dGFza3dpcmUtZGV2LXNlY3JldC1kby1ub3QtdXNlLWluLXByb2Q=";

/// A webhook signing key.
#[derive(Clone)]
pub struct Secret {
    /// The keyed HMAC state, cloned per message.
    keyed: HmacSha256,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Why a callback's signature was refused (all answered 401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl Secret {
    /// Parses `whsec_<base64>`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let b64 = text
            .strip_prefix("whsec_")
            .ok_or("callback secret: must start with whsec_")?;
        let key = STANDARD
            .decode(b64)
            .map_err(|e| format!("callback secret: invalid base64 after whsec_ ({e})"))?;
        if key.is_empty() {
            return Err("callback secret: key must not be empty".into());
        }
        let keyed = HmacSha256::new_from_slice(&key)
            .map_err(|_| "callback secret: unusable key".to_string())?;
        Ok(Secret { keyed })
    }

    fn mac(&self, id: &str, timestamp: &str, body: &[u8]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The `webhook-signature` header value for a message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let tag = self
            .mac(id, &timestamp.to_string(), body)
            .finalize()
            .into_bytes();
        format!("v1,{}", STANDARD.encode(tag))
    }

    /// The three headers for a signed message.
    pub fn headers(&self, id: &str, timestamp: i64, body: &[u8]) -> [(&'static str, String); 3] {
        [
            ("webhook-id", id.to_string()),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", self.sign(id, timestamp, body)),
        ]
    }

    /// Checks a request's signature headers against its raw body; returns
    /// the `webhook-id` (the callback id) when valid.
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now_secs: i64,
    ) -> Result<String, Refused> {
        let get = |name: &str| -> Result<&str, Refused> {
            headers
                .get(name)
                .ok_or_else(|| Refused(format!("{name}: header is required")))?
                .to_str()
                .map_err(|_| Refused(format!("{name}: must be visible ASCII")))
        };
        let id = get("webhook-id")?;
        let timestamp = get("webhook-timestamp")?;
        let signatures = get("webhook-signature")?;
        let ts: i64 = timestamp
            .parse()
            .map_err(|_| Refused("webhook-timestamp: must be an integer (seconds)".into()))?;
        if now_secs.abs_diff(ts) > TOLERANCE_SECS as u64 {
            return Err(Refused(format!(
                "webhook-timestamp: {ts} is more than {TOLERANCE_SECS} s from the server's clock"
            )));
        }
        let mac = self.mac(id, timestamp, body);
        let valid = signatures.split(' ').any(|candidate| {
            candidate
                .strip_prefix("v1,")
                .and_then(|b64| STANDARD.decode(b64).ok())
                // verify_slice compares in constant time.
                .is_some_and(|tag| mac.clone().verify_slice(&tag).is_ok())
        });
        if valid {
            Ok(id.to_string())
        } else {
            Err(Refused("webhook-signature: no valid v1 signature".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
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
        let body = b"{}";
        let good = secret.headers("cb_1", 1000, body);
        assert_eq!(secret.verify(&headers(&good), body, 1000).unwrap(), "cb_1");
        // Several signatures, one valid.
        let mut rotated = good.clone();
        rotated[2].1 = format!("v1,AAAA {}", good[2].1);
        assert!(secret.verify(&headers(&rotated), body, 1200).is_ok());
        // Stale, either way.
        assert!(secret.verify(&headers(&good), body, 1000 + 301).is_err());
        assert!(secret.verify(&headers(&good), body, 1000 - 301).is_err());
        // Tampered body, other id, missing header.
        assert!(secret.verify(&headers(&good), b"{ }", 1000).is_err());
        let mut other = good.clone();
        other[0].1 = "cb_2".into();
        assert!(secret.verify(&headers(&other), body, 1000).is_err());
        let err = secret.verify(&headers(&good[1..]), body, 1000).unwrap_err();
        assert!(err.0.starts_with("webhook-id:"), "{}", err.0);
    }

    #[test]
    fn secrets_must_be_whsec_base64() {
        assert!(Secret::parse("abc").is_err());
        assert!(Secret::parse("whsec_***").is_err());
        assert!(Secret::parse("whsec_").is_err());
    }
}

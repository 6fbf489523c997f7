//! Standard Webhooks signatures for claims and reports (PROTOCOL.md
//! §Executor callback): the content `"{id}.{timestamp}.{body}"`,
//! HMAC-SHA256 under the base64-decoded part of `whsec_…`, sent as
//! `webhook-signature: v1,<base64>`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ConfigError;

type HmacSha256 = Hmac<Sha256>;

/// The tenant's callback secret, which is also the worker's credential.
#[derive(Clone)]
pub(crate) struct Secret {
    keyed: HmacSha256,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key, not even in a debug dump of the config.
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// Parses `whsec_<base64>`; the error names the `secret` field.
    pub(crate) fn parse(text: &str) -> Result<Self, ConfigError> {
        let b64 = text
            .strip_prefix("whsec_")
            .ok_or_else(|| ConfigError::new("secret", "must start with whsec_"))?;
        let key = STANDARD.decode(b64).map_err(|e| {
            ConfigError::new("secret", format!("invalid base64 after whsec_ ({e})"))
        })?;
        if key.is_empty() {
            return Err(ConfigError::new("secret", "the key after whsec_ is empty"));
        }
        let keyed = HmacSha256::new_from_slice(&key)
            .map_err(|_| ConfigError::new("secret", "unusable key"))?;
        Ok(Secret { keyed })
    }

    /// The `webhook-signature` value of one request.
    pub(crate) fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = self.keyed.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// A fresh request id, `<prefix>_<32 hex digits>`: 128 random bits, so
/// two workers never send the same callback id.
pub(crate) fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back on the time and a counter, still
        // unique within this process (ids only need to be unique).
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes[..8].copy_from_slice(&(t as u64).to_le_bytes());
        bytes[8..].copy_from_slice(&(n ^ std::process::id() as u64).to_le_bytes());
    }
    let mut id = String::with_capacity(prefix.len() + 33);
    id.push_str(prefix);
    id.push('_');
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

/// A random fraction in `[0, 1)`, for backoff jitter.
pub(crate) fn random_unit() -> f64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_the_standard_webhooks_example() {
        // The Standard Webhooks specification's own test vector.
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_bad_secret_names_the_field() {
        let e = Secret::parse("sk_123").unwrap_err();
        assert_eq!(e.to_string(), "secret: must start with whsec_");
        assert!(Secret::parse("whsec_!!").is_err());
    }

    #[test]
    fn ids_differ() {
        assert_ne!(random_id("cb"), random_id("cb"));
        assert!(random_id("cb").starts_with("cb_"));
    }
}

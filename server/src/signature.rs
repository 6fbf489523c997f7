//! Standard Webhooks signatures (HMAC-SHA256), for callbacks in and
//! notifications out.
//!
//! Signed content: `"{webhook-id}.{webhook-timestamp}.{body}"`; header
//! `webhook-signature: v1,<base64>` (several, space-separated, may be
//! sent during a key rotation; one valid one suffices). The secret is
//! `whsec_<base64 key>`.
//!
//! A callback is checked in two steps, so that an unauthenticated request
//! is refused before any of its body is read, and a body is never parsed
//! before its signature is known to be good:
//! 1. [`SignedHeaders::parse`], on the headers alone: each of the three
//!    exactly once, a timestamp within [`TOLERANCE_SECS`], at least one
//!    well-formed `v1` signature.
//! 2. A [`Verifier`], fed the raw body as it arrives, for the secrets of
//!    the task's tenant; [`Verifier::finish`] compares in constant time.

use axum::http::HeaderMap;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;
use taskwire_wire::to_json;

type HmacSha256 = Hmac<Sha256>;

/// How far `webhook-timestamp` may be from the server's clock, either way.
pub const TOLERANCE_SECS: i64 = 5 * 60;

/// The development secret used when none is configured. Printed at
/// start-up; never use it outside a laptop.
pub const DEV_SECRET: &str = "whsec_dGFza3dpcmUtZGV2LXNlY3JldC1kby1ub3QtdXNlLWluLXByb2Q=";

/// An HMAC-SHA256 tag is 32 bytes; a `v1` signature of another length
/// cannot be valid.
const TAG_BYTES: usize = 32;

/// A webhook signing key.
#[derive(Clone)]
pub struct Secret {
    /// The keyed HMAC state, cloned per message.
    keyed: HmacSha256,
    /// The key itself, only to tell two configured secrets apart.
    key: Vec<u8>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
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
        Self::from_key(key)
    }

    /// The secret as configured, `whsec_<base64>`: what the demo's own
    /// workers are given, as a tenant gives its workers theirs.
    pub fn to_whsec(&self) -> String {
        format!("whsec_{}", STANDARD.encode(&self.key))
    }

    /// A secret with a fresh random key that nobody else holds (the decoy
    /// of [`Verifier::decoy`]).
    pub fn random() -> Result<Self, String> {
        let mut key = vec![0u8; TAG_BYTES];
        getrandom::fill(&mut key).map_err(|e| format!("random key: {e}"))?;
        Self::from_key(key)
    }

    fn from_key(key: Vec<u8>) -> Result<Self, String> {
        let keyed = HmacSha256::new_from_slice(&key)
            .map_err(|_| "callback secret: unusable key".to_string())?;
        Ok(Secret { keyed, key })
    }

    /// The HMAC state after `"{id}.{timestamp}."`: the body follows.
    fn primed(&self, id: &str, timestamp: &str) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac
    }

    /// The `webhook-signature` header value for a message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = self.primed(id, &timestamp.to_string());
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }

    /// The three headers for a signed message.
    pub fn headers(&self, id: &str, timestamp: i64, body: &[u8]) -> [(&'static str, String); 3] {
        signed_headers(std::slice::from_ref(self), id, timestamp, body)
    }
}

/// The three headers for a message signed with every one of `secrets`
/// (space-separated in one `webhook-signature`, as a sender does during a
/// rotation).
pub fn signed_headers(
    secrets: &[Secret],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> [(&'static str, String); 3] {
    let signatures: Vec<String> = secrets
        .iter()
        .map(|s| s.sign(id, timestamp, body))
        .collect();
    [
        ("webhook-id", id.to_string()),
        ("webhook-timestamp", timestamp.to_string()),
        ("webhook-signature", signatures.join(" ")),
    ]
}

/// The body an executor signs for `task_id`: `taskId`, then the event's
/// fields (PROTOCOL.md §Executor callback), so that the signature holds
/// only for that task. An `event` that does not serialize as a JSON
/// object gives `null`, which the server refuses (400).
pub fn callback_body<E: Serialize + ?Sized>(task_id: &str, event: &E) -> String {
    to_json(&CallbackBody { task_id, event })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallbackBody<'a, E: ?Sized> {
    task_id: &'a str,
    #[serde(flatten)]
    event: &'a E,
}

/// The signature headers of a callback, checked before its body is read.
#[derive(Debug, Clone)]
pub struct SignedHeaders {
    /// `webhook-id`: the callback id (the caller checks it as an id).
    pub id: String,
    timestamp: String,
    /// `webhook-timestamp` as parsed: with the id and the body it names
    /// the exact signed request, which is used once (see
    /// `store/callback_replays.rs`).
    secs: i64,
    /// The `webhook-signature` value: candidates are decoded again when
    /// compared, so nothing per candidate is allocated before the body.
    signatures: String,
}

/// The value of a header that must be sent exactly once: two lines would
/// leave it to the server to pick one, and proxies pick differently.
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Result<&'h str, Refused> {
    let mut values = headers.get_all(name).iter();
    let value = values
        .next()
        .ok_or_else(|| Refused(format!("{name}: header is required")))?;
    if values.next().is_some() {
        let hint = if name == "webhook-signature" {
            " (several signatures go space-separated in one header)"
        } else {
            ""
        };
        return Err(Refused(format!("{name}: header sent more than once{hint}")));
    }
    value
        .to_str()
        .map_err(|_| Refused(format!("{name}: must be visible ASCII")))
}

/// A `v1,<base64>` candidate decoded to a tag, if it is one.
fn v1_tag(candidate: &str) -> Option<[u8; TAG_BYTES]> {
    let b64 = candidate.strip_prefix("v1,")?;
    // Room for any 44-character base64 (decode_slice checks the estimate).
    let mut buf = [0u8; TAG_BYTES + 3];
    let n = STANDARD.decode_slice(b64, &mut buf).ok()?;
    buf.get(..n)?.try_into().ok()
}

impl SignedHeaders {
    /// Checks the headers alone: present once each, a timestamp within the
    /// tolerance of `now_secs`, and at least one well-formed `v1`
    /// signature (signatures of other schemes are ignored, as Standard
    /// Webhooks says).
    pub fn parse(headers: &HeaderMap, now_secs: i64) -> Result<Self, Refused> {
        let id = single(headers, "webhook-id")?;
        let timestamp = single(headers, "webhook-timestamp")?;
        let signatures = single(headers, "webhook-signature")?;
        let ts: i64 = timestamp
            .parse()
            .map_err(|_| Refused("webhook-timestamp: must be an integer (seconds)".into()))?;
        if now_secs.abs_diff(ts) > TOLERANCE_SECS as u64 {
            return Err(Refused(format!(
                "webhook-timestamp: {ts} is more than {TOLERANCE_SECS} s from the server's clock"
            )));
        }
        if !signatures.split(' ').any(|c| v1_tag(c).is_some()) {
            return Err(Refused(
                "webhook-signature: no well-formed v1 signature (v1,<base64 of 32 bytes>)".into(),
            ));
        }
        Ok(SignedHeaders {
            id: id.to_string(),
            timestamp: timestamp.to_string(),
            secs: ts,
            signatures: signatures.to_string(),
        })
    }

    /// `webhook-timestamp`, in seconds since the epoch.
    pub fn timestamp_secs(&self) -> i64 {
        self.secs
    }

    /// A verifier for these headers under any of `secrets`.
    pub fn verifier(&self, secrets: &[Secret]) -> Verifier {
        Verifier {
            macs: secrets
                .iter()
                .map(|s| s.primed(&self.id, &self.timestamp))
                .collect(),
            decoy: false,
        }
    }

    /// A verifier that hashes like a real one and never accepts: for a
    /// task with no secret to check against (unknown task), so that the
    /// answer takes as long as a wrong signature's and reveals nothing.
    pub fn decoy(&self, key: &Secret) -> Verifier {
        let mut v = self.verifier(std::slice::from_ref(key));
        v.decoy = true;
        v
    }
}

/// HMACs of a callback under its tenant's secrets, fed the body as it
/// arrives (nothing of the body needs to be kept to verify it).
pub struct Verifier {
    macs: Vec<HmacSha256>,
    decoy: bool,
}

impl Verifier {
    /// Feeds the next bytes of the body.
    pub fn update(&mut self, chunk: &[u8]) {
        for mac in &mut self.macs {
            mac.update(chunk);
        }
    }

    /// Whether any signature of `headers` matches any secret, once the
    /// whole body was fed.
    pub fn finish(self, headers: &SignedHeaders) -> bool {
        let mut valid = false;
        for mac in self.macs {
            for tag in headers.signatures.split(' ').filter_map(v1_tag) {
                // verify_slice compares in constant time; every pair is
                // compared, so the time does not say which one matched.
                valid |= mac.clone().verify_slice(&tag).is_ok();
            }
        }
        valid && !self.decoy
    }
}

#[cfg(test)]
mod tests;

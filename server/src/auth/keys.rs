//! Browser-token keys and verification: `--browser-token-key` parsed and
//! checked at start, and a token turned into a [`BrowserGrant`] (or a
//! 401) on every request.
//!
//! Verification is `jsonwebtoken`'s (signature, `alg`, `aud`, `exp`,
//! `nbf`); this file only picks the key by `kid` and reads the scope
//! claims. Rules:
//! - The header's `kid` picks one key, and so one tenant: a tenant's key
//!   can only ever grant its own tasks. No `kid`, or one not configured
//!   (a retired key), is 401.
//! - Each key has one algorithm, and only that one verifies with it, so a
//!   token cannot pick its own (`alg: none`, an HMAC over a public key).
//! - `exp`, `aud` and `sub` are required; `exp` and `nbf` allow
//!   `--browser-token-leeway-secs` of clock skew; an expired token is 401
//!   `token-expired` (the one a client may refresh), everything else 401
//!   `unauthorized`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};

use super::flags::BrowserTokenFlags;
pub use super::mint::Minter;
use super::{BrowserGrant, Right, Rights};
use crate::error::{quoted, ApiError};
use crate::ids::MAX_ID_BYTES;

/// Shortest HMAC secret accepted (RFC 7518 §3.2: at least the hash size).
pub const MIN_HMAC_BYTES: usize = 32;
/// Most task ids one token may name.
pub const MAX_TASKS: usize = 100;
/// `kid` of the key `--demo` mints with (see [`BrowserKeys::demo_minter`]).
pub const DEMO_KID: &str = "taskwire-demo";

/// One configured key.
pub(super) struct Key {
    pub(super) tenant: String,
    pub(super) algorithm: Algorithm,
    pub(super) decoding: DecodingKey,
}

/// Every configured browser-token key, by `kid`, and the rules tokens are
/// checked against.
pub struct BrowserKeys {
    keys: HashMap<String, Key>,
    audience: String,
    leeway_secs: u64,
    max_ttl_secs: u64,
    demo: Option<Minter>,
}

impl std::fmt::Debug for BrowserKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: BTreeSet<&String> = self.keys.keys().collect();
        f.debug_struct("BrowserKeys")
            .field("kids", &kids)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

/// The claims of a browser token (PROTOCOL.md, "Credentials").
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The end user: the actor of what the token does.
    pub sub: String,
    /// The audience (checked by jsonwebtoken).
    pub aud: Audience,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Not before, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// The tasks in scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<String>>,
    /// The batch in scope (checked by batch watches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// The rights granted: `watch`, `cancel`, `decide`, `deliver`.
    pub rights: Vec<String>,
}

/// A token's `aud`: one string or an array of them (RFC 7519 §4.1.3).
/// Typed, so a token with another kind of `aud` is refused as malformed
/// claims; jsonwebtoken checks that it names `--browser-token-audience`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// `"aud": "taskwire"`.
    One(String),
    /// `"aud": ["taskwire", …]`.
    Many(Vec<String>),
}

fn unauthorized(message: impl Into<String>) -> ApiError {
    ApiError::unauthorized(message)
}

impl BrowserKeys {
    /// Parses and checks the flags: every key's syntax, algorithm and key
    /// material, its tenant among `tenants` (from `--token`), and no `kid`
    /// twice. With `demo_tenant`, adds a fresh random key for `--demo` to
    /// mint the page's tokens with.
    pub fn new<'t>(
        flags: &BrowserTokenFlags,
        tenants: impl IntoIterator<Item = &'t str>,
        demo_tenant: Option<&str>,
    ) -> Result<Self, String> {
        let tenants: BTreeSet<&str> = tenants.into_iter().collect();
        let mut keys = HashMap::new();
        for spec in &flags.keys {
            let (kid, key) = parse_key(spec, &tenants)?;
            if keys.insert(kid.clone(), key).is_some() {
                return Err(format!(
                    "--browser-token-key: kid {kid:?} is given twice (a kid names one key)"
                ));
            }
        }
        if flags.audience.trim().is_empty() {
            return Err("--browser-token-audience: must not be blank".into());
        }
        let demo = match demo_tenant {
            Some(tenant) => {
                let (minter, key) = Minter::random(tenant, &flags.audience)?;
                if keys.insert(DEMO_KID.to_string(), key).is_some() {
                    return Err(format!(
                        "--browser-token-key: kid {DEMO_KID:?} is reserved for --demo"
                    ));
                }
                Some(minter)
            }
            None => None,
        };
        Ok(BrowserKeys {
            keys,
            audience: flags.audience.clone(),
            leeway_secs: flags.leeway_secs,
            max_ttl_secs: flags.max_ttl_secs,
            demo,
        })
    }

    /// Whether any key is configured.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The `kid`s per tenant (for the start-up banner).
    pub fn kids_by_tenant(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (kid, key) in &self.keys {
            out.entry(key.tenant.as_str()).or_default().push(kid);
        }
        for kids in out.values_mut() {
            kids.sort_unstable();
        }
        out
    }

    /// The clock skew allowed, in seconds.
    pub fn leeway_secs(&self) -> u64 {
        self.leeway_secs
    }

    /// The key `--demo` mints the page's tokens with.
    pub fn demo_minter(&self) -> Option<&Minter> {
        self.demo.as_ref()
    }

    /// Verifies a browser token at `now` (seconds): its tenant and grant,
    /// or 401 saying why not.
    pub fn verify(&self, token: &str, now: u64) -> Result<(String, BrowserGrant), ApiError> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| {
            unauthorized(format!(
                "Authorization: unknown token (not a tenant token, nor a browser token: {})",
                describe(e.kind())
            ))
        })?;
        let kid = header
            .kid
            .as_deref()
            .ok_or_else(|| unauthorized("token: the header has no kid"))?;
        let key = self.keys.get(kid).ok_or_else(|| {
            unauthorized(format!(
                "token: kid {} is not a key of this server (retired, or never configured)",
                quoted(kid)
            ))
        })?;
        let mut validation = Validation::new(key.algorithm);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "aud", "sub"]);
        validation.leeway = self.leeway_secs;
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation).map_err(
            |e| match e.kind() {
                ErrorKind::ExpiredSignature => expired(),
                ErrorKind::InvalidAudience => {
                    unauthorized(format!("token.aud: must be {}", quoted(&self.audience)))
                }
                kind => unauthorized(format!("token: {}", describe(kind))),
            },
        )?;
        let claims = data.claims;
        if claims.exp > now.saturating_add(self.max_ttl_secs + self.leeway_secs) {
            return Err(unauthorized(format!(
                "token.exp: more than {} s ahead; browser tokens are short-lived",
                self.max_ttl_secs
            )));
        }
        let grant = grant(claims)?;
        Ok((key.tenant.clone(), grant))
    }
}

/// 401 `token-expired`: the one refusal a client answers by asking its
/// backend for a fresh token.
pub fn expired() -> ApiError {
    let mut e = ApiError::unauthorized("token: expired; ask the backend for a fresh one");
    e.code = "token-expired";
    e
}

/// The scope claims, checked.
fn grant(claims: Claims) -> Result<BrowserGrant, ApiError> {
    let id = |field: &str, v: &str| {
        if v.trim().is_empty() || v.len() > MAX_ID_BYTES {
            Err(unauthorized(format!(
                "{field}: must be a non-blank string of at most {MAX_ID_BYTES} bytes"
            )))
        } else {
            Ok(())
        }
    };
    id("token.sub", &claims.sub)?;
    let tasks = claims.tasks.unwrap_or_default();
    if tasks.len() > MAX_TASKS {
        return Err(unauthorized(format!(
            "token.tasks: at most {MAX_TASKS} task ids, got {}",
            tasks.len()
        )));
    }
    for task in &tasks {
        id("token.tasks", task)?;
    }
    if let Some(batch) = &claims.batch {
        id("token.batch", batch)?;
    }
    if tasks.is_empty() && claims.batch.is_none() {
        return Err(unauthorized(
            "token: needs a scope: a non-empty tasks or batch claim",
        ));
    }
    let mut rights = Rights::NONE;
    for name in &claims.rights {
        let right = Right::parse(name).ok_or_else(|| {
            unauthorized(format!(
                "token.rights: unknown right {} (watch, cancel, decide, deliver)",
                quoted(name)
            ))
        })?;
        rights = rights.with(right);
    }
    Ok(BrowserGrant {
        subject: claims.sub,
        tasks,
        batch: claims.batch,
        rights,
        expires_at: claims.exp,
    })
}

/// Why jsonwebtoken refused a token, for the 401 message.
fn describe(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::InvalidSignature => "bad signature".into(),
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => {
            "alg is not the key's algorithm".into()
        }
        ErrorKind::ImmatureSignature => "not valid yet (nbf)".into(),
        ErrorKind::MissingRequiredClaim(claim) => {
            format!("required claim {} is missing", quoted(claim))
        }
        ErrorKind::InvalidClaimFormat(claim) => {
            format!("claims: {} is not as specified", quoted(claim))
        }
        // serde's message names the field (`missing field `sub``).
        ErrorKind::Json(e) => format!("claims: {}", quoted(&e.to_string())),
        _ => "not a well-formed JWT".into(),
    }
}

/// `TENANT:KID=ALG:KEY` → (kid, key).
fn parse_key(spec: &str, tenants: &BTreeSet<&str>) -> Result<(String, Key), String> {
    let bad = |why: &str| format!("--browser-token-key: {why} in {:?}", redact(spec));
    let (name, material) = spec
        .split_once('=')
        .ok_or_else(|| bad("expected TENANT:KID=ALG:KEY"))?;
    let (tenant, kid) = name
        .rsplit_once(':')
        .ok_or_else(|| bad("expected TENANT:KID before '='"))?;
    if kid.is_empty()
        || kid.len() > 64
        || !kid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(bad("KID must be 1-64 of A-Z a-z 0-9 - _ ."));
    }
    if !tenants.contains(tenant) {
        let known: Vec<&str> = tenants.iter().copied().collect();
        return Err(format!(
            "--browser-token-key: tenant {tenant:?} has no --token (tenants: {})",
            known.join(", ")
        ));
    }
    let (alg, text) = material
        .split_once(':')
        .ok_or_else(|| bad("expected ALG:KEY after '='"))?;
    let bytes = STANDARD
        .decode(text.trim())
        .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim()))
        .map_err(|_| bad("KEY is not base64"))?;
    let (algorithm, decoding) = match alg {
        "HS256" => {
            if bytes.len() < MIN_HMAC_BYTES {
                return Err(bad(&format!(
                    "an HS256 secret must be at least {MIN_HMAC_BYTES} bytes, got {}",
                    bytes.len()
                )));
            }
            (Algorithm::HS256, DecodingKey::from_secret(&bytes))
        }
        "EdDSA" => (
            Algorithm::EdDSA,
            DecodingKey::from_ed_pem(pem(&bytes).as_bytes())
                .map_err(|_| bad("KEY is not an Ed25519 public key (base64 DER, SPKI)"))?,
        ),
        "ES256" => (
            Algorithm::ES256,
            DecodingKey::from_ec_pem(pem(&bytes).as_bytes())
                .map_err(|_| bad("KEY is not a P-256 public key (base64 DER, SPKI)"))?,
        ),
        other => {
            return Err(bad(&format!(
                "ALG must be HS256, EdDSA or ES256, got {other:?}"
            )))
        }
    };
    let key = Key {
        tenant: tenant.to_string(),
        algorithm,
        decoding,
    };
    Ok((kid.to_string(), key))
}

/// A public key's DER as the PEM text jsonwebtoken reads.
fn pem(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut text = String::from("-----BEGIN PUBLIC KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str("-----END PUBLIC KEY-----\n");
    text
}

/// A key spec for an error message: the key material left out (an HMAC
/// secret must not reach a log).
fn redact(spec: &str) -> String {
    match spec.split_once('=') {
        Some((name, material)) => match material.split_once(':') {
            Some((alg, _)) => format!("{name}={alg}:…"),
            None => format!("{name}=…"),
        },
        None => "…".into(),
    }
}

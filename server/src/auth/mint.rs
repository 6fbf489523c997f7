//! Minting browser tokens in the server itself: only `--demo` does (its
//! page gets tokens from the demo endpoints, as a page gets them from its
//! application's backend). Applications mint with their own JWT library.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};

use super::keys::{Audience, Claims, Key, DEMO_KID};
use super::Right;
use crate::error::ApiError;

/// Mints browser tokens with an HS256 key held in memory: `--demo`'s page
/// gets its tokens from the demo endpoints, as a page gets them from its
/// application's backend.
pub struct Minter {
    tenant: String,
    audience: String,
    encoding: EncodingKey,
}

impl Minter {
    pub(super) fn random(tenant: &str, audience: &str) -> Result<(Minter, Key), String> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| format!("--demo: random key: {e}"))?;
        let minter = Minter {
            tenant: tenant.to_string(),
            audience: audience.to_string(),
            encoding: EncodingKey::from_secret(&secret),
        };
        let key = Key {
            tenant: tenant.to_string(),
            algorithm: Algorithm::HS256,
            decoding: DecodingKey::from_secret(&secret),
        };
        Ok((minter, key))
    }

    /// The tenant its tokens grant.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// A token for `scope` with `rights`, for `subject`, valid until `exp`.
    pub fn mint(
        &self,
        subject: &str,
        scope: MintScope<'_>,
        rights: &[Right],
        exp: u64,
    ) -> Result<String, ApiError> {
        let (tasks, batch) = match scope {
            MintScope::Tasks(tasks) => (Some(tasks.to_vec()), None),
            MintScope::Batch(batch) => (None, Some(batch.to_string())),
        };
        let claims = Claims {
            sub: subject.to_string(),
            aud: Audience::One(self.audience.clone()),
            exp,
            nbf: None,
            tasks,
            batch,
            rights: rights.iter().map(|r| r.as_str().to_string()).collect(),
        };
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(DEMO_KID.to_string());
        jsonwebtoken::encode(&header, &claims, &self.encoding)
            .map_err(|e| ApiError::internal(format!("demo token: {e}")))
    }
}

/// What a minted token covers: some tasks (the `tasks` claim) or one batch
/// (the `batch` claim).
#[derive(Debug, Clone, Copy)]
pub enum MintScope<'a> {
    /// These task ids (at most 100).
    Tasks(&'a [String]),
    /// This batch id.
    Batch(&'a str),
}

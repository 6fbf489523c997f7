//! The extractors: a credential from `Authorization: Bearer …`, or on the
//! watch routes from `?access_token=` (browser tokens only).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::Credential;
use crate::clock::now_secs;
use crate::error::ApiError;
use crate::query::Query;
use crate::AppState;

/// Where a token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carrier {
    Header,
    Url,
}

/// The token of `Authorization: Bearer …`, if the header is there.
fn bearer(parts: &Parts) -> Result<Option<&str>, ApiError> {
    let Some(header) = parts.headers.get(AUTHORIZATION) else {
        return Ok(None);
    };
    header
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Some)
        .ok_or_else(|| ApiError::unauthorized("Authorization: must be Bearer <token>"))
}

/// A token → the credential, or 401.
fn resolve(state: &AppState, token: &str, carrier: Carrier) -> Result<Credential, ApiError> {
    if let Some(tenant) = state.tokens.get(token) {
        if carrier == Carrier::Url {
            let mut e = ApiError::unauthorized(
                "access_token: a tenant token must never be put in a URL; \
                 give a browser token here, or the tenant token in Authorization",
            );
            e.code = "browser-token-required";
            return Err(e);
        }
        return Ok(Credential::tenant_token(tenant.clone()));
    }
    if state.browser_keys.is_empty() {
        return Err(ApiError::unauthorized("Authorization: unknown token"));
    }
    let now = u64::try_from(now_secs()).unwrap_or(0);
    let (tenant, grant) = state.browser_keys.verify(token, now)?;
    Ok(Credential::browser(tenant, grant))
}

/// From `Authorization: Bearer …` only.
impl FromRequestParts<AppState> for Credential {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)?
            .ok_or_else(|| ApiError::unauthorized("Authorization: a Bearer token is required"))?;
        resolve(state, token, Carrier::Header)
    }
}

/// The credential of a watch route: from `Authorization: Bearer …`, or
/// from `?access_token=` (a browser token only). Both at once is 400.
#[derive(Debug, Clone)]
pub struct WatchCredential(pub Credential);

impl FromRequestParts<AppState> for WatchCredential {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let query = Query::parse(parts.uri.query());
        let in_url = query.get("access_token");
        match (bearer(parts)?, in_url) {
            (Some(_), Some(_)) => Err(ApiError::invalid(
                "access_token: give the token in Authorization or in access_token, not both",
            )),
            (Some(token), None) => resolve(state, token, Carrier::Header).map(WatchCredential),
            (None, Some(token)) if !token.trim().is_empty() => {
                resolve(state, token.trim(), Carrier::Url).map(WatchCredential)
            }
            _ => Err(ApiError::unauthorized(
                "Authorization: a Bearer token is required (or a browser token in access_token)",
            )),
        }
    }
}

/// The tenant of a tenant token: for the tenant-wide routes (the demo's;
/// the API's create and feed check [`Credential::require_tenant_token`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let credential = Credential::from_request_parts(parts, state).await?;
        credential.require_tenant_token("this endpoint")?;
        Ok(Tenant(credential.into_tenant()))
    }
}

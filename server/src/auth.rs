//! Bearer tokens → tenants. Every client endpoint takes
//! `Authorization: Bearer <token>`; the tenant scopes every task, key and
//! feed, so another tenant's task is simply not found.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::AppState;

/// The tenant a request's bearer token maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("Authorization: a Bearer token is required"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or_else(|| ApiError::unauthorized("Authorization: must be Bearer <token>"))?;
        state
            .tokens
            .get(token)
            .map(|tenant| Tenant(tenant.clone()))
            .ok_or_else(|| ApiError::unauthorized("Authorization: unknown token"))
    }
}

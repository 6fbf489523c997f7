//! `GET /v1/notifications?after=SEQ&limit=N`: the tenant's outbox.

use axum::extract::{RawQuery, State};
use axum::Json;
use serde_json::{json, Value};
use taskwire_core::MAX_SAFE_INTEGER;

use super::Query;
use crate::auth::Credential;
use crate::error::ApiError;
use crate::AppState;

/// Most entries one page returns.
const MAX_LIMIT: u64 = 1_000;

/// One page of the tenant's notifications, in commit order.
pub async fn list(
    State(state): State<AppState>,
    credential: Credential,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, ApiError> {
    credential.require_tenant_token("the notifications feed")?;
    let tenant = credential.into_tenant();
    let q = Query::parse(raw.as_deref());
    let after = q.int("after", MAX_SAFE_INTEGER)?.unwrap_or(0);
    let limit = q.int("limit", MAX_LIMIT)?.unwrap_or(100);
    if limit == 0 {
        return Err(ApiError::invalid(
            "limit: must be an integer from 1 to 1000, got \"0\"",
        ));
    }
    let rows = state
        .store
        .notifications(tenant, after, u32::try_from(limit).unwrap_or(1_000))
        .await?;
    let next = rows.last().map_or(after, |r| r.seq);
    Ok(Json(json!({"notifications": rows, "next": next})))
}

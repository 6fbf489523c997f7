//! `GET /v1/notifications?after=SEQ&limit=N`: the tenant's outbox.

use axum::extract::{RawQuery, State};
use serde::Serialize;
use taskwire_core::MAX_SAFE_INTEGER;

use super::Query;
use crate::auth::Credential;
use crate::error::ApiError;
use crate::store::OutboxEntry;
use crate::wire_json::WireJson;
use crate::AppState;

/// Most entries one page returns.
const MAX_LIMIT: u64 = 1_000;

/// One page of the tenant's notifications, in commit order.
pub async fn list(
    State(state): State<AppState>,
    credential: Credential,
    RawQuery(raw): RawQuery,
) -> Result<WireJson<Page>, ApiError> {
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
    let notifications = rows.into_iter().map(Entry::from).collect();
    Ok(WireJson(Page {
        next,
        notifications,
    }))
}

/// A page of the feed: `{"next":7,"notifications":[…]}`. Keys in name
/// order, here and in each entry: the order this body has always had
/// (the webhook's body, the same entry, keeps its fields' own order).
#[derive(Debug, Serialize)]
pub struct Page {
    next: u64,
    notifications: Vec<Entry>,
}

/// One entry: `{"atMs","key","seq","state","taskId"}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(serialize_with = "taskwire_core::value::ms::serialize")]
    at_ms: f64,
    key: String,
    seq: u64,
    state: taskwire_core::State,
    task_id: String,
}

impl From<OutboxEntry> for Entry {
    fn from(row: OutboxEntry) -> Self {
        Entry {
            at_ms: row.notification.at_ms,
            key: row.key,
            seq: row.seq,
            state: row.notification.state,
            task_id: row.notification.task_id,
        }
    }
}

//! `GET /v1/tasks/{id}/resume?cursor=N[&waitMs=M][&snapshot=1]`, with
//! long-poll.
//!
//! The request subscribes to the hub *before* it reads the task, so a
//! commit between the read and the wait still wakes it; the wake comes
//! from the commit (no polling), and the answer is built from the hub's
//! memory copy when it covers the gap.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use taskwire_core::wire::to_json;
use taskwire_core::{ResumeMode, MAX_SAFE_INTEGER};

use super::{no_store_json, task_id, Query};
use crate::auth::Tenant;
use crate::error::ApiError;
use crate::hub::{answer_from, Wake};
use crate::AppState;

/// The longest a request may be held.
pub const MAX_WAIT_MS: u64 = 30_000;

/// Answers a reconnecting client, holding it while nothing is new.
pub async fn resume(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    path: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = task_id(path)?;
    let q = Query::parse(raw.as_deref());
    let cursor = q.required_int("cursor", MAX_SAFE_INTEGER)?;
    let wait_ms = q.int("waitMs", MAX_WAIT_MS)?.unwrap_or(0);
    let snapshot = q.flag("snapshot")?;

    let mut sub = state.hub.subscribe(&id);
    let answer = state
        .store
        .resume(tenant.clone(), id.clone(), cursor, snapshot)
        .await?;
    let worth_holding = wait_ms > 0
        && answer.mode() == ResumeMode::CaughtUp
        && answer.task().is_some_and(|t| !t.state.is_terminal());
    if !worth_holding {
        return Ok(no_store_json(to_json(&answer)));
    }
    let woke = tokio::time::timeout(Duration::from_millis(wait_ms), sub.wait_past(cursor)).await;
    let answer = match woke {
        // Nothing happened: the caught-up answer still holds.
        Err(_elapsed) => answer,
        Ok(Wake::Changed(latest)) => match answer_from(&latest, cursor, state.retention) {
            Some(a) => a,
            None => state.store.resume(tenant, id, cursor, false).await?,
        },
        Ok(Wake::Dropped) => return Ok(aborted()),
    };
    Ok(no_store_json(to_json(&answer)))
}

/// A response whose body fails at once: hyper aborts the connection, which
/// is what a client sees when the network drops (`drop-connections`).
pub fn aborted() -> Response {
    let failing = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped by the server"))
    });
    Response::new(Body::from_stream(failing))
}

//! `GET /v1/batches/{id}/resume` (long-poll) and `GET /v1/batches/{id}/events`
//! (SSE): every task of a batch followed over one held request
//! (PROTOCOL.md §Follow a batch).
//!
//! As for one task, a request subscribes to the hub *before* it reads, so
//! a commit in between still wakes it, and the wake comes from the commit.
//! A batch's wake carries no data: the answer is read from the store, once
//! per wake however many commits came meanwhile.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use taskwire_core::{same_epoch, worth_holding, ResumeMode};

use super::batches::BatchId;
use super::events::{open_stream, Item, StreamStart};
use super::no_store_json;
use super::resume::{aborted, Params};
use crate::auth::{Right, WatchCredential};
use crate::error::ApiError;
use crate::hub::{BatchSubscription, BatchWake};
use crate::limits::Watcher;
use crate::store::{BatchAnswer, StoreError};
use crate::AppState;

/// Answers a client at `cursor`, holding it while nothing of the batch is
/// new and some task is still live.
pub async fn resume(
    State(state): State<AppState>,
    WatchCredential(credential): WatchCredential,
    BatchId(id): BatchId,
    Params {
        cursor,
        wait_ms,
        snapshot,
        epoch,
        output: _,
    }: Params,
) -> Result<Response, ApiError> {
    credential.require_batch(Right::Watch, &id)?;
    let same_epoch = same_epoch(epoch.as_deref(), state.store.epoch());
    let subject = credential.subject().map(str::to_owned);
    let tenant = credential.into_tenant();
    let who = Watcher {
        tenant: &tenant,
        subject: subject.as_deref(),
    };
    if wait_ms > 0 {
        super::check_watch_quota(&state, who).await?;
    }
    let mut sub = state.hub.subscribe_batch(&id, &tenant);
    let answer = state
        .store
        .resume_batch(tenant.clone(), id, cursor, snapshot)
        .await?;
    if !worth_holding(wait_ms, answer.mode, !answer.is_done(), same_epoch) {
        return Ok(no_store_json(answer.to_json(state.store.epoch())));
    }
    // Counted while held; refused (429, 503) past a cap.
    let _held = match super::admit_watch(&state, who) {
        Ok(permit) => permit,
        Err(refused) => return Err(refused.await),
    };
    let woke = tokio::time::timeout(Duration::from_millis(wait_ms), sub.wait_past(cursor)).await;
    let answer = match woke {
        Err(_elapsed) => Arc::new(answer),
        Ok(BatchWake::Changed(seq)) => read_after_wake(&state, &tenant, &sub, cursor, seq).await?,
        Ok(BatchWake::Dropped) => return Ok(aborted()),
    };
    Ok(no_store_json(answer.to_json(state.store.epoch())))
}

/// The answer after a wake, read once for every waiter of the batch at
/// the same cursor (see `hub/batches.rs`).
async fn read_after_wake(
    state: &AppState,
    tenant: &str,
    sub: &BatchSubscription,
    cursor: u64,
    seq: u64,
) -> Result<Arc<BatchAnswer>, StoreError> {
    let id = sub.batch_id();
    sub.read_shared(cursor, seq, || {
        state
            .store
            .resume_batch(tenant.to_string(), id.to_string(), cursor, false)
    })
    .await
}

struct Stream {
    state: AppState,
    tenant: String,
    sub: BatchSubscription,
    cursor: u64,
    pending: Option<Arc<BatchAnswer>>,
    done: bool,
}

/// Opens the batch's stream (errors before the first byte are normal HTTP
/// errors). First message: the answer for the starting cursor
/// (`Last-Event-ID`, else `?cursor`, else 0); then one per wake.
pub async fn events(
    State(state): State<AppState>,
    WatchCredential(credential): WatchCredential,
    BatchId(id): BatchId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let StreamStart {
        tenant,
        subject,
        cursor,
        expires_at,
    } = StreamStart::read(&state, credential, &headers, raw, |c| {
        c.require_batch(Right::Watch, &id)
    })
    .await?;
    let sub = state.hub.subscribe_batch(&id, &tenant);
    let first = state
        .store
        .resume_batch(tenant.clone(), id, cursor, false)
        .await?;
    if first.mode == ResumeMode::CaughtUp && first.is_done() {
        // Nothing will ever follow: 204 stops an `EventSource` for good.
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let stream = Stream {
        state: state.clone(),
        tenant: tenant.clone(),
        sub,
        cursor,
        pending: Some(Arc::new(first)),
        done: false,
    };
    let who = Watcher {
        tenant: &tenant,
        subject: subject.as_deref(),
    };
    open_stream(&state, who, expires_at, stream, next).await
}

async fn next(mut st: Stream) -> Option<(Item, Stream)> {
    if st.done {
        return None;
    }
    let answer = match st.pending.take() {
        Some(a) => a,
        None => match st.sub.wait_past(st.cursor).await {
            BatchWake::Changed(seq) => {
                let read = read_after_wake(&st.state, &st.tenant, &st.sub, st.cursor, seq).await;
                match read {
                    Ok(a) => a,
                    Err(e) => {
                        st.done = true;
                        return Some((Err(std::io::Error::other(e.to_string())), st));
                    }
                }
            }
            BatchWake::Dropped => {
                st.done = true;
                let err = std::io::Error::other("connection dropped by the server");
                return Some((Err(err), st));
            }
        },
    };
    st.cursor = answer.cursor;
    st.done = answer.is_done();
    let event = SseEvent::default()
        .event("batch")
        .id(answer.cursor.to_string())
        .data(answer.to_json(st.state.store.epoch()));
    Some((Ok(event), st))
}

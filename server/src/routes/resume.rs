//! `GET /v1/tasks/{id}/resume?cursor=N[&waitMs=M][&snapshot=1]`, with
//! long-poll.
//!
//! The request subscribes to the hub *before* it reads the task, so a
//! commit between the read and the wait still wakes it; the wake comes
//! from the commit (no polling), and the answer is built from the hub's
//! memory copy when it covers the gap.

use std::future::Future;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::response::Response;
use taskwire_core::{same_epoch, worth_holding, EpochAnswer, ResumeAnswer, MAX_SAFE_INTEGER};
use taskwire_wire::to_json;

use super::{no_store_json, output_watch, Query, TaskId};
use crate::auth::{Right, WatchCredential};
use crate::error::{quoted, ApiError};
use crate::hub::{answer_from, Wake};
use crate::limits::Watcher;
use crate::store::OutputWanted;
use crate::AppState;

/// The longest a request may be held.
pub const MAX_WAIT_MS: u64 = 30_000;

/// The query of a resume request, checked while extracting (cursor, then
/// waitMs, then snapshot, then epoch), so a held request keeps three
/// numbers instead of the query string (the epoch is compared before the
/// hold and dropped).
#[derive(Debug, Clone)]
pub struct Params {
    pub(super) cursor: u64,
    pub(super) wait_ms: u64,
    pub(super) snapshot: bool,
    /// The epoch the client holds (PROTOCOL.md §Epoch), if it sent one.
    pub(super) epoch: Option<String>,
    /// The output the follower asks for (PROTOCOL.md §Live output), if
    /// any: boxed, so that a request without it holds one word more.
    pub(super) output: Option<Box<OutputWanted>>,
}

/// The longest `epoch` a request may send: the reference server's are 32
/// hex digits; another backend's are opaque, but not long.
const MAX_EPOCH_BYTES: usize = 255;

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let q = Query::parse(parts.uri.query());
        Ok(Params {
            cursor: q.required_int("cursor", MAX_SAFE_INTEGER)?,
            wait_ms: q.int("waitMs", MAX_WAIT_MS)?.unwrap_or(0),
            snapshot: q.flag("snapshot")?,
            epoch: match q.get("epoch") {
                None => None,
                Some(e) if e.trim().is_empty() || e.len() > MAX_EPOCH_BYTES => {
                    return Err(ApiError::invalid(format!(
                        "epoch: must be 1 to {MAX_EPOCH_BYTES} bytes and not blank, got {}",
                        quoted(e)
                    )))
                }
                Some(e) => Some(e.to_owned()),
            },
            output: output_watch::wanted(&q)?.map(Box::new),
        })
    }
}

/// Answers a reconnecting client, holding it while nothing is new.
///
/// A held request is ~10,000 times this future (see server/README.md,
/// "Memory"), so it keeps only what the answer needs: no copies of the
/// request, the id once (in the subscription), the caught-up answer.
/// Not an `async fn`: that would keep its arguments twice (as passed, and
/// moved into the body), 80 bytes more per held request.
#[allow(clippy::manual_async_fn)]
pub fn resume(
    State(state): State<AppState>,
    WatchCredential(credential): WatchCredential,
    TaskId(id): TaskId,
    Params {
        cursor,
        wait_ms,
        snapshot,
        epoch,
        output,
    }: Params,
) -> impl Future<Output = Result<Response, ApiError>> {
    // Compared here, so that a held request keeps no string for it.
    let same_epoch = same_epoch(epoch.as_deref(), state.store.epoch());
    // Checked before the future is built, so that a held request keeps
    // the tenant, not the whole credential.
    let caller = credential.require(Right::Watch, &id).map(|()| {
        let subject: Option<Box<str>> = credential.subject().map(Into::into);
        (credential.into_tenant(), subject)
    });
    async move {
        let (tenant, subject) = caller?;
        if let Some(wanted) = output {
            let who = output_watch::Follower {
                tenant,
                subject,
                id,
            };
            let times = (cursor, wait_ms, snapshot, same_epoch);
            return Box::pin(output_watch::resume(state, who, times, *wanted)).await;
        }
        if wait_ms > 0 {
            let who = Watcher {
                tenant: &tenant,
                subject: subject.as_deref(),
            };
            super::check_watch_quota(&state, who).await?;
        }
        let mut sub = state.hub.subscribe(&id, &tenant);
        let answer = state
            .store
            .resume(tenant.clone(), id, cursor, snapshot)
            .await?;
        let live = answer.task().is_some_and(|t| !t.state.is_terminal());
        if !worth_holding(wait_ms, answer.mode(), live, same_epoch) {
            return Ok(no_store_json(with_epoch(&state, answer)));
        }
        // Counted while held; refused (429, 503) past a cap.
        let who = Watcher {
            tenant: &tenant,
            subject: subject.as_deref(),
        };
        let _held = match super::admit_watch(&state, who) {
            Ok(permit) => permit,
            Err(refused) => return Err(refused.await),
        };
        let woke =
            tokio::time::timeout(Duration::from_millis(wait_ms), sub.wait_past(cursor)).await;
        let answer = match woke {
            // Nothing happened: the caught-up answer still holds.
            Err(_elapsed) => answer,
            Ok(Wake::Changed(latest)) => match answer_from(&latest, cursor, state.retention) {
                Some(a) => a,
                None => {
                    let id = sub.task_id().to_string();
                    state.store.resume(tenant, id, cursor, false).await?
                }
            },
            Ok(Wake::Dropped) => return Ok(aborted()),
        };
        Ok(no_store_json(with_epoch(&state, answer)))
    }
}

/// The answer's JSON with the store's epoch (PROTOCOL.md §Epoch).
pub fn with_epoch(state: &AppState, answer: ResumeAnswer) -> String {
    to_json(&EpochAnswer {
        epoch: Some(state.store.epoch().to_string()),
        answer,
    })
}

/// A response whose body fails at once: hyper aborts the connection, which
/// is what a client sees when the network drops (`drop-connections`).
pub fn aborted() -> Response {
    let failing = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped by the server"))
    });
    Response::new(Body::from_stream(failing))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn future_size<F, A, B, C, D, Fut>(_: F) -> usize
    where
        F: FnOnce(A, B, C, D) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// 10,000 held long-polls are 10,000 of these: 736 bytes with rustc
    /// 1.95 (904 before the request's copies were left out; the held-watch
    /// permit added 8), ~890 since the task view it holds gained the
    /// lifecycle fields (issue 11: +152 bytes, ~1.5 MB per 10,000 held
    /// polls; boxing them would cost the page's wasm more than its budget
    /// has left), 944 before the per-user watch count (issue 24: +24, the
    /// browser token's `sub` and the user's slot in the permit; a refused
    /// watch's timer is boxed so that it adds nothing here). The bound has
    /// room for compiler changes but catches a copy of the request or a
    /// second answer creeping in. (A task's plan, issue 26, is boxed in
    /// the view for this: inline it made the future 1,016 bytes.) 992
    /// with both the plan's box and live output's parameter (issue 27, a
    /// boxed `Option` the future keeps as a captured field even after the
    /// output branch has moved it out): 8 bytes each, 0.16 MB per 10,000
    /// held polls, so the bound is 1,000.
    #[test]
    fn the_held_future_stays_small() {
        let size = future_size(resume);
        assert!(size <= 1_000, "resume future is {size} bytes");
    }
}

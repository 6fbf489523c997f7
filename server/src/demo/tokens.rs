//! The demo page's credentials: the page holds no tenant token. The demo
//! endpoints are the demo application's backend: called without
//! `Authorization` they act for `--demo-tenant`, and `POST /v1/demo/tokens`
//! mints the page a short-lived browser token for tasks the demo started,
//! with the demo's own key (drawn at start, held in memory). A backend of
//! a real application does the same with its own JWT library and key.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::{Deserialize, Serialize};
use taskwire_wire::from_json_serde_bytes;

use crate::auth::keys::MAX_TASKS;
use crate::auth::{MintScope, Right, Tenant};
use crate::clock::now_secs;
use crate::error::ApiError;
use crate::ids::check_id;
use crate::routes::body;
use crate::wire_json::WireJson;
use crate::AppState;

/// How long a page token lives (at most `--browser-token-max-ttl-secs`):
/// short, so the page shows refreshes.
pub const PAGE_TOKEN_SECS: u64 = 120;
/// The end user a demo page is, before a random suffix: the demo has no
/// sign-in, and one subject for every visitor would put all of them under
/// one user's cap on held watches (`--subject-max-watches`, 100), so each
/// token is a user of its own (`demo-page-3f9a…`).
pub const PAGE_SUBJECT: &str = "demo-page";

/// A fresh subject for one page token.
fn page_subject() -> Result<String, ApiError> {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(format!("random subject: {e}")))?;
    let mut subject = format!("{PAGE_SUBJECT}-");
    for b in bytes {
        subject.push_str(&format!("{b:02x}"));
    }
    Ok(subject)
}

/// The tenant a demo endpoint acts for: the caller's tenant token's, or,
/// without `Authorization`, `--demo-tenant` (the page's case).
#[derive(Debug, Clone)]
pub struct DemoCaller(pub String);

impl FromRequestParts<AppState> for DemoCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if parts.headers.contains_key(AUTHORIZATION) {
            let Tenant(tenant) = Tenant::from_request_parts(parts, state).await?;
            return Ok(DemoCaller(tenant));
        }
        Ok(DemoCaller(state.config.demo_tenant.clone()))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokenRequest {
    task_ids: Option<Vec<String>>,
    /// A batch instead: a token to follow it (`watch`).
    batch_id: Option<String>,
}

/// A minted token: `{"expiresAt","token"}` (name order, as the page has
/// always had it); `expiresAt` in seconds since the epoch.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Minted {
    expires_at: u64,
    token: String,
}

/// `POST /v1/demo/tokens {"taskIds": [...]}`: a browser token for those
/// tasks (`watch`, `deliver`, `cancel` and `decide`, [`PAGE_TOKEN_SECS`]),
/// if each is a demo task of the demo tenant (404 naming the first that is
/// not); `{"batchId": …}`: a token to follow that batch of the demo
/// tenant (`watch`).
pub async fn mint(
    State(state): State<AppState>,
    DemoCaller(tenant): DemoCaller,
    raw: Result<Bytes, BytesRejection>,
) -> Result<WireJson<Minted>, ApiError> {
    let raw = body(raw)?;
    let req: TokenRequest = from_json_serde_bytes(&raw, "body")?;
    let minter = state
        .browser_keys
        .demo_minter()
        .ok_or_else(|| ApiError::internal("demo: no minting key"))?;
    if tenant != minter.tenant() {
        return Err(ApiError::not_found(
            "body.taskIds: the demo mints tokens for --demo-tenant's tasks only",
        ));
    }
    // Never longer than the server accepts.
    let ttl = PAGE_TOKEN_SECS.min(state.config.browser_tokens.max_ttl_secs);
    let exp = u64::try_from(now_secs()).unwrap_or(0) + ttl;
    let subject = page_subject()?;
    let token = match (req.task_ids, req.batch_id) {
        (Some(tasks), None) => {
            check_demo_tasks(&state, &tenant, &tasks).await?;
            minter.mint(
                &subject,
                MintScope::Tasks(&tasks),
                &[Right::Watch, Right::Deliver, Right::Cancel, Right::Decide],
                exp,
            )?
        }
        (None, Some(batch)) => {
            check_id("body.batchId", &batch)?;
            // A batch the demo made, or 404 as for an unknown one.
            if !state.demo.made.has_batch(&batch) {
                return Err(ApiError::not_found(format!(
                    "batchId: no batch with id {}",
                    crate::error::quoted(&batch)
                )));
            }
            minter.mint(&subject, MintScope::Batch(&batch), &[Right::Watch], exp)?
        }
        _ => {
            return Err(ApiError::invalid(
                "body: give taskIds (a list of task ids) or batchId, not both",
            ))
        }
    };
    Ok(WireJson(Minted {
        expires_at: exp,
        token,
    }))
}

/// Each of `tasks` is a task the demo made for `tenant` (404 naming the
/// first that is not, as for an unknown task); 1 to `MAX_TASKS` of them.
async fn check_demo_tasks(
    state: &AppState,
    tenant: &str,
    tasks: &[String],
) -> Result<(), ApiError> {
    if tasks.is_empty() || tasks.len() > MAX_TASKS {
        return Err(ApiError::invalid(format!(
            "body.taskIds: must list 1 to {MAX_TASKS} task ids"
        )));
    }
    for id in tasks {
        check_id("body.taskIds", id)?;
        if !state.demo.made.has_task(id) {
            return Err(ApiError::no_task(id));
        }
        // Still there (not swept): the tenant's task, or 404.
        state.store.get(tenant.to_string(), id.clone()).await?;
    }
    Ok(())
}

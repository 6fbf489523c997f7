//! `POST /v1/work/claim` (PROTOCOL.md §Workers): a worker asks for up to
//! N queued tasks of its kinds, held like a long-poll until there is
//! work. Signed with the tenant's callback secret, as callbacks are: the
//! headers (the signature's, `taskwire-tenant`, `Content-Length`) are
//! judged before a byte of the body is read.

use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sha2::{Digest, Sha256};
use taskwire_core::{check_callback_id, ClaimRequest, Millis};
use taskwire_wire::{from_json_bytes, to_json};
use tokio::time::Instant;

use super::callbacks::{declared_length, joined, read_body};
use super::{check_id, now_ms, now_secs, BODY_LIMIT};
use crate::error::{quoted, ApiError};
use crate::limits::Watcher;
use crate::signature::SignedHeaders;
use crate::store::{Claim, Claimed, SignedRequest};
use crate::wire_json::json_text;
use crate::AppState;

/// The header naming the tenant whose secret signed the claim.
pub const TENANT_HEADER: &str = "taskwire-tenant";

/// A held claim looks at the queue again at least this often, for work
/// no signal announced here (hub/work.rs).
const RECHECK: Duration = Duration::from_secs(5);

/// Claims work for a worker; see the module docs.
pub async fn claim(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let refuse = |message: String| {
        state.stats.rejected_signature();
        ApiError::unauthorized(message)
    };
    let signed = SignedHeaders::parse(&headers, now_secs()).map_err(|r| refuse(r.0))?;
    check_id("webhook-id", &signed.id)?;
    check_callback_id(Some(&signed.id))?;
    let tenant = tenant_header(&headers)?;
    if declared_length(&headers)? > BODY_LIMIT as u64 {
        return Err(ApiError::too_large(BODY_LIMIT));
    }
    let scope = state.keyring.claim_scope(tenant.as_deref());
    let mut verifier = match scope {
        Some((secrets, _)) => signed.verifier(secrets),
        None => signed.decoy(state.keyring.decoy()),
    };
    let timeout = Duration::from_millis(state.config.callback_body_timeout_ms);
    let pieces = read_body(body, &mut verifier, true, (timeout, BODY_LIMIT)).await?;
    let valid = verifier.finish(&signed);
    let Some((_, tenants)) = scope.filter(|_| valid) else {
        return Err(refuse(match tenant {
            Some(t) => format!(
                "webhook-signature: no valid signature for tenant {} (sign the claim with one \
                 of its callback secrets)",
                quoted(&t)
            ),
            None => format!(
                "webhook-signature: no valid signature with the shared secret (name the tenant \
                 in {TENANT_HEADER} to sign with its own)"
            ),
        }));
    };
    let raw = joined(pieces);
    let request: ClaimRequest = from_json_bytes(&raw, "claim")?;
    let mut claim = Claim {
        tenants,
        kinds: request.kinds,
        max: request.max,
        worker: request.worker,
        lease_ms: request.lease_ms,
        now_ms: now_ms(),
        signed: Some((
            signed.id.clone(),
            SignedRequest {
                at: signed.timestamp_secs(),
                body_sha256: Sha256::digest(&raw).into(),
            },
        )),
        limits: state.config.kind_limits(),
        workflow_versions: request.workflow_versions,
    };
    let claimed = hold(&state, &mut claim, request.wait_ms).await?;
    Ok(answer(&state, claimed))
}

/// `taskwire-tenant`, at most once, non-blank and at most 255 bytes.
fn tenant_header(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(TENANT_HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::invalid(format!(
            "{TENANT_HEADER}: sent more than once"
        )));
    }
    let text = value
        .to_str()
        .map_err(|_| ApiError::invalid(format!("{TENANT_HEADER}: must be visible ASCII")))?;
    check_id(TENANT_HEADER, text)?;
    Ok(Some(text.to_string()))
}

/// Claims now; with nothing to take and `wait_ms` > 0, holds the request
/// (counted as a held watch of its tenant) and claims again whenever work
/// may be waiting, until something is taken or the time is up.
async fn hold(state: &AppState, claim: &mut Claim, wait_ms: u64) -> Result<Claimed, ApiError> {
    // In line before the store is asked, so that no offer made in
    // between is missed.
    let mut signal = state.hub.work.subscribe();
    let mut ticket = state.hub.work.ticket(&claim.tenants, &claim.kinds);
    let claimed = state.store.claim(claim.clone()).await?;
    if !claimed.tasks.is_empty() || wait_ms == 0 {
        return Ok(claimed);
    }
    // Used once: the held retries are the same request, already counted.
    claim.signed = None;
    let tenant = claim.tenants.first().cloned().unwrap_or_default();
    let who = Watcher {
        tenant: &tenant,
        subject: None,
    };
    let _permit = match super::admit_watch(state, who) {
        Ok(permit) => permit,
        Err(late) => return Err(late.await),
    };
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let mut retry_at = claimed.retry_at_ms;
    loop {
        let rate_wait = retry_at.map(|at| Duration::from_millis((at - now_ms()).max(0.0) as u64));
        let next = Instant::now() + rate_wait.map_or(RECHECK, |w| w.min(RECHECK));
        tokio::select! {
            _ = &mut ticket.offered => {}
            _ = signal.changed() => {}
            () = tokio::time::sleep_until(next.min(deadline)) => {}
        }
        ticket = state.hub.work.ticket(&claim.tenants, &claim.kinds);
        claim.now_ms = now_ms();
        let claimed = state.store.claim(claim.clone()).await?;
        if !claimed.tasks.is_empty() || Instant::now() >= deadline {
            return Ok(claimed);
        }
        retry_at = claimed.retry_at_ms;
    }
}

/// `{"tasks":[…],"nowMs":…}`: each task as `GET` shows it, plus its lease.
fn answer(state: &AppState, claimed: Claimed) -> Response {
    let epoch = state.store.epoch();
    let mut out = String::from("{\"tasks\":[");
    for (i, record) in claimed.tasks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let mut task = record.to_json(epoch);
        if let (Some(lease), true) = (&record.lease, task.ends_with('}')) {
            task.pop();
            task.push_str(",\"lease\":");
            task.push_str(&to_json(lease));
            task.push('}');
        }
        out.push_str(&task);
    }
    out.push_str("],\"nowMs\":");
    out.push_str(&to_json(
        &Millis::new(now_ms(), "nowMs").unwrap_or_default(),
    ));
    out.push('}');
    let mut response = json_text(StatusCode::OK, out);
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}

//! One claim (`POST /v1/work/claim`), and how a refused one ends a run.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;
use crate::http::{Persist, SendError, REQUEST_TIMEOUT};
use crate::sign::random_id;
use crate::wire::{read_claim, ClaimRequest, Claimed};
use crate::worker::Inner;

/// Why [`crate::Worker::run`] ended with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The worker cannot run as configured (no handler yet).
    Config(ConfigError),
    /// `run()` is already running on this worker (or a clone of it).
    AlreadyRunning,
    /// The server refused the claim for a reason no retry fixes: a wrong
    /// secret or tenant (401), a malformed claim (400), no claim route
    /// (404).
    Refused {
        /// The HTTP status.
        status: u16,
        /// The server's error code.
        code: String,
        /// The server's message, which names the field or header.
        message: String,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "{e}"),
            RunError::AlreadyRunning => f.write_str("run() is already running on this worker"),
            RunError::Refused {
                status,
                code,
                message,
            } => write!(
                f,
                "the server refused the claim: {status} {code}: {message}"
            ),
        }
    }
}

impl std::error::Error for RunError {}

/// A claim that did not bring tasks.
pub(crate) enum ClaimError {
    /// Worth another claim, after this long at least.
    Again(String, Option<Duration>),
    /// No other claim will fare better.
    Refused(RunError),
}

/// Statuses no new claim fixes. 409 (`claim-replayed`) is not one: the
/// next claim is signed afresh under a new id.
fn refused_for_good(status: u16) -> bool {
    matches!(status, 400 | 401 | 403 | 404 | 413 | 422)
}

/// One claim of at most `max` tasks of `kinds`, each with the latest time
/// its lease may end, as far as this worker can tell.
pub(crate) async fn claim(
    inner: &Inner,
    kinds: &[String],
    max: usize,
) -> Result<Vec<(Claimed, Instant)>, ClaimError> {
    let body = taskwire_wire::to_json(&ClaimRequest {
        worker: &inner.name,
        kinds,
        max,
        wait_ms: inner.wait_ms,
        lease_ms: inner.lease.as_millis() as u64,
        workflow_versions: &inner.workflow_versions,
    });
    // One try per claim id: a claim lost to the network may have claimed
    // tasks, which lapse and are re-queued; the loop claims afresh.
    let persist = Persist {
        until: None,
        timeout: Duration::from_millis(inner.wait_ms) + REQUEST_TIMEOUT,
        resend: false,
    };
    let sent_at = Instant::now();
    // A held claim may be answered long after it was sent, and its
    // leases start when it is answered: each lease's end is taken from
    // the answer (`lease.expiresAtMs - nowMs` from now), else counted from
    // the send, which is early but safe.
    let text = inner
        .transport
        .post_signed("/v1/work/claim", &random_id("clm"), &body, persist)
        .await
        .map_err(|e| match e {
            SendError::Status {
                status,
                code,
                message,
                ..
            } if refused_for_good(status) => ClaimError::Refused(RunError::Refused {
                status,
                code,
                message,
            }),
            SendError::Status { retry_after, .. } => ClaimError::Again(e.to_string(), retry_after),
            SendError::GaveUp(_) => ClaimError::Again(e.to_string(), None),
        })?;
    let received_at = Instant::now();
    let answer = read_claim(&text).map_err(|e| ClaimError::Again(e, None))?;
    if let Some(now) = answer.now_ms {
        inner.transport.clock.sync(now);
    }
    let lease_end = |t: &Claimed| match (t.lease_expires_at_ms, answer.now_ms) {
        (Some(end), Some(now)) if end > now => {
            received_at + Duration::from_millis((end - now) as u64).min(inner.lease)
        }
        _ => sent_at + inner.lease,
    };
    Ok(answer
        .tasks
        .iter()
        .map(|t| (t.clone(), lease_end(t)))
        .collect())
}

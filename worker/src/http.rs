//! Signed POSTs to the server, resent the safe way.
//!
//! Every request the worker sends (a claim, a report) is signed as
//! PROTOCOL.md §Executor callback says. Resending follows "A signed
//! request is used once":
//!
//! - a network error, 408, 429 or 503 is resent with the SAME
//!   `webhook-id` and the SAME body, signed again with a fresh
//!   `webhook-timestamp`, so the server judges it like the first (and a
//!   first that did arrive makes it a `duplicate-callback`);
//! - the wait between sends is exponential with jitter, at least what
//!   `Retry-After` asks, and bounded by a deadline (for a report: the
//!   end of the lease, past which nobody waits for it any more);
//! - a 401 for the timestamp means this worker's clock is off: the clock
//!   is set from the answer's `Date` and the request is sent once more; a
//!   400 `clock-skew` (the event's `atMs`) sets the clock too, and the
//!   reporter writes the event again with the corrected time.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

use crate::connect::Connector;
use crate::error::ConfigError;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use tokio::time::Instant;

use crate::clock::ServerClock;
use crate::sign::{random_unit, Secret};

/// The most of an answer read: a claim of 100 tasks with large inputs
/// stays far below it; it only bounds what a peer can make us buffer.
const ANSWER_LIMIT: usize = 32 * 1024 * 1024;
/// The first wait before a resend, doubled each time up to [`MAX_BACKOFF`]
/// (the Node and Python libraries' steps).
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How long one report may take before it counts as a network error (a
/// claim: its `waitMs` more).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between two sends (before `Retry-After`).
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How one POST ended, when it did not end with a 200.
#[derive(Debug)]
pub(crate) enum SendError {
    /// The server answered another status; `code` and `message` are from
    /// its error body when it had one.
    Status {
        status: u16,
        code: String,
        message: String,
        /// The answer's `Retry-After`, if any (a 429 or 503).
        retry_after: Option<Duration>,
    },
    /// Every send failed (network, 408, 429, 503) until the deadline; the
    /// last failure.
    GaveUp(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Status {
                status,
                code,
                message,
                ..
            } => write!(f, "answered {status} {code}: {message}"),
            SendError::GaveUp(last) => write!(f, "gave up resending: {last}"),
        }
    }
}

/// How persistently to send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Persist {
    /// Stop resending once the next try would start after this.
    pub(crate) until: Option<Instant>,
    /// How long one request may take (a held claim: its `waitMs` and more).
    pub(crate) timeout: Duration,
    /// Resend after a network error or 408/429/503 (false: one try).
    pub(crate) resend: bool,
}

/// The server's error body: `{"error":{"code":…,"message":…}}`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorBody {
    error: ErrorFields,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ErrorFields {
    code: String,
    message: String,
}

/// The connection to one server, shared by the claim loop and every job.
pub(crate) struct Transport {
    client: Client<Connector, Full<Bytes>>,
    /// `http://host:port` plus any path prefix, without a trailing `/`.
    base: String,
    tenant: String,
    secret: Secret,
    pub(crate) clock: Arc<ServerClock>,
}

impl Transport {
    /// `roots_pem`: certificates trusted beside Mozilla's (`https://`).
    pub(crate) fn new(
        base: String,
        tenant: String,
        secret: Secret,
        clock: Arc<ServerClock>,
        roots_pem: Option<&[u8]>,
    ) -> Result<Self, ConfigError> {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
        let client = Client::builder(TokioExecutor::new())
            // Below the server's own keep-alive, so that a pooled
            // connection is not reused just as the server closes it.
            .pool_idle_timeout(Duration::from_secs(20))
            .build(Connector::new(http, roots_pem)?);
        Ok(Transport {
            client,
            base,
            tenant,
            secret,
            clock,
        })
    }

    /// POSTs `body` to `path` signed under `id`, resent per `persist`;
    /// the answer's text on a 200.
    pub(crate) async fn post_signed(
        &self,
        path: &str,
        id: &str,
        body: &str,
        persist: Persist,
    ) -> Result<String, SendError> {
        let mut tries: u32 = 0;
        let mut resynced = false;
        loop {
            let ts = self.clock.now_secs();
            let signature = self.secret.sign(id, ts, body.as_bytes());
            let sent = self
                .send(path, id, ts, &signature, body, persist.timeout)
                .await;
            let (wait, last) = match sent {
                Ok((200, _, text, _)) => return Ok(text),
                Ok((status, date, text, retry_after)) => {
                    let err: ErrorBody =
                        taskwire_wire::from_json_serde(&text, "answer").unwrap_or_default();
                    // The signature's timestamp is refused: this clock is
                    // off. The body is the same whatever the clock says,
                    // so it is sent again at once with the server's time.
                    let stale =
                        status == 401 && err.error.message.starts_with("webhook-timestamp:");
                    if stale && !resynced {
                        if let Some(date) = &date {
                            if self.clock.sync_from_date(date) {
                                resynced = true;
                                continue;
                            }
                        }
                    }
                    // The event's `atMs` is refused: the clock is set, and
                    // the caller writes the event again (its body changes).
                    if status == 400 && err.error.code == "clock-skew" {
                        if let Some(date) = &date {
                            self.clock.sync_from_date(date);
                        }
                    }
                    if !(persist.resend && matches!(status, 408 | 429 | 503)) {
                        return Err(SendError::Status {
                            status,
                            code: err.error.code,
                            message: err.error.message,
                            retry_after,
                        });
                    }
                    (retry_after, format!("answered {status} {}", err.error.code))
                }
                Err(e) if persist.resend => (None, e),
                Err(e) => return Err(SendError::GaveUp(e)),
            };
            let delay = backoff(tries).max(wait.unwrap_or_default());
            tries = tries.saturating_add(1);
            if persist
                .until
                .is_some_and(|until| Instant::now() + delay > until)
            {
                return Err(SendError::GaveUp(last));
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// One POST: status, `Date`, body text, `Retry-After`; or why it did
    /// not get an answer.
    async fn send(
        &self,
        path: &str,
        id: &str,
        ts: i64,
        signature: &str,
        body: &str,
        timeout: Duration,
    ) -> Result<(u16, Option<String>, String, Option<Duration>), String> {
        let req = Request::post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .header("taskwire-tenant", &self.tenant)
            .header("webhook-id", id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| format!("request: {e}"))?;
        let exchange = async {
            let res = self.client.request(req).await.map_err(|e| describe(&e))?;
            let status = res.status();
            let header = |name| {
                res.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let date = header(hyper::header::DATE);
            let retry_after = header(hyper::header::RETRY_AFTER)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let bytes = Limited::new(res.into_body(), ANSWER_LIMIT)
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            let text = String::from_utf8(bytes.to_vec())
                .map_err(|_| "the answer is not UTF-8".to_string())?;
            Ok((status_code(status), date, text, retry_after))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        }
    }
}

fn status_code(s: StatusCode) -> u16 {
    s.as_u16()
}

/// An error and its sources, on one line.
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        text.push_str(": ");
        text.push_str(&s.to_string());
        cur = s.source();
    }
    text
}

/// The wait before resend `n + 1`: a random wait from half to all of an
/// exponential step, so that resends of many workers spread out.
pub(crate) fn backoff(n: u32) -> Duration {
    backoff_between(FIRST_BACKOFF, MAX_BACKOFF, n)
}

/// The same between `first` and `max`.
pub(crate) fn backoff_between(first: Duration, max: Duration, n: u32) -> Duration {
    let bound = first.saturating_mul(1u32 << n.min(16)).min(max);
    bound.mul_f64(0.5 + 0.5 * random_unit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_bounded() {
        for n in 0..40 {
            let d = backoff(n);
            assert!(d <= MAX_BACKOFF, "{n}: {d:?}");
            assert!(d >= FIRST_BACKOFF / 2, "{n}: {d:?}");
        }
    }
}

//! The notify webhook (`--notify-url`, `--tenant-notify-url`): posts every
//! committed outbox row to its tenant's receiver, signed like callbacks
//! with `webhook-id` = the notification key (so the receiver deduplicates
//! retries), until it gets a 2xx. Receivers get tenants' notifications,
//! not a tenant's own callbacks, so one secret signs them all
//! (`--notify-secret`, by default the shared callback secret). Retries back off exponentially (0.5 s
//! doubling, at most 5 min) and survive restarts, because the attempt
//! state lives in the outbox row.
//!
//! **No receiver holds back another, and no post holds back the next.**
//! Each receiver is a lane with at most `--notify-in-flight` posts at
//! once; a post that cannot connect within `--notify-connect-timeout-ms`,
//! or has no full answer within `--notify-timeout-ms`, counts as failed
//! and is retried with backoff. An answer's body is read up to
//! [`REPLY_LIMIT`] and no further (the status decides). A lane reads only
//! its own tenants' rows ([`crate::store::TenantScope`]), so a hung
//! receiver's backlog never fills another lane's reads. Before, posts went out one at a time with a
//! 10 s timeout: one hung receiver let 4 of 20 notifications through in
//! 40 s, for every tenant.
//!
//! **Order.** A lane starts its posts in `seq` order. With several in
//! flight they can finish out of order, as a retried post always could:
//! a receiver orders by `seq` and deduplicates by `webhook-id`.
//!
//! **`https://` receivers** ([`tls`]) must present a certificate valid for
//! the URL's host from Mozilla's roots or `--notify-ca-file`; one that
//! does not fails the attempt before any byte of the post is sent, and
//! is retried like any other failure, with each refusal logged.

pub mod receivers;
pub mod tls;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use taskwire_wire::to_json;
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

use crate::client::Conn;
use crate::clock::{now_ms, now_secs};
use crate::store::{OutboxEntry, StoreError, WebhookClaim};
use crate::{AppState, Config};

pub use receivers::{receivers, Receiver};

/// The most of a receiver's answer read. Only its status matters: past
/// this the body is not read, and the connection is closed (a receiver
/// that answered 200 with an endless body once took the server from
/// 15 MB to 2 GB within the response timeout). The post still counts by
/// its status, so a 2xx with a long body is delivered.
pub const REPLY_LIMIT: usize = 64 * 1024;

/// Delay before the next attempt after `attempts` failures.
pub fn backoff_ms(attempts: u32) -> f64 {
    let ms = 500.0 * 2f64.powi(attempts.min(20) as i32);
    ms.min(300_000.0)
}

/// How posts are sent (flags `--notify-*`).
#[derive(Clone)]
pub struct Sending {
    /// Most posts in flight per receiver (at least 1).
    pub in_flight: usize,
    /// Time to connect (with TLS, the handshake included).
    pub connect_timeout: Duration,
    /// Time from connected to the whole answer.
    pub response_timeout: Duration,
    /// The client side of `https://` posts (Mozilla's roots and
    /// `--notify-ca-file`).
    pub tls: TlsConnector,
}

impl Sending {
    /// From the flags; a bad `--notify-ca-file` is an error naming it.
    pub fn from_config(c: &Config) -> Result<Self, String> {
        Ok(Sending {
            in_flight: c.notify_in_flight.max(1),
            connect_timeout: Duration::from_millis(c.notify_connect_timeout_ms),
            response_timeout: Duration::from_millis(c.notify_timeout_ms),
            tls: tls::connector(c.notify_ca_file.as_deref())?,
        })
    }

    /// How long a claimed row stays off other instances' reads
    /// (PostgreSQL): a whole post plus a minute to record its outcome.
    fn lease_ms(&self) -> f64 {
        (self.connect_timeout + self.response_timeout + Duration::from_secs(60)).as_secs_f64()
            * 1000.0
    }
}

/// One receiver's posts.
struct Lane {
    receiver: Arc<Receiver>,
    /// `seq`s posted (or being recorded) now.
    in_flight: HashSet<u64>,
    /// A read may find rows: after a wake-up or the retry tick, and while
    /// the last read filled the lane.
    look: bool,
}

/// A finished post: its lane and row, and whether its outcome was stored.
type Done = (usize, u64, Result<(), StoreError>);

/// Runs forever (aborted at shutdown, which aborts the posts in flight;
/// their rows are posted again later, at least once as ever).
pub async fn run(state: AppState, receivers: Vec<Receiver>, sending: Sending) {
    let mut lanes: Vec<Lane> = receivers
        .into_iter()
        .map(|receiver| Lane {
            receiver: Arc::new(receiver),
            in_flight: HashSet::new(),
            look: true,
        })
        .collect();
    let mut posts: JoinSet<Done> = JoinSet::new();
    // Which post a task is, should it end without answering (a panic).
    let mut tasks: HashMap<tokio::task::Id, (usize, u64)> = HashMap::new();
    let mut retry = tokio::time::interval(Duration::from_secs(1));
    let mut failing: Option<String> = None;
    loop {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let room = sending.in_flight.saturating_sub(lane.in_flight.len());
            if !lane.look || room == 0 {
                continue;
            }
            let claim = WebhookClaim {
                scope: lane.receiver.scope.clone(),
                in_flight: lane.in_flight.iter().copied().collect(),
                now_ms: now_ms(),
                limit: u32::try_from(room).unwrap_or(u32::MAX),
                lease_ms: sending.lease_ms(),
            };
            match state.store.pending_webhooks(claim).await {
                Ok(pending) => {
                    failing = None;
                    state.stats.quarantined("notify", &pending.quarantined);
                    lane.look = pending.rows.len() + pending.quarantined.len() >= room;
                    for row in pending.rows {
                        lane.in_flight.insert(row.seq);
                        let seq = row.seq;
                        let receiver = Arc::clone(&lane.receiver);
                        let post = attempt(state.clone(), receiver, sending.clone(), row);
                        let handle = posts.spawn(async move { (i, seq, post.await) });
                        tasks.insert(handle.id(), (i, seq));
                    }
                }
                Err(e) => {
                    report(&mut failing, &e);
                    lane.look = false; // the retry tick tries again
                }
            }
        }
        tokio::select! {
            Some(first) = posts.join_next_with_id() => {
                let mut next = Some(first);
                while let Some(finished) = next {
                    let (lane, seq, recorded) = match finished {
                        Ok((id, done)) => {
                            tasks.remove(&id);
                            done
                        }
                        Err(e) => match tasks.remove(&e.id()) {
                            Some((lane, seq)) => (lane, seq, Err(StoreError::Internal(e.to_string()))),
                            None => break,
                        },
                    };
                    if let Some(lane) = lanes.get_mut(lane) {
                        lane.in_flight.remove(&seq);
                    }
                    // Not recorded: the row is still due; the retry tick
                    // posts it again (no sooner, while the store fails).
                    if let Err(e) = recorded {
                        report(&mut failing, &e);
                    }
                    next = posts.try_join_next_with_id();
                }
            }
            _ = state.hub.outbox.notified() => lanes.iter_mut().for_each(|l| l.look = true),
            _ = retry.tick() => lanes.iter_mut().for_each(|l| l.look = true),
        }
    }
}

/// A store error, reported when it first appears (not on every retry).
/// A storage outage is the store's to log, once (store/outage.rs): the
/// outbox read still succeeds on a full disk, so "first appears" came
/// back at every retry tick.
fn report(failing: &mut Option<String>, e: &StoreError) {
    if matches!(e, StoreError::Unavailable(_)) {
        return;
    }
    let e = e.to_string();
    if failing.as_ref() != Some(&e) {
        eprintln!("taskwire-server: notify: {e}");
    }
    *failing = Some(e);
}

/// Posts one row and records the outcome: sent, or when to try again.
async fn attempt(
    state: AppState,
    receiver: Arc<Receiver>,
    sending: Sending,
    row: OutboxEntry,
) -> Result<(), StoreError> {
    let sent = post(&state, &receiver, &sending, &row).await;
    state
        .hub
        .metrics
        .webhook_attempt(sent, now_ms() - row.notification.at_ms);
    let next = now_ms() + backoff_ms(row.attempts);
    state.store.webhook_attempted(row.seq, sent, next).await
}

/// Whether the receiver answered 2xx in time, on a fresh connection
/// (dropped, with its socket, when a timeout ends the attempt).
async fn post(state: &AppState, receiver: &Receiver, sending: &Sending, row: &OutboxEntry) -> bool {
    let Some(secret) = &state.notify_secret else {
        return false;
    };
    let body = to_json(row);
    let signed = secret.headers(&row.key, now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("content-type", "application/json"));
    let connect = tokio::time::timeout(sending.connect_timeout, open(receiver, &sending.tls));
    let mut conn = match connect.await {
        Ok(Ok(conn)) => conn,
        // A refused certificate is an operator's to fix: say why, every
        // attempt (at most one per backoff step).
        Ok(Err(tls::OpenError::Handshake(e))) => {
            eprintln!(
                "taskwire-server: notify: {}: TLS handshake failed, nothing sent: {e} \
                 (notification {}, attempt {}; retried with backoff)",
                receiver.url,
                row.key,
                row.attempts.saturating_add(1)
            );
            return false;
        }
        Ok(Err(tls::OpenError::Connect(_))) | Err(_) => return false,
    };
    let call = conn.send_within("POST", &receiver.path, &headers, body, REPLY_LIMIT);
    match tokio::time::timeout(sending.response_timeout, call).await {
        Ok(Ok(reply)) => (200..300).contains(&reply.status),
        _ => false,
    }
}

/// A fresh connection to `receiver`: plain, or TLS with its certificate
/// verified.
async fn open(receiver: &Receiver, connector: &TlsConnector) -> Result<Conn, tls::OpenError> {
    match &receiver.tls {
        None => Conn::open(&receiver.authority)
            .await
            .map_err(tls::OpenError::Connect),
        Some(name) => tls::open(connector, &receiver.authority, name.clone(), &receiver.host).await,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(super::backoff_ms(0), 500.0);
        assert_eq!(super::backoff_ms(1), 1000.0);
        assert_eq!(super::backoff_ms(30), 300_000.0);
    }
}

//! The notify webhook (`--notify-url`): posts every committed outbox row,
//! signed like callbacks with `webhook-id` = the notification key (so the
//! receiver deduplicates retries), until it gets a 2xx. One receiver gets
//! every tenant's notifications, so one secret signs them
//! (`--notify-secret`, by default the shared callback secret), not the
//! tenants' own. Retries back off
//! exponentially (0.5 s doubling, at most 5 min) and survive restarts,
//! because the attempt state lives in the outbox row.

use std::time::Duration;

use taskwire_core::wire::to_json;

use crate::client;
use crate::routes::{now_ms, now_secs};
use crate::store::OutboxEntry;
use crate::AppState;

/// Delay before the next attempt after `attempts` failures.
pub fn backoff_ms(attempts: u32) -> f64 {
    let ms = 500.0 * 2f64.powi(attempts.min(20) as i32);
    ms.min(300_000.0)
}

/// Runs forever (aborted at shutdown).
pub async fn run(state: AppState, authority: String, path: String) {
    loop {
        let rows = match state.store.pending_webhooks(now_ms(), 100).await {
            Ok(rows) => rows,
            Err(e) => {
                eprintln!("taskwire-server: notify: {e:?}");
                Vec::new()
            }
        };
        for row in &rows {
            let sent = post(&state, &authority, &path, row).await;
            let next = now_ms() + backoff_ms(row.attempts);
            if let Err(e) = state.store.webhook_attempted(row.seq, sent, next).await {
                eprintln!("taskwire-server: notify: {e:?}");
            }
        }
        if rows.is_empty() {
            // Woken by the next outbox commit, or retry what is due.
            let _ = tokio::time::timeout(Duration::from_secs(1), state.hub.outbox.notified()).await;
        }
    }
}

async fn post(state: &AppState, authority: &str, path: &str, row: &OutboxEntry) -> bool {
    let Some(secret) = &state.notify_secret else {
        return false;
    };
    let body = to_json(row);
    let signed = secret.headers(&row.key, now_secs(), body.as_bytes());
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.push(("content-type", "application/json"));
    let call = client::request(authority, "POST", path, &headers, body);
    match tokio::time::timeout(Duration::from_secs(10), call).await {
        Ok(Ok(reply)) => (200..300).contains(&reply.status),
        _ => false,
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

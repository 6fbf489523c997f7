//! The normal client: asks the API for a task while the attack runs,
//! honouring `Retry-After`, and records what it got ([`Probes`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use taskwire_server::client;

use crate::Res;

/// Creates the task the normal client asks for (retrying a 503 for up
/// to 10 s: an attack may already be running).
pub async fn create_task(addr: SocketAddr, auth: &str) -> Res<String> {
    let mut tries = 0;
    loop {
        let r = client::request(
            &addr.to_string(),
            "POST",
            "/v1/tasks",
            &[("authorization", auth)],
            r#"{"ttlMs":3600000,"maxAttempts":1}"#,
        )
        .await?;
        if r.status == 503 && tries < 10 {
            tries += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        return r
            .read::<taskwire_core::TaskView>("answer")
            .map(|c| c.id)
            .map_err(|_| format!("create: {} {}", r.status, r.text()).into());
    }
}

/// What the normal client got.
#[derive(Default)]
pub struct Probes {
    /// The status of each ask's first try (0: no answer within 5 s).
    pub first_tries: Vec<u16>,
    /// Asks answered 200, first try or after honouring `Retry-After`:
    /// the time from the first try to the 200.
    pub answered: Vec<Duration>,
    /// The longest time between two 200s (or from the start to the first).
    pub longest_without_200: Duration,
}

/// An ask gives up on `Retry-After` past this.
const ASK_BUDGET: Duration = Duration::from_secs(10);

/// The normal client: one GET on a fresh connection per interval (5 s at
/// most each); a 503 or 429 is retried after its `Retry-After`, as the
/// taskwire client does, for up to [`ASK_BUDGET`].
pub async fn probe(
    addr: SocketAddr,
    auth: String,
    task: String,
    every_ms: u64,
    until: Instant,
) -> Probes {
    let mut probes = Probes::default();
    if every_ms == 0 {
        return probes;
    }
    let mut last_200 = Instant::now();
    let path = format!("/v1/tasks/{task}");
    let authority = addr.to_string();
    let headers = [("authorization", auth.as_str())];
    let mut tick = tokio::time::interval(Duration::from_millis(every_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < until {
        if tokio::time::timeout_at(until.into(), tick.tick())
            .await
            .is_err()
        {
            break;
        }
        let t = Instant::now();
        let mut first = None;
        loop {
            let asked = client::request(&authority, "GET", &path, &headers, "");
            let (status, retry_after) =
                match tokio::time::timeout(Duration::from_secs(5), asked).await {
                    Ok(Ok(r)) => (
                        r.status,
                        r.header("retry-after").and_then(|v| v.parse::<u64>().ok()),
                    ),
                    _ => (0, None),
                };
            first.get_or_insert(status);
            if status == 200 {
                probes.answered.push(t.elapsed());
                probes.longest_without_200 = probes.longest_without_200.max(last_200.elapsed());
                last_200 = Instant::now();
                break;
            }
            match retry_after.map(Duration::from_secs) {
                Some(wait) if matches!(status, 429 | 503) && t.elapsed() + wait < ASK_BUDGET => {
                    tokio::time::sleep(wait).await;
                }
                _ => break,
            }
        }
        probes.first_tries.extend(first);
    }
    probes.longest_without_200 = probes.longest_without_200.max(last_200.elapsed());
    probes
}

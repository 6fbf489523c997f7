//! The demo's scripted executors: each plan is the callbacks one task
//! receives, and when (in demo milliseconds, divided by `speed`).

use serde_json::{json, Value};

/// One scheduled callback: when (ms of demo time), which id, what event.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Demo time in milliseconds (divided by `speed`).
    pub at: u64,
    /// The `webhook-id`.
    pub callback_id: String,
    /// The event, without `atMs` (stamped when sent).
    pub event: Value,
}

fn step(at: u64, callback_id: &str, event: Value) -> Step {
    Step {
        at,
        callback_id: callback_id.to_string(),
        event,
    }
}

fn start(worker: &str) -> Value {
    json!({"type": "start", "worker": worker})
}

fn progress(p: u64) -> Value {
    json!({"type": "progress", "progress": p, "cursor": format!("c{p}")})
}

fn succeed(result_ref: &str, hash: &str) -> Value {
    json!({"type": "succeed", "resultRef": result_ref, "resultHash": hash})
}

fn fail(error: &str, retryable: bool) -> Value {
    json!({"type": "fail", "error": error, "retryable": retryable})
}

/// How long a plan runs, in demo milliseconds (its last step).
pub fn duration(plan: &[Step]) -> u64 {
    plan.iter().map(|s| s.at).max().unwrap_or(0)
}

/// The seed's 24.3 s summary: versions 1..=5, plus a redelivery of the
/// 55 % callback (same id) and a duplicate success (new id, same hash).
pub fn summary_plan() -> Vec<Step> {
    let doc = "blob://summaries/doc-1";
    vec![
        step(1_200, "sum-1", start("summarizer-1")),
        step(6_400, "sum-2", progress(25)),
        step(13_100, "sum-3", progress(55)),
        step(13_600, "sum-3", progress(55)), // redelivery: duplicate-callback
        step(20_700, "sum-4", progress(82)),
        step(24_300, "sum-5", succeed(doc, "sha256:ab12")),
        step(24_800, "sum-5b", succeed(doc, "sha256:ab12")), // duplicate-result
    ]
}

/// Batch task 1: fails on quota (retryable), runs again and succeeds; the
/// second start is redelivered (duplicate-callback).
pub fn quota_plan() -> Vec<Step> {
    vec![
        step(500, "q-1", start("moderator-1")),
        step(1_500, "q-2", progress(40)),
        step(2_000, "q-3", fail("quota exceeded", true)),
        step(3_000, "q-4", start("moderator-2")),
        step(3_400, "q-4", start("moderator-2")), // redelivery
        step(4_000, "q-5", progress(60)),
        step(
            5_500,
            "q-6",
            succeed("blob://moderation/item-1", "sha256:cd34"),
        ),
    ]
}

/// Batch task 2: fails for good on invalid input.
pub fn invalid_plan() -> Vec<Step> {
    vec![
        step(800, "i-1", start("moderator-1")),
        step(1_000, "i-1", start("moderator-1")), // redelivery
        step(2_500, "i-2", fail("invalid input: image is empty", false)),
    ]
}

/// Batch task 3 (TTL `EXPIRING_TTL_MS`): starts, reports 30 %, goes
/// silent; the sweeper expires it, and a late success is absorbed.
pub fn expiring_plan() -> Vec<Step> {
    vec![
        step(1_000, "e-1", start("moderator-3")),
        step(2_000, "e-2", progress(30)),
        step(
            8_000,
            "e-3",
            succeed("blob://moderation/item-3", "sha256:ef56"),
        ),
    ]
}

/// The expiring batch task's TTL in demo milliseconds.
pub const EXPIRING_TTL_MS: u64 = 6_000;

/// 40 progress steps over ~20 s: a client cut off for a while is more than
/// `retention` versions behind and needs a snapshot.
pub fn long_plan() -> Vec<Step> {
    let mut plan = vec![step(300, "l-start", start("indexer-1"))];
    for k in 1..=40u64 {
        plan.push(step(300 + k * 500, &format!("l-{k}"), progress(k * 2)));
    }
    plan.push(step(
        20_800,
        "l-done",
        succeed("blob://index/doc-1", "sha256:9a7b"),
    ));
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_seed() {
        let s = summary_plan();
        let ats: Vec<u64> = s.iter().map(|st| st.at).collect();
        assert!(ats.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(
            s.last().map(|st| st.event["resultHash"].clone()),
            Some(json!("sha256:ab12"))
        );
        assert_eq!(long_plan().len(), 42);
        assert!(expiring_plan().last().map(|s| s.at).unwrap_or(0) > EXPIRING_TTL_MS);
        assert_eq!(duration(&summary_plan()), 24_800);
        assert_eq!(duration(&[]), 0);
    }
}

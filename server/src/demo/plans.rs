//! The demo's scripted executors: each plan is the callbacks one task
//! receives, and when (in demo milliseconds, divided by `speed`). A plan
//! that ends in a `hold` goes on, after the person's decision, with
//! [`publish_plan`] (approved) or [`revision_plan`] (changes requested);
//! see `executor`.

use taskwire_core::EventKind;

use crate::executor_event::ExecutorEvent;

/// One scheduled callback: when (ms of demo time), which id, what event.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Demo time in milliseconds (divided by `speed`).
    pub at: u64,
    /// The `webhook-id`.
    pub callback_id: String,
    /// The event, without `atMs` (stamped when sent).
    pub event: ExecutorEvent,
    /// Whether the work can still stop here: a cancel request met before
    /// this step is acknowledged (`ack_cancel`), else answered
    /// `cannot_cancel` and the plan goes on.
    pub cancellable: bool,
}

fn step(at: u64, callback_id: &str, event: ExecutorEvent) -> Step {
    Step {
        at,
        callback_id: callback_id.to_string(),
        event,
        cancellable: true,
    }
}

/// A step past the point of no return (see [`Step::cancellable`]).
fn committed(at: u64, callback_id: &str, event: ExecutorEvent) -> Step {
    Step {
        cancellable: false,
        ..step(at, callback_id, event)
    }
}

fn start(worker: &str) -> ExecutorEvent {
    ExecutorEvent::start(worker)
}

fn progress(p: u64) -> ExecutorEvent {
    ExecutorEvent::progress(p, &format!("c{p}"))
}

fn succeed(result_ref: &str, hash: &str) -> ExecutorEvent {
    ExecutorEvent::succeed(result_ref, hash)
}

fn fail(error: &str, retryable: bool) -> ExecutorEvent {
    ExecutorEvent::fail(error, retryable)
}

/// How long a plan runs, in demo milliseconds (its last step).
pub fn duration(plan: &[Step]) -> u64 {
    plan.iter().map(|s| s.at).max().unwrap_or(0)
}

/// The seed's 24.3 s summary: versions 1..=5, plus a redelivery of the
/// 55 % callback (same id) and a duplicate success (new id, same hash).
/// The summary workload plays it with `"approval": false`.
pub fn seed_summary_plan() -> Vec<Step> {
    let mut plan = summary_drafting();
    plan.extend([
        step(24_300, "sum-5", succeed(SUMMARY_REF, "sha256:ab12")),
        step(24_800, "sum-5b", succeed(SUMMARY_REF, "sha256:ab12")), // duplicate-result
    ]);
    plan
}

/// The summary workload (001 §9): the seed's first 20.7 s, then the
/// draft is held for a person's approval (v5, `waiting_approval`).
pub fn summary_plan() -> Vec<Step> {
    let mut plan = summary_drafting();
    plan.push(step(22_000, "sum-hold-1", hold(1)));
    plan
}

const SUMMARY_REF: &str = "blob://summaries/doc-1";

fn summary_drafting() -> Vec<Step> {
    vec![
        step(1_200, "sum-1", start("summarizer-1")),
        step(6_400, "sum-2", progress(25)),
        step(13_100, "sum-3", progress(55)),
        step(13_600, "sum-3", progress(55)), // redelivery: duplicate-callback
        step(20_700, "sum-4", progress(82)),
    ]
}

/// Draft `n` of the summary, held for approval.
fn hold(n: u32) -> ExecutorEvent {
    ExecutorEvent {
        artifact_ref: Some(format!("blob://drafts/doc-1/v{n}")),
        artifact_hash: Some(draft_hash(n)),
        question: Some(format!("Publish draft {n} of the summary?")),
        ..ExecutorEvent::new(EventKind::Hold)
    }
}

/// The content hash of draft `n`.
pub fn draft_hash(n: u32) -> String {
    format!("sha256:d{n:02}f7")
}

/// After an approval (times from the decision): the next attempt goes on
/// from the draft and publishes it, with a duplicate success (new id,
/// same hash) as in the seed. Publishing is past the point of no return.
pub fn publish_plan() -> Vec<Step> {
    vec![
        step(500, "sum-publish", start("summarizer-1")),
        committed(1_500, "sum-5", succeed(SUMMARY_REF, "sha256:ab12")),
        committed(2_000, "sum-5b", succeed(SUMMARY_REF, "sha256:ab12")), // duplicate-result
    ]
}

/// After "request changes" on draft `n - 1` (times from the decision):
/// the next attempt revises it and holds draft `n`. It goes on from the
/// draft, so its progress goes on from the drafting's 82 % (a
/// continuation keeps progress; a lower report would be stale).
pub fn revision_plan(n: u32) -> Vec<Step> {
    vec![
        step(500, &format!("sum-rev-{n}"), start("summarizer-1")),
        step(2_500, &format!("sum-rev-{n}-p"), progress(91)),
        step(4_500, &format!("sum-hold-{n}"), hold(n)),
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
/// `retention` versions behind and needs a snapshot. Past
/// [`LONG_POINT_OF_NO_RETURN`] % the index is being written: a cancel then
/// cannot take effect (`cannot_cancel`), and the task ends `cancelled`
/// with its result kept for compensation.
pub fn long_plan() -> Vec<Step> {
    let mut plan = vec![step(300, "l-start", start("indexer-1"))];
    for k in 1..=40u64 {
        let (at, id, event) = (300 + k * 500, format!("l-{k}"), progress(k * 2));
        plan.push(if k * 2 > LONG_POINT_OF_NO_RETURN {
            committed(at, &id, event)
        } else {
            step(at, &id, event)
        });
    }
    plan.push(committed(
        20_800,
        "l-done",
        succeed("blob://index/doc-1", "sha256:9a7b"),
    ));
    plan
}

/// The long job's progress (%) after which it cannot stop.
pub const LONG_POINT_OF_NO_RETURN: u64 = 60;

/// Why the long job cannot stop (its `cannot_cancel` reason).
pub const LONG_CANNOT_CANCEL: &str = "the index is being written: stopping now would corrupt it";

/// A few hundred demo ms of spread between the items of a batch, so that
/// the grid does not change in lockstep.
fn spread(item: usize) -> u64 {
    (item as u64 * 37) % 400
}

/// An ordinary moderation call of a batch: starts, halfway, classified.
pub fn moderation_item(item: usize) -> Vec<Step> {
    let d = spread(item);
    vec![
        step(100, "m-1", start("moderator-pool")),
        step(400 + d, "m-2", progress(50)),
        step(
            800 + d,
            "m-3",
            succeed(
                &format!("blob://moderation/item-{}", item + 1),
                &format!("sha256:m{item:04x}"),
            ),
        ),
    ]
}

/// A batch item rate-limited once, retried and classified.
pub fn moderation_retried(item: usize) -> Vec<Step> {
    let d = spread(item);
    vec![
        step(100, "r-1", start("moderator-pool")),
        step(500 + d, "r-2", fail("rate limited by the model", true)),
        step(900 + d, "r-3", start("moderator-pool")),
        step(
            1_400 + d,
            "r-4",
            succeed(
                &format!("blob://moderation/item-{}", item + 1),
                &format!("sha256:r{item:04x}"),
            ),
        ),
    ]
}

/// A batch item the model refuses for good.
pub fn moderation_refused(item: usize) -> Vec<Step> {
    let d = spread(item);
    vec![
        step(100, "x-1", start("moderator-pool")),
        step(
            600 + d,
            "x-2",
            fail("refused: content could not be decoded", false),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_seed() {
        let s = seed_summary_plan();
        let ats: Vec<u64> = s.iter().map(|st| st.at).collect();
        assert!(ats.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(
            s.last().and_then(|st| st.event.result_hash.as_deref()),
            Some("sha256:ab12")
        );
        assert_eq!(long_plan().len(), 42);
        assert!(expiring_plan().last().map(|s| s.at).unwrap_or(0) > EXPIRING_TTL_MS);
        assert_eq!(duration(&seed_summary_plan()), 24_800);
        assert_eq!(duration(&[]), 0);
    }

    #[test]
    fn the_summary_holds_its_draft_and_each_revision_is_a_new_artifact() {
        let held = summary_plan();
        let last = &held.last().expect("a hold").event;
        assert_eq!(last.kind, EventKind::Hold);
        assert_eq!(last.artifact_hash, Some(draft_hash(1)));
        let revised = revision_plan(2);
        assert_eq!(
            revised[0].event.kind,
            EventKind::Start,
            "a new attempt first"
        );
        assert_eq!(revised[2].event.artifact_hash, Some(draft_hash(2)));
        assert_ne!(draft_hash(1), draft_hash(2));
        assert_eq!(publish_plan()[0].event.kind, EventKind::Start);
        assert!(publish_plan()[1..].iter().all(|s| !s.cancellable));
    }

    #[test]
    fn the_long_job_cannot_stop_past_its_point_of_no_return() {
        let plan = long_plan();
        let stoppable = |p: u64| {
            plan.iter()
                .find(|s| s.event.progress == Some(p))
                .map(|s| s.cancellable)
        };
        assert_eq!(stoppable(LONG_POINT_OF_NO_RETURN), Some(true));
        assert_eq!(stoppable(LONG_POINT_OF_NO_RETURN + 2), Some(false));
        assert!(!plan.last().map(|s| s.cancellable).unwrap_or(true));
    }
}

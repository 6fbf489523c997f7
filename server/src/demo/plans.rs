//! What the demo's workers do for each workload, attempt by attempt: the
//! reports a job makes and when (in demo milliseconds from the start of
//! its attempt, divided by `speed`). The claim is the attempt's `start`
//! (PROTOCOL.md §Workers), so no plan starts: the worker library does.
//!
//! A plan is chosen by what the claimed task says ([`Workload::plan`]):
//! its attempt and the person's decision on a held draft; and by the
//! checkpoint an earlier attempt reached, from which a worker that took a
//! killed worker's task over goes on (seed 001: 「任何 Worker 都可能随时退出，新 Worker 要能从已保存状态继续」).

use taskwire_core::{DecisionKind, TaskView};

/// One report of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Demo time in milliseconds from the attempt's start (divided by
    /// `speed`).
    pub at: u64,
    /// What is reported.
    pub action: Action,
    /// Whether the work can still stop here: a cancel met before this
    /// step ends the job (the library acknowledges it, `ack_cancel`);
    /// past the point of no return it is answered `cannot_cancel` and
    /// the job goes on.
    pub cancellable: bool,
}

/// A job's report.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `progress` with the cursor `c<percent>`.
    Progress {
        /// 0 to 100.
        percent: u8,
        /// The link loses the server's answer, so the library sends the
        /// report again under the same callback id (the seed's
        /// redelivery, answered `duplicate-callback`).
        lose_answer: bool,
    },
    /// `hold` of draft `n` of the summary for a person's decision.
    Hold(u32),
    /// The job's result (`succeed`).
    Succeed {
        /// Where the result is stored.
        result_ref: String,
        /// Its content hash.
        result_hash: String,
        /// As for [`Action::Progress`].
        lose_answer: bool,
    },
    /// The job fails (`fail`).
    Fail {
        /// For people.
        error: String,
        /// Whether another attempt may succeed.
        retryable: bool,
    },
}

/// What a demo task is, as its workload made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// The seed's summary.
    Summary {
        /// Its draft waits for a person's decision.
        approval: bool,
    },
    /// The 40-step index build.
    Long,
    /// Item `index` (from 0) of the moderation batch.
    Item(usize),
    /// The report of steps within a budget ([`super::report`]), played by
    /// the worker library's steps, not by a plan of reports.
    Report {
        /// A budget too small for its third call.
        tight: bool,
    },
}

fn step(at: u64, action: Action) -> Step {
    Step {
        at,
        action,
        cancellable: true,
    }
}

/// A step past the point of no return (see [`Step::cancellable`]).
fn committed(at: u64, action: Action) -> Step {
    Step {
        cancellable: false,
        ..step(at, action)
    }
}

fn progress(percent: u8) -> Action {
    Action::Progress {
        percent,
        lose_answer: false,
    }
}

/// Progress whose answer the link loses (the library redelivers it).
fn progress_redelivered(percent: u8) -> Action {
    Action::Progress {
        percent,
        lose_answer: true,
    }
}

fn succeed(result_ref: &str, result_hash: &str, lose_answer: bool) -> Action {
    Action::Succeed {
        result_ref: result_ref.to_string(),
        result_hash: result_hash.to_string(),
        lose_answer,
    }
}

fn fail(error: &str, retryable: bool) -> Action {
    Action::Fail {
        error: error.to_string(),
        retryable,
    }
}

/// How long a plan runs, in demo milliseconds (its last step).
pub fn duration(plan: &[Step]) -> u64 {
    plan.iter().map(|s| s.at).max().unwrap_or(0)
}

impl Workload {
    /// The plan of the attempt `task` was claimed for; `checkpoint`: the
    /// furthest progress an earlier attempt reached (see
    /// [`super::scripts::Script::reach`]).
    pub fn plan(self, task: &TaskView, checkpoint: u8) -> Vec<Step> {
        let decision = task.decision.as_ref().map(|d| d.kind);
        match self {
            Workload::Summary { .. } if decision == Some(DecisionKind::Approve) => publish_plan(),
            Workload::Summary { .. } if decision == Some(DecisionKind::RequestChanges) => {
                revision_plan(draft_of(task.artifact_ref.as_deref()) + 1)
            }
            Workload::Summary { approval } => summary_plan(approval),
            Workload::Long => rest_of(long_plan(), checkpoint.max(task.progress)),
            Workload::Item(index) => item_plan(index, task.attempts),
            Workload::Report { .. } => Vec::new(),
        }
    }

    /// The longest the workload's plans run, in demo milliseconds (what
    /// its place in the demo's limits is estimated from).
    pub fn longest(self) -> u64 {
        match self {
            Workload::Summary { .. } => duration(&summary_plan(false)),
            Workload::Long => duration(&long_plan()),
            Workload::Report { .. } => super::report::longest(),
            // An item whose first attempt fails retryably runs a second.
            Workload::Item(index) => {
                let first = item_plan(index, 1);
                let retried = matches!(
                    first.last().map(|s| &s.action),
                    Some(Action::Fail {
                        retryable: true,
                        ..
                    })
                );
                duration(&first)
                    + if retried {
                        duration(&item_plan(index, 2))
                    } else {
                        0
                    }
            }
        }
    }
}

/// The seed's summary (its first 20.7 s), then either its draft held for
/// a person (001 §9: v5 is `waiting_approval`) or, with `approval: false`,
/// the seed's unbroken timeline to its 24.3 s success (v5 `succeeded`).
/// The 55 % report and the success are redelivered (their answers lost).
pub fn summary_plan(approval: bool) -> Vec<Step> {
    let mut plan = vec![
        step(5_200, progress(25)),
        step(11_900, progress_redelivered(55)),
        step(19_500, progress(82)),
    ];
    plan.push(if approval {
        step(20_800, Action::Hold(1))
    } else {
        step(23_100, succeed(SUMMARY_REF, "sha256:ab12", true))
    });
    plan
}

const SUMMARY_REF: &str = "blob://summaries/doc-1";

/// The content hash of draft `n`.
pub fn draft_hash(n: u32) -> String {
    format!("sha256:d{n:02}f7")
}

/// The artifact of draft `n`.
pub fn draft_ref(n: u32) -> String {
    format!("blob://drafts/doc-1/v{n}")
}

/// The draft number an artifact names (`…/v<n>`; 1 when it names none).
pub fn draft_of(artifact_ref: Option<&str>) -> u32 {
    artifact_ref
        .and_then(|r| r.rsplit("/v").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// After an approval: the next attempt publishes the draft (past the
/// point of no return), its success redelivered.
pub fn publish_plan() -> Vec<Step> {
    vec![committed(1_000, succeed(SUMMARY_REF, "sha256:ab12", true))]
}

/// After "request changes" on draft `n - 1`: the next attempt revises it
/// and holds draft `n`. It goes on from the draft, so its progress goes on
/// from the drafting's 82 % (a continuation keeps progress: a lower report
/// would be `stale-progress`, PROTOCOL.md §Continuations).
pub fn revision_plan(n: u32) -> Vec<Step> {
    vec![step(2_000, progress(91)), step(4_000, Action::Hold(n))]
}

/// 40 progress steps over ~20 s: a client cut off for a while is more than
/// `retention` versions behind and needs a snapshot. Past
/// [`LONG_POINT_OF_NO_RETURN`] % the index is being written: a cancel then
/// cannot take effect (`cannot_cancel`), and the task ends `cancelled`
/// with its result kept for compensation.
pub fn long_plan() -> Vec<Step> {
    let mut plan: Vec<Step> = (1..=40u8)
        .map(|k| {
            let (at, action) = (u64::from(k) * 500, progress(k * 2));
            if u64::from(k) * 2 > LONG_POINT_OF_NO_RETURN {
                committed(at, action)
            } else {
                step(at, action)
            }
        })
        .collect();
    plan.push(committed(
        20_500,
        succeed("blob://index/doc-1", "sha256:9a7b", false),
    ));
    plan
}

/// The steps of `plan` not yet done by an earlier attempt that reached
/// `progress` %, moved to start half a second into this attempt.
fn rest_of(plan: Vec<Step>, progress: u8) -> Vec<Step> {
    let rest: Vec<Step> = plan
        .into_iter()
        .filter(|s| match s.action {
            Action::Progress { percent, .. } => percent > progress,
            _ => true,
        })
        .collect();
    let base = rest.first().map_or(0, |s| s.at);
    rest.into_iter()
        .map(|s| Step {
            at: s.at - base + 500,
            ..s
        })
        .collect()
}

/// The long job's progress (%) after which it cannot stop.
pub const LONG_POINT_OF_NO_RETURN: u64 = 60;

/// Why the long job cannot stop (its `cannot_cancel` reason).
pub const LONG_CANNOT_CANCEL: &str = "the index is being written: stopping now would corrupt it";

/// The batch's seed scenarios, items 1 to 3 (001 and 000's batch).
pub const SEED_SCENARIOS: [&str; 3] = ["quota-then-success", "invalid-input", "expires"];

/// The expiring batch item's TTL in demo milliseconds: it reports 30 %
/// and goes silent past it.
pub const EXPIRING_TTL_MS: u64 = 6_000;

/// The scenario of batch item `index` (from 0): the seed's three first,
/// then ordinary moderation calls, a few retried or refused, so that the
/// grid shows every state.
pub fn scenario(index: usize) -> &'static str {
    match index {
        0..=2 => SEED_SCENARIOS[index],
        i if i % 25 == 7 => "retried",
        i if i % 40 == 13 => "refused",
        _ => "classified",
    }
}

/// A few hundred demo ms of spread between the items of a batch, so that
/// the grid does not change in lockstep.
fn spread(item: usize) -> u64 {
    (item as u64 * 37) % 400
}

/// What attempt `attempt` of batch item `index` does.
pub fn item_plan(index: usize, attempt: u64) -> Vec<Step> {
    let d = spread(index);
    let name = index + 1;
    let result = |prefix: char, lose_answer: bool| {
        succeed(
            &format!("blob://moderation/item-{name}"),
            &format!("sha256:{prefix}{index:04x}"),
            lose_answer,
        )
    };
    match (scenario(index), attempt) {
        // Fails on quota (retryable); the next attempt's 60 % is
        // redelivered, then it succeeds.
        ("quota-then-success", 1) => vec![
            step(1_000, progress(40)),
            step(1_500, fail("quota exceeded", true)),
        ],
        ("quota-then-success", _) => vec![
            step(1_000, progress_redelivered(60)),
            step(
                2_500,
                succeed("blob://moderation/item-1", "sha256:cd34", false),
            ),
        ],
        // Its 10 % is redelivered, then it fails for good.
        ("invalid-input", _) => vec![
            step(500, progress_redelivered(10)),
            step(1_700, fail("invalid input: image is empty", false)),
        ],
        // Reports 30 % and goes silent past its TTL: the server expires
        // it, and the worker's next heartbeat is told to stop.
        ("expires", _) => vec![
            step(1_000, progress(30)),
            step(
                8_000,
                succeed("blob://moderation/item-3", "sha256:ef56", false),
            ),
        ],
        ("retried", 1) => vec![step(400 + d, fail("rate limited by the model", true))],
        // Rate limited, then its success is redelivered.
        ("retried", _) => vec![step(500 + d, result('r', true))],
        ("refused", _) => vec![step(
            500 + d,
            fail("refused: content could not be decoded", false),
        )],
        _ => vec![
            step(300 + d, progress(50)),
            step(700 + d, result('m', false)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_seed() {
        let s = summary_plan(false);
        assert!(s.windows(2).all(|w| w[0].at <= w[1].at));
        assert!(matches!(
            &s.last().expect("a success").action,
            Action::Succeed { result_hash, .. } if result_hash == "sha256:ab12"
        ));
        assert_eq!(long_plan().len(), 41);
        assert!(duration(&item_plan(2, 1)) > EXPIRING_TTL_MS);
        assert_eq!(duration(&[]), 0);
        assert_eq!(SEED_SCENARIOS.map(|_| ()).len(), 3);
        assert_eq!(
            (scenario(7), scenario(13), scenario(4)),
            ("retried", "refused", "classified")
        );
    }

    #[test]
    fn each_draft_is_a_new_artifact() {
        let held = summary_plan(true);
        assert_eq!(held.last().map(|s| &s.action), Some(&Action::Hold(1)));
        assert_eq!(revision_plan(2)[1].action, Action::Hold(2));
        assert_ne!(draft_hash(1), draft_hash(2));
        assert_eq!(draft_of(Some(&draft_ref(3))), 3);
        assert_eq!(draft_of(None), 1);
        assert!(publish_plan().iter().all(|s| !s.cancellable));
    }

    #[test]
    fn the_long_job_goes_on_from_its_progress_and_cannot_stop_past_its_point() {
        let plan = long_plan();
        let stoppable = |p: u8| {
            plan.iter()
                .find(|s| matches!(s.action, Action::Progress { percent, .. } if percent == p))
                .map(|s| s.cancellable)
        };
        assert_eq!(stoppable(LONG_POINT_OF_NO_RETURN as u8), Some(true));
        assert_eq!(stoppable(LONG_POINT_OF_NO_RETURN as u8 + 2), Some(false));
        let rest = rest_of(long_plan(), 24);
        assert_eq!(rest.len(), 41 - 12, "progress 2..=24 was done");
        assert_eq!(rest[0].at, 500);
        assert!(matches!(
            rest[0].action,
            Action::Progress { percent: 26, .. }
        ));
    }
}

//! What a merge reports: [`MergeOutcome`], its rejections and what to do
//! next.

use alloc::vec::Vec;
use serde::Serialize;

use crate::resume::ResumeMode;

/// Why part of an answer was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectReason {
    /// A delta entry at or below the local version: already applied.
    Duplicate,
    /// A delta entry that skips a version.
    Gap,
    /// A delta entry the local reducer would not produce identically, or a
    /// server task that disagrees with the replay.
    Diverged,
    /// A snapshot older than the local task.
    StaleSnapshot,
    /// A `caught-up` answer older than the local task.
    StaleAnswer,
    /// A snapshot that would move attempts or progress backwards, or a
    /// terminal task back to a live state.
    Regressed,
    /// An answer about another task.
    WrongTask,
    /// A delta for a mirror that knows nothing yet, without the task to
    /// start from.
    NoBase,
    /// An answer other than a snapshot from another epoch than the
    /// mirror's: its versions belong to another history.
    OtherEpoch,
    /// A batch answer about another batch than the mirror's.
    WrongBatch,
}

impl RejectReason {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Duplicate => "duplicate",
            RejectReason::Gap => "gap",
            RejectReason::Diverged => "diverged",
            RejectReason::StaleSnapshot => "stale-snapshot",
            RejectReason::StaleAnswer => "stale-answer",
            RejectReason::Regressed => "regressed",
            RejectReason::WrongTask => "wrong-task",
            RejectReason::NoBase => "no-base",
            RejectReason::OtherEpoch => "other-epoch",
            RejectReason::WrongBatch => "wrong-batch",
        }
    }
}

/// One part of an answer that was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// The version of the entry or task concerned.
    pub version: u64,
    /// Why it was not applied.
    pub reason: RejectReason,
}

/// What the caller should do after a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Next {
    /// Carry on: resume from the mirror's version as usual.
    None,
    /// The answer could not be trusted (a gap or a divergence): ask for a
    /// snapshot.
    Snapshot,
}

/// Why a snapshot replaced the task although the ordinary rules would
/// have refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpdateReason {
    /// The server's history is another one (a new or restored store):
    /// the mirror started over from the snapshot, even at a lower version.
    EpochChanged,
}

impl UpdateReason {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            UpdateReason::EpochChanged => "epoch-changed",
        }
    }
}

/// What a merge did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MergeOutcome {
    /// The answer's mode.
    pub mode: ResumeMode,
    /// The local task changed: its version rose, or it became known.
    pub changed: bool,
    /// The versions applied, in order (a snapshot applies its version).
    pub applied: Vec<u64>,
    /// What was not applied, and why.
    pub rejected: Vec<Rejection>,
    /// What to do next.
    pub next: Next,
    /// Set when the mirror started over on another epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<UpdateReason>,
}

impl MergeOutcome {
    pub(super) fn reject(&mut self, version: u64, reason: RejectReason) {
        self.rejected.push(Rejection { version, reason });
    }
}

//! Holding for a person's decision (001 §9, 003 HITL).
//!
//! `hold` pauses the attempt on an artifact (`artifactRef`,
//! `artifactHash`, optional `question`): `waiting_approval`, no worker
//! and no lease. A decision names the artifact's hash and the task
//! version it was made on; any other is `stale-decision` (001: 「哈希不
//! 一致，旧审批自动失效」; 003: 「验证未过期/未重复/状态兼容」), the same
//! one again is `duplicate-decision`. `approve` and `request_changes`
//! re-queue the task with one more start granted (a continuation, not a
//! retry: `maxAttempts` budgets failures); `reject` fails it. A held task
//! still expires at its TTL: a timeout is not an approval (003: 「超时不构
//! 成批准」).
//!
//! A continuation is not a failure, so it leaves no trace of one: the
//! progress stays where the held attempt brought it (the next attempt
//! goes on from the artifact, and a page's bar must not drop from 89 to
//! 0 around an approval), and an `error` left by an earlier failure is
//! cleared (the task is past it: a person read the artifact and let it
//! go on). The hold itself keeps the error: the person deciding may want
//! to know the draft came from a retry.

use super::{Outcome, Reason};
use crate::event::DecisionKind;
use crate::task::{Decision, State, TaskView};
use alloc::{string::String, string::ToString};

impl TaskView {
    pub(super) fn hold(
        &mut self,
        artifact_ref: &str,
        artifact_hash: &str,
        question: Option<&str>,
    ) -> Outcome {
        let (state, reason, notify) = match self.state {
            State::Running | State::Unknown => (State::WaitingApproval, Reason::Held, false),
            // The worker paused after a cancel: it has stopped.
            State::Cancelling | State::CancelIneffective => {
                (State::Cancelled, Reason::Cancelled, true)
            }
            // The same artifact again: a redelivered hold.
            State::WaitingApproval
                if self.artifact_ref.as_deref() == Some(artifact_ref)
                    && self.artifact_hash.as_deref() == Some(artifact_hash) =>
            {
                return Outcome::unchanged(Reason::DuplicateHold, true);
            }
            _ => return Outcome::unchanged(Reason::NotRunning, false),
        };
        self.state = state;
        self.artifact_ref = Some(artifact_ref.to_string());
        self.artifact_hash = Some(artifact_hash.to_string());
        self.question = question.map(str::to_string);
        self.decision = None;
        Outcome::changed(reason, notify)
    }

    /// True when this decision is the one already taken.
    pub(crate) fn is_repeat_decision(&self, kind: DecisionKind, hash: &str, version: u64) -> bool {
        self.decision
            .as_ref()
            .is_some_and(|d| d.kind == kind && d.version == version)
            && self.artifact_hash.as_deref() == Some(hash)
    }

    pub(super) fn decide_on(
        &mut self,
        kind: DecisionKind,
        artifact_hash: &str,
        version: u64,
        reason: Option<&str>,
    ) -> Outcome {
        if self.is_repeat_decision(kind, artifact_hash, version) {
            return Outcome::unchanged(Reason::DuplicateDecision, true);
        }
        if self.state != State::WaitingApproval
            || self.artifact_hash.as_deref() != Some(artifact_hash)
            || version != self.version
        {
            return Outcome::unchanged(Reason::StaleDecision, false);
        }
        self.decision = Some(Decision {
            kind,
            version,
            reason: reason.map(str::to_string),
        });
        if kind == DecisionKind::Reject {
            self.state = State::Failed;
            let mut error = String::from("rejected");
            if let Some(why) = reason {
                error.push_str(": ");
                error.push_str(why);
            }
            self.error = Some(error);
            return Outcome::changed(Reason::Rejected, true);
        }
        // A continuation, not a retry: progress is kept (the next start
        // keeps it too) and no error survives it.
        self.state = State::Queued;
        self.clear_error_if(true);
        self.continuations = self.continuations.saturating_add(1);
        Outcome::changed(
            if kind == DecisionKind::Approve {
                Reason::Approved
            } else {
                Reason::ChangesRequested
            },
            false,
        )
    }
}

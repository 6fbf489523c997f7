//! What a cancel did (001 §10): which steps finished, which never ran,
//! the external side effects, and the artifacts kept. Derived from the
//! task's steps and ledger, never typed in by hand:
//!
//! ```text
//! 取消结果：
//! - 已完成：读取差异、影响分析、测试建议     → finished
//! - 未执行：发布报告、创建工单               → not_run
//! - 外部副作用：无                           → effects
//! - 可保留产物：risk-pack-draft.json         → kept
//! ```

use alloc::vec::Vec;

use super::Effect;
use crate::steps::{Checkpoint, StepStatus};
use crate::task::{State, TaskView};

/// A cancelled task's account of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelReport<'a> {
    /// Steps that finished (succeeded), in plan order.
    pub finished: Vec<&'a str>,
    /// Steps that were under way when the task stopped (running, or
    /// failed and not run again): what a compensation may have to look
    /// at.
    pub interrupted: Vec<&'a str>,
    /// Steps that never ran (pending) or were skipped.
    pub not_run: Vec<&'a str>,
    /// The external writes made, which a cancel does not undo.
    pub effects: &'a [Effect],
    /// What can be kept: the finished steps' checkpoints, and a result
    /// that arrived after the cancel.
    pub kept: Vec<(&'a str, &'a Checkpoint)>,
}

impl TaskView {
    /// The cancel report, for a cancelled task with a plan or a ledger;
    /// `None` otherwise.
    pub fn cancel_report(&self) -> Option<CancelReport<'_>> {
        if self.state != State::Cancelled || (self.plan.is_none() && self.ledger.is_none()) {
            return None;
        }
        let steps = self
            .plan
            .as_deref()
            .map(|p| p.steps.as_slice())
            .unwrap_or(&[]);
        let named = |wanted: &dyn Fn(StepStatus) -> bool| -> Vec<&str> {
            steps
                .iter()
                .filter(|s| wanted(s.status))
                .map(|s| s.name.as_str())
                .collect()
        };
        Some(CancelReport {
            finished: named(&|s| s == StepStatus::Succeeded),
            interrupted: named(&|s| matches!(s, StepStatus::Running | StepStatus::Failed)),
            not_run: named(&|s| matches!(s, StepStatus::Pending | StepStatus::Skipped)),
            effects: self
                .ledger
                .as_deref()
                .map(|l| l.effects.as_slice())
                .unwrap_or(&[]),
            kept: self
                .plan
                .as_deref()
                .map(|p| p.checkpoints().collect())
                .unwrap_or_default(),
        })
    }
}

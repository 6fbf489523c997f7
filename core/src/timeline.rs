//! A task's history as a timeline a person can read (issue 26; seed 001
//! §11: 「界面展示时间线，让运维人员看到任务卡在哪一步，而不是只给一个旋转图标」).
//!
//! Each history entry becomes one entry named by what it meant, in the
//! seed's words where they fit (`step.started`, `budget.reserved`,
//! `model.completed`, `approval.requested`, `side_effect.completed`,
//! `retry.scheduled`, `job.completed`, …), with its step, attempt, how
//! long it took and what it used. What it meant is decided by replaying
//! the history on the task's initial view, so a `fail` reads
//! `retry.scheduled` or `job.failed` as the state machine judged it,
//! never by guessing from the event.
//!
//! A settlement (`model.completed`) carries the step its reservation
//! named. Durations: a step's end counts from that step's start in the same
//! attempt; `model.completed` (a settlement) from its reservation, which
//! is the call's time; an attempt's end from its start; a decision from
//! its hold. Sensitive bodies stay out: events carry references and
//! hashes, never a prompt or an output (001 §11: 「敏感正文单独存储并受访
//! 问控制」); an error's text and a decision's reason are what the task's
//! view already shows its readers.

use alloc::vec::Vec;

use crate::event::{DecisionKind, Event};
use crate::steps::{StepStatus, Usage};
use crate::task::{HistoryEntry, State, TaskView};

/// One line of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEntry<'a> {
    /// The task version this entry made.
    pub version: u64,
    /// When it happened (the event's `atMs`).
    pub at_ms: f64,
    /// What it meant (`step.completed`, `retry.scheduled`, …).
    pub kind: &'static str,
    /// The attempt it belongs to, if any.
    pub attempt: Option<u64>,
    /// The step it is about, if any.
    pub step: Option<&'a str>,
    /// How long it took, when it ends something that started earlier.
    pub duration_ms: Option<f64>,
    /// What it used (a settlement, or a step's report).
    pub usage: Option<Usage>,
    /// A short detail: the error, the decision, the resource written.
    pub detail: Option<&'a str>,
}

/// The timeline of a task whose current view is `view` and whose whole
/// history is `history` (oldest first, from version 1). Entries the
/// replay cannot follow (a history with a gap) end the timeline there:
/// it never shows what it cannot explain.
pub fn timeline<'a>(view: &TaskView, history: &'a [HistoryEntry]) -> Vec<TimelineEntry<'a>> {
    let mut replay = view.initial();
    let mut out: Vec<TimelineEntry<'a>> = Vec::with_capacity(history.len());
    for entry in history {
        if entry.version != replay.version + 1 {
            break;
        }
        if !replay.apply(&entry.event).changed {
            break;
        }
        let mut line = read(&entry.event, replay.state);
        line.version = entry.version;
        line.attempt = line.attempt.or(Some(replay.attempts).filter(|a| *a > 0));
        line.duration_ms = since(&out, &line).map(|start| line.at_ms - start);
        if line.kind == "model.completed" {
            // A settlement names its reservation; the step is the one
            // the reservation was for.
            line.step = out
                .iter()
                .rev()
                .find(|e| e.kind == "budget.reserved" && e.detail == line.detail)
                .and_then(|e| e.step);
        }
        out.push(line);
    }
    out
}

/// What one event meant, given the state after it.
fn read(event: &Event, after: State) -> TimelineEntry<'_> {
    let mut line = TimelineEntry {
        version: 0,
        at_ms: event.at_ms().get(),
        kind: "",
        attempt: event.attempt(),
        step: None,
        duration_ms: None,
        usage: None,
        detail: None,
    };
    line.kind = match event {
        Event::Start { .. } => "attempt.started",
        Event::Progress { .. } => "progress",
        Event::Heartbeat { .. } => "attempt.recovered",
        Event::Step { report, .. } => {
            line.step = Some(report.name.as_str());
            line.usage = report.usage;
            line.detail = report.label.as_deref();
            match report.status {
                StepStatus::Running => "step.started",
                StepStatus::Succeeded => "step.completed",
                StepStatus::Failed => "step.failed",
                StepStatus::Skipped | StepStatus::Pending => "step.skipped",
            }
        }
        Event::Reserve { reservation, .. } => {
            line.step = reservation.step.as_ref().map(|s| s.as_str());
            line.detail = Some(reservation.id.as_str());
            "budget.reserved"
        }
        Event::Settle {
            reservation, usage, ..
        } => {
            line.usage = Some(*usage);
            line.detail = Some(reservation.as_str());
            "model.completed"
        }
        Event::Effect { effect, .. } => {
            line.step = Some(effect.step.as_str());
            line.detail = Some(effect.resource_id.as_str());
            "side_effect.completed"
        }
        Event::Exhaust { .. } => "budget.exhausted",
        Event::Hold { .. } => "approval.requested",
        Event::Decide { decision, .. } => {
            line.detail = Some(decision.as_str());
            match decision {
                DecisionKind::Reject => "approval.rejected",
                _ => "approval.decided",
            }
        }
        Event::Fail { error, .. } => {
            line.detail = Some(error.as_str());
            ending(after)
        }
        Event::Succeed { .. } => ending(after),
        Event::Cancel { .. } if after == State::Cancelling => "cancel.requested",
        Event::CannotCancel { .. } => "cancel.ineffective",
        Event::Lapse { .. } if after == State::Unknown => "lease.lapsed",
        Event::Abandon { .. } => ending(after),
        Event::Cancel { .. }
        | Event::AckCancel { .. }
        | Event::Lapse { .. }
        | Event::Expire { .. }
        | Event::Timeout { .. } => ending(after),
    };
    line
}

/// What a change into `after` means for the task as a whole.
fn ending(after: State) -> &'static str {
    match after {
        State::Queued => "retry.scheduled",
        State::Succeeded => "job.completed",
        State::Failed => "job.failed",
        State::Cancelled => "job.cancelled",
        State::Expired => "job.expired",
        State::TimedOut => "job.timed_out",
        _ => "changed",
    }
}

/// When what `line` ends started: the same step's start in the same
/// attempt, the settled reservation's, the attempt's own start, or the
/// hold a decision answers.
fn since(earlier: &[TimelineEntry<'_>], line: &TimelineEntry<'_>) -> Option<f64> {
    let starts = |kind: &str, step: Option<&str>, detail: Option<&str>| {
        earlier
            .iter()
            .rev()
            .find(|e| {
                e.kind == kind
                    && e.attempt == line.attempt
                    && (step.is_none() || e.step == step)
                    && (detail.is_none() || e.detail == detail)
            })
            .map(|e| e.at_ms)
    };
    match line.kind {
        "step.completed" | "step.failed" => starts("step.started", line.step, None),
        "model.completed" => starts("budget.reserved", None, line.detail),
        "approval.decided" | "approval.rejected" => earlier
            .iter()
            .rev()
            .find(|e| e.kind == "approval.requested")
            .map(|e| e.at_ms),
        "retry.scheduled" | "job.completed" | "job.failed" | "job.cancelled"
        | "budget.exhausted" => starts("attempt.started", None, None),
        _ => None,
    }
}

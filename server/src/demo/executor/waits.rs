//! What the executor waits for between plans: a person's decision on its
//! held draft, and after a kill the server giving the dead attempt up.
//! It polls the store, as a worker polls its queue (a hub subscription
//! would count as one of the tenant's held watches).

use std::collections::VecDeque;
use std::time::Duration;

use taskwire_core::{DecisionKind, State, TaskView};
use tokio::time::Instant;

use super::{Executor, WAIT_LIMIT};
use crate::demo::plans::{self, Step};
use crate::executor_event::ExecutorEvent;

impl Executor {
    /// Waits for the decision on `draft`: the plan that follows it, or
    /// `None` (rejected, cancelled, expired, or no decision in time).
    pub(super) async fn await_decision(&mut self, draft: u32) -> Option<Vec<Step>> {
        let view = self
            .poll_until(|v| v.state != State::WaitingApproval)
            .await?;
        match (view.state, view.decision.map(|d| d.kind)) {
            (State::Queued, Some(DecisionKind::Approve)) => Some(plans::publish_plan()),
            (State::Queued, Some(DecisionKind::RequestChanges)) => {
                Some(plans::revision_plan(draft + 1))
            }
            _ => None,
        }
    }

    /// After a kill: waits until the server gives the dead attempt up and
    /// re-queues the task, then a replacement worker opens the next
    /// attempt and plays the rest, and the zombie sends its late result.
    pub(super) async fn await_requeue(&mut self, rest: VecDeque<Step>) -> Option<Vec<Step>> {
        let (zombie, dead) = (self.worker.clone(), self.attempt);
        self.release();
        self.note(
            "killed",
            format!(
                "{zombie} (attempt {dead}) killed: it stops reporting; its {} ms lease lapses",
                self.lease_ms
            ),
        );
        let view = self
            .poll_until(|v| {
                v.state.is_terminal() || (v.state == State::Queued && v.attempts >= dead)
            })
            .await?;
        if view.state != State::Queued {
            return None;
        }
        let replacement = format!("{zombie}-replacement");
        self.note(
            "replaced",
            format!("task re-queued; {replacement} opens attempt {}", dead + 1),
        );
        let late = ExecutorEvent {
            worker: Some(zombie),
            attempt: Some(dead),
            ..ExecutorEvent::succeed(&format!("blob://zombie/{}", self.task), "sha256:0ld0")
        };
        let base = rest.front().map_or(0, |s| s.at);
        let mut plan = vec![
            plans::Step {
                at: 300,
                callback_id: format!("restart-{}", dead + 1),
                event: ExecutorEvent::start(&replacement),
                cancellable: true,
            },
            plans::Step {
                at: 900,
                callback_id: format!("zombie-{dead}"),
                event: late,
                cancellable: true,
            },
        ];
        plan.extend(rest.into_iter().map(|s| plans::Step {
            at: s.at - base + 1_500,
            ..s
        }));
        Some(plan)
    }

    /// Polls the task (as a worker polls its queue) until `done` holds;
    /// `None` if it cannot be read or [`WAIT_LIMIT`] passes.
    pub(super) async fn poll_until(&self, done: impl Fn(&TaskView) -> bool) -> Option<TaskView> {
        let every = self
            .scaled(250.0)
            .clamp(Duration::from_millis(25), Duration::from_millis(250));
        let limit = Instant::now() + WAIT_LIMIT;
        while Instant::now() < limit {
            tokio::time::sleep(every).await;
            match self
                .state
                .store
                .get(self.tenant.clone(), self.task.clone())
                .await
            {
                Ok(record) if done(&record.view) => return Some(record.view),
                Ok(_) => {}
                Err(e) => {
                    eprintln!("taskwire-server: demo executor: {}: {e}", self.task);
                    return None;
                }
            }
        }
        self.note(
            "gave-up",
            "no change in 10 minutes: the executor gives up".into(),
        );
        None
    }
}

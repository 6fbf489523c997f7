//! Following a batch: the [`Target`](super::target::Target) of a
//! [`Follow::batch`](super::Follow::batch). Each answer is a
//! [`BatchAnswer`] merged through a [`BatchMirror`]; the page hears one
//! update per task whose version rose, one rejection per task (or whole
//! answer) refused without a rise, and the batch's [`BatchProgress`]
//! whenever it changes.

use super::output::{BatchProgress, FollowEvent, Reject};
use super::target::{report, Merged};
use super::FollowConfig;
use crate::batch::{BatchAnswer, BatchMirror};
use crate::mirror::Mirror;
use crate::Error;
use alloc::vec::Vec;

/// Reads a batch answer from JSON text; errors name the field.
pub type BatchReader = fn(&str) -> Result<BatchAnswer, Error>;

/// A batch: its mirror, and the aggregate the page last heard.
#[derive(Debug)]
pub(super) struct BatchTarget {
    pub mirror: BatchMirror,
    reported: Option<BatchProgress>,
}

impl BatchTarget {
    pub fn new(mirror: BatchMirror) -> BatchTarget {
        BatchTarget {
            mirror,
            reported: None,
        }
    }

    /// Queues the aggregate if the batch is known whole and it changed.
    pub fn progress(&mut self, events: &mut Vec<FollowEvent>) {
        if !self.mirror.is_complete() {
            return;
        }
        let now = BatchProgress::of(self.mirror.tasks().iter().filter_map(Mirror::task));
        if self.reported.as_ref() != Some(&now) {
            self.reported = Some(now.clone());
            events.push(FollowEvent::Progress(now));
        }
    }

    pub fn merge(
        &mut self,
        text: &str,
        config: &FollowConfig,
        events: &mut Vec<FollowEvent>,
    ) -> Result<Merged, Error> {
        let answer = (config.read_batch)(text)?;
        let outcome = self.mirror.merge(&answer);
        let mut rejected = !outcome.rejected.is_empty();
        if rejected {
            events.push(FollowEvent::Reject(Reject {
                task_id: None,
                mode: outcome.mode,
                rejected: outcome.rejected.clone(),
                version: self.mirror.cursor(),
            }));
        }
        for (element, task) in answer.tasks.into_iter().zip(&outcome.tasks) {
            let merged = &task.outcome;
            rejected |= !merged.rejected.is_empty();
            let view = task
                .index
                .and_then(|i| self.mirror.tasks().get(i))
                .and_then(Mirror::task);
            let id = element.task().map(|t| t.id.clone());
            let mut refused = merged.rejected.clone();
            report(events, element, merged, view, &mut refused, id);
        }
        self.progress(events);
        Ok(Merged {
            changed: outcome.changed() || outcome.advanced,
            rejected,
            next: outcome.next,
            done: self.mirror.is_done(),
        })
    }
}

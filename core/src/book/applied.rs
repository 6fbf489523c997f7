//! What one call of the book did ([`Applied`]): the transition, the
//! callback id's repeat, the lease, and what the executor does now.

use serde::Serialize;

#[cfg(feature = "steps")]
use crate::event::Event;
use crate::lease::Lease;
use crate::task::Task;
use crate::transition::{Outcome, Reason};
use crate::work::Directive;

/// What [`super::Book::apply`] did: the transition plus whether the callback id
/// was a repeat.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied<'a> {
    /// The task after the event.
    pub task: &'a crate::TaskView,
    /// The task changed.
    pub changed: bool,
    /// The event repeated something already known.
    pub duplicate: bool,
    /// The task just became terminal (its notification is in the outbox).
    pub notify: bool,
    /// Why.
    pub reason: Reason,
    /// The callback id was already applied to this task with this event.
    pub duplicate_callback: bool,
    /// The current attempt's lease after the event, if one runs (not
    /// versioned: a heartbeat moves it with `changed: false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<&'a Lease>,
    /// What the executor does now ([`Directive::after`]).
    pub next: Directive,
    /// The task's current attempt (a stale executor learns which).
    pub attempt: u64,
    /// For an `effect`: the resource id recorded first under its key
    /// ([`crate::ledger::recorded_resource`]).
    #[cfg(feature = "steps")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<&'a str>,
}

impl<'a> Applied<'a> {
    pub(super) fn new(
        task: &'a Task,
        attempt: Option<u64>,
        o: Outcome,
        duplicate_callback: bool,
    ) -> Self {
        Applied {
            next: Directive::after(attempt, &o, task.view()),
            attempt: task.view().attempts,
            task: task.view(),
            changed: o.changed,
            duplicate: o.duplicate,
            notify: o.notify,
            reason: o.reason,
            duplicate_callback,
            lease: task.lease(),
            #[cfg(feature = "steps")]
            resource_id: None,
        }
    }

    /// The answer to `event` names what core says it names (the first
    /// resource id of an `effect`).
    #[cfg(feature = "steps")]
    pub(super) fn naming(mut self, event: &Event) -> Self {
        self.resource_id = crate::ledger::recorded_resource(self.task, event);
        self
    }
}

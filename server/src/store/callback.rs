//! What changes a task after its creation: an executor's verified
//! [`Callback`], a person's [`Action`], and what each did
//! ([`CallbackAnswer`], [`Acted`]).

use serde::Serialize;
use taskwire_core::{Directive, Event, Millis, Outcome, TaskView};

/// A verified executor callback.
#[derive(Debug, Clone)]
pub struct Callback {
    /// The tenant whose secret signed it: the task must be this tenant's.
    pub tenant: String,
    /// The task it is about, named by the path and the signed body.
    pub task_id: String,
    /// `webhook-id`: remembered for the task (a redelivery is a
    /// duplicate) and refused on the tenant's other tasks.
    pub callback_id: String,
    /// The event.
    pub event: Event,
    /// The server's clock when the callback arrived: the lease runs from
    /// it (PROTOCOL.md §Workers, "Leases run on the server's clock").
    pub received: Millis,
    /// The signed request itself: `webhook-timestamp` (seconds) and the
    /// SHA-256 of the body. With the tenant and the id they name the exact
    /// signed bytes, which are used once: a request whose id is not
    /// remembered is remembered by these instead, for as long as its
    /// timestamp could be accepted (`callback_replays.rs`).
    pub signed: SignedRequest,
}

/// What names one signed callback request besides its tenant and id (see
/// [`Callback::signed`]). Only whoever holds the secret can make another
/// one with the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignedRequest {
    /// `webhook-timestamp`, seconds since the epoch.
    pub at: i64,
    /// SHA-256 of the body as signed.
    pub body_sha256: [u8; 32],
}

/// A person's request on a task (`cancel`, `decide`), made through the
/// client API: the event carries the actor the server took from the
/// caller's credential.
#[derive(Debug, Clone)]
pub struct Action {
    /// The caller's tenant: the task must be this tenant's.
    pub tenant: String,
    /// The task.
    pub task_id: String,
    /// The event (`Event::Cancel` or `Event::Decide`).
    pub event: Event,
}

/// What a person's request did, and the task after it.
#[derive(Debug, Clone)]
pub struct Acted {
    /// Core's judgement (as for a callback).
    pub answer: CallbackAnswer,
    /// The task as it is now.
    pub task: TaskView,
}

/// What a callback did: the wire answer of `POST …/callbacks`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallbackAnswer {
    /// The task changed.
    pub changed: bool,
    /// The event repeated something known.
    pub duplicate: bool,
    /// The callback id was already applied with this event.
    pub duplicate_callback: bool,
    /// The task just became terminal (its outbox row is committed).
    pub notify: bool,
    /// Core's reason (`progress`, `duplicate-result`, …).
    pub reason: taskwire_core::Reason,
    /// The task's version after the callback.
    pub version: u64,
    /// The task's state after the callback.
    pub state: taskwire_core::State,
    /// A person asked to cancel the task (it is `cancelling`): the
    /// executor should stop its work and answer `ack_cancel` (or
    /// `cannot_cancel`). Executors that heartbeat learn it within one
    /// heartbeat.
    pub cancel_requested: bool,
    /// What the executor does now (core's [`Directive`]): go on, cancel,
    /// or stop this attempt.
    pub next: Directive,
    /// The task's current attempt: a fenced executor learns which.
    pub attempt: u64,
    /// For an `effect`: the resource id recorded first under its key,
    /// which may be another write's (core's `recorded_resource`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
}

impl CallbackAnswer {
    /// Builds the answer from core's outcome, for `event` (an
    /// executor's; `None` for a person's request).
    pub fn new(
        outcome: Outcome,
        duplicate_callback: bool,
        view: &TaskView,
        event: Option<&Event>,
    ) -> Self {
        let attempt = event.and_then(Event::attempt);
        CallbackAnswer {
            changed: outcome.changed,
            duplicate: outcome.duplicate,
            duplicate_callback,
            notify: outcome.notify,
            reason: outcome.reason,
            version: view.version,
            state: view.state,
            cancel_requested: view.state == taskwire_core::State::Cancelling,
            next: Directive::after(attempt, &outcome, view),
            attempt: view.attempts,
            resource_id: event
                .and_then(|e| taskwire_core::ledger::recorded_resource(view, e))
                .map(Into::into),
        }
    }
}

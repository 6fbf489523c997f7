//! The stores' own decisions around core's rules, as pure functions. Each
//! store fetches the facts its own way (a SQLite savepoint, a PostgreSQL
//! batch with its row locks and prefetch), calls one function here and
//! writes what comes back, so that the glue between core and the SQL is
//! written once, not once per backend:
//! - an idempotent create: [`check_key`], then [`replayed`] for a replay;
//! - an executor's callback: [`judge_callback`] (the id seen, core's
//!   check, the signed request used before, the id owned by another
//!   task, core's step, what to remember);
//! - a delivery: [`delivery_input`], [`judge_delivery`] (core's refusals
//!   as store errors) and [`receipt_to_store`];
//! - a resume: [`resume_plan`] (core's `ResumePlan::answer` then builds
//!   the answer, for the stores and the hub alike).
//!
//! The task lifecycle (what an event or a sweep writes) has its own layer,
//! [`super::lifecycle`], which [`judge_callback`] calls.

use taskwire_core::{
    check_callback, check_delivery_input, decide_delivery, plan_resume, Delivery, DeliveryReason,
    ErrorCode, Event, Millis, NonBlank, Reason, Receipt, ResumePlan, TaskView,
};

use super::callback_ref::CallbackRef;
use super::lifecycle::{judge_event, Judged};
use super::{Callback, CallbackAnswer, Created, Idempotency, StoreError, TaskRecord};

/// What the `Idempotency-Key` on file means for a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyCheck {
    /// Not on file: create the task and file the key with it.
    Create,
    /// The same create again: answer with the task it made (this id).
    Replay(String),
}

/// Compares a create with what is on file under its key: `stored` is the
/// `(request, task_id)` the store holds for the tenant and key, if any.
/// The key used with another body is refused.
pub(crate) fn check_key(
    idem: &Idempotency,
    stored: Option<(String, String)>,
) -> Result<KeyCheck, StoreError> {
    match stored {
        None => Ok(KeyCheck::Create),
        Some((request, _)) if !idem.same_as(&request) => {
            Err(StoreError::IdempotencyKeyReused(idem.key.clone()))
        }
        Some((_, task_id)) => Ok(KeyCheck::Replay(task_id)),
    }
}

/// The answer to a replayed create, given the tenant's task the key names
/// (read only after [`check_key`] said replay). No such task means the
/// rows disagree: an internal error, not a new create.
pub(crate) fn replayed(task_id: &str, task: Option<TaskRecord>) -> Result<Created, StoreError> {
    task.map(|record| Created {
        record,
        created: false,
    })
    .ok_or_else(|| {
        StoreError::Internal(format!("idempotency row points at missing task {task_id}"))
    })
}

/// What a callback comes to, before anything is written.
#[derive(Debug, Clone)]
pub(crate) enum CallbackStep {
    /// Answered without core's step: the id seen on this task, with this
    /// event (a duplicate callback) or another (a conflict), or the very
    /// signed request judged before (a duplicate callback: see
    /// `callback_replays.rs`). Nothing to write.
    Answered(CallbackAnswer),
    /// Core judged the event: write it, then answer.
    Judged(JudgedCallback),
}

/// A callback core judged: what the store writes and answers.
#[derive(Debug, Clone)]
pub(crate) struct JudgedCallback {
    /// The task row's change (see [`super::lifecycle`]).
    pub judged: Judged,
    /// The id to remember, when the event changed the task (written
    /// before the task row).
    pub remember: Option<CallbackRef>,
    /// The signed request to remember as used (`callback_replays.rs`):
    /// exactly when its id is not remembered, so that every judged
    /// request is remembered one way or the other and none applies twice.
    pub remember_request: bool,
    /// The answer, once written.
    pub answer: CallbackAnswer,
}

/// The callback sequence on the facts a store read: the tenant's task
/// (`record`, moved in place by core's step), the event the callback id
/// first carried on this task (`seen`), whether this exact signed request
/// was judged before and remembered as used (`used`), and whether the
/// tenant's id is remembered on another task (`owned_elsewhere`). The last
/// two are asked only when the id is not this task's: a redelivery costs
/// no lookup.
pub(crate) fn judge_callback(
    record: &mut TaskRecord,
    callback: &Callback,
    seen: Option<&Event>,
    used: impl FnOnce() -> Result<bool, StoreError>,
    owned_elsewhere: impl FnOnce() -> Result<bool, StoreError>,
) -> Result<CallbackStep, StoreError> {
    // The very signed request judged before is answered as a redelivery
    // of its id with its own event (core's duplicate callback).
    let seen = match seen {
        Some(event) => Some(event),
        None if used()? => Some(&callback.event),
        None => None,
    };
    if let Some(outcome) = check_callback(seen, &callback.event) {
        let duplicate_callback = outcome.reason == Reason::DuplicateCallback;
        return Ok(CallbackStep::Answered(CallbackAnswer::new(
            outcome,
            duplicate_callback,
            &record.view,
            Some(&callback.event),
        )));
    }
    if owned_elsewhere()? {
        // Not this task's (that would have been `seen`): another one's.
        return Err(StoreError::CallbackIdReused(callback.callback_id.clone()));
    }
    let judged = judge_event(record, &callback.event, Some(callback.received));
    // Only ids whose event changed the task are remembered (core fix 1);
    // the request itself is remembered otherwise.
    let remember = judged
        .appended
        .first()
        .map(|first| CallbackRef::of(&callback.event, &first.entry));
    let remember_request = remember.is_none();
    let answer = CallbackAnswer::new(judged.outcome, false, &record.view, Some(&callback.event));
    Ok(CallbackStep::Judged(JudgedCallback {
        judged,
        remember,
        remember_request,
        answer,
    }))
}

/// Core's check of a delivery's own input (the key, the time): a bad one
/// is `invalid-request`, before anything is read.
pub(crate) fn delivery_input(key: &str, now_ms: f64) -> Result<(NonBlank, Millis), StoreError> {
    check_delivery_input(key, now_ms).map_err(StoreError::Invalid)
}

/// Core's delivery decision on the facts read: the receipt on file under
/// the key, and the tenant's task `id` (`None` when it has no such task).
/// Core's not-found is the store's (a 404 naming the task); any other
/// refusal is `invalid-request`.
pub(crate) fn judge_delivery(
    existing: Option<&Receipt>,
    id: &str,
    task: Option<&TaskView>,
    key: &NonBlank,
    now: Millis,
) -> Result<Delivery, StoreError> {
    decide_delivery(existing, id, task, key, now).map_err(|e| match e.code {
        ErrorCode::NotFound => StoreError::NotFound(id.to_string()),
        _ => StoreError::Invalid(e),
    })
}

/// The receipt a delivery files under its key: only a new delivery's (a
/// duplicate's is on file already, a refusal has none).
pub(crate) fn receipt_to_store(delivery: &Delivery) -> Option<&Receipt> {
    match (delivery.reason, &delivery.receipt) {
        (DeliveryReason::Delivered, Some(receipt)) => Some(receipt),
        _ => None,
    }
}

/// Which answer a client at `cursor` gets from a task at `version`: a
/// snapshot when it asked for one, else core's [`plan_resume`].
pub(crate) fn resume_plan(
    version: u64,
    cursor: u64,
    retention: u64,
    force_snapshot: bool,
) -> ResumePlan {
    if force_snapshot {
        ResumePlan::Snapshot
    } else {
        plan_resume(version, cursor, retention)
    }
}

#[cfg(test)]
mod tests;

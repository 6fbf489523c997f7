//! The book: many tasks, and the three idempotency layers around them.
//!
//! - **Callback ids** (executors deliver at least once): an id already
//!   applied to a task answers `duplicate-callback` and changes nothing.
//! - **Result hashes** (a task may run twice): a second `succeed` with the
//!   same hash is `duplicate-result`; with another hash, `result-conflict`.
//! - **Delivery keys** (clients retry): the same key returns the same
//!   receipt.
//!
//! A terminal transition writes exactly one notification, keyed
//! `taskId:state:version`, to the outbox.
//!
//! Calls never read a clock: time arrives in events and arguments. Two
//! sweepers run on the caller's timer: [`Book::expire_due`] for the TTL
//! (the seed's) and [`Book::sweep_due`] for leases, grace periods and
//! execution deadlines (`sweep`).

mod applied;
mod sweep;

pub use applied::Applied;
pub use sweep::Swept;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

use crate::delivery::{check_delivery_input, decide_delivery, Delivery, DeliveryReason, Receipt};
use crate::event::Event;
use crate::hash::FxHashMap;
use crate::resume::{plan_resume, ResumeAnswer, DEFAULT_RETENTION_VERSIONS};
use crate::task::{create_task, CreateTask, State, Task};
use crate::transition::{Outcome, Reason};
use crate::value::{cmp_js, Millis, NonBlank};
use crate::work::check_report_clock;
use crate::Error;

/// A notification that a task reached a terminal state. It only says "go
/// and look": the result stays behind `resultRef`, so a resent notification
/// never copies a large result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// The task.
    pub task_id: String,
    /// Its terminal state.
    pub state: State,
    /// When the event that made it terminal happened.
    #[serde(with = "crate::value::ms")]
    pub at_ms: f64,
}

/// The outbox key of a terminal transition: `taskId:state:version`.
pub fn notification_key(task_id: &str, state: State, version: u64) -> String {
    format!("{task_id}:{}:{version}", state.as_str())
}

/// How a callback id relates to what the task has already applied.
///
/// `seen` is the event first applied under the id, if any. `None` means
/// the callback is new; otherwise the unchanged outcome to answer.
/// Shared by the book and every server store, so the rule lives once.
pub fn check_callback(seen: Option<&Event>, event: &Event) -> Option<Outcome> {
    seen.map(|seen| {
        if seen == event {
            Outcome::unchanged(Reason::DuplicateCallback, true)
        } else {
            Outcome::unchanged(Reason::CallbackConflict, false)
        }
    })
}

/// Checks a callback id (when given): it must not be blank.
pub fn check_callback_id(callback_id: Option<&str>) -> Result<(), Error> {
    match callback_id {
        Some(id) => NonBlank::new(id, "callbackId").map(drop),
        None => Ok(()),
    }
}

/// One task and the callback ids applied to it. Ids are scoped to their
/// task (fix 2): the same id on another task is a different callback.
#[derive(Debug, Clone)]
struct Entry {
    task: Task,
    /// Callback id → the event it carried. Only ids whose event changed the
    /// task are remembered (fix 1): a `succeed` that arrives before its
    /// `start` must stay redeliverable.
    callbacks: FxHashMap<String, Event>,
    /// The earliest time of this task still queued in `Book::due`, if
    /// any; other queued times of it are stale and skipped.
    scheduled: Option<f64>,
}

/// Task ids by a time, earliest first.
type DueQueue = BinaryHeap<Reverse<(Deadline, String)>>;

/// An expiry time with a total order (times are finite, so this is the
/// numeric order).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Deadline(f64);
impl Eq for Deadline {}
impl PartialOrd for Deadline {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Deadline {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Many tasks with callback dedup, the notification outbox, cursor resume
/// and idempotent delivery (the seed's `AsyncBook`).
///
/// Call order is free; a typical server does:
/// 1. [`Book::create`] when a task is submitted;
/// 2. [`Book::apply`] for every executor callback;
/// 3. [`Book::resume`] when a client reconnects;
/// 4. [`Book::expire_due`] and [`Book::sweep_due`] on a timer, so silent
///    tasks still end and lapsed leases are seen;
/// 5. [`Book::drain_notifications`] to send what the outbox holds;
/// 6. [`Book::deliver_result`] when a client collects a result.
#[derive(Debug, Clone)]
pub struct Book {
    tasks: FxHashMap<String, Entry>,
    deliveries: FxHashMap<String, Receipt>,
    outbox: Vec<Notification>,
    /// Live tasks by expiry time. Tasks that end early stay until their
    /// deadline passes and are skipped then: O(log n) per task, no search.
    deadlines: BinaryHeap<Reverse<(Deadline, String)>>,
    /// Tasks by [`crate::TaskView::next_due`] (leases, grace periods,
    /// deadlines), for [`Book::sweep_due`]; see `sweep`.
    due: DueQueue,
    retention: u64,
}

impl Default for Book {
    fn default() -> Self {
        Book::new()
    }
}

impl Book {
    /// An empty book with the default retention window (8 versions).
    pub fn new() -> Self {
        Book::with_retention(DEFAULT_RETENTION_VERSIONS)
    }

    /// An empty book whose resume answers a delta for gaps of at most
    /// `retention` versions.
    pub fn with_retention(retention: u64) -> Self {
        Book {
            tasks: FxHashMap::default(),
            deliveries: FxHashMap::default(),
            outbox: Vec::new(),
            deadlines: BinaryHeap::new(),
            due: BinaryHeap::new(),
            retention,
        }
    }

    /// The retention window, in versions.
    pub fn retention(&self) -> u64 {
        self.retention
    }

    /// The number of tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when the book holds no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Creates a task. An existing id is an error (`task-exists`) and the
    /// existing task, its callbacks and receipts are untouched (fix 7: the
    /// seed overwrote it, leaking old callback ids into the new task).
    pub fn create(&mut self, input: &CreateTask) -> Result<&Task, Error> {
        let task = create_task(input)?;
        if self.tasks.contains_key(&input.id) {
            return Err(Error::task_exists(&input.id));
        }
        self.deadlines
            .push(Reverse((Deadline(task.expires_at_ms), input.id.clone())));
        self.tasks.insert(
            input.id.clone(),
            Entry {
                task,
                callbacks: FxHashMap::default(),
                scheduled: None,
            },
        );
        self.reschedule(&input.id);
        self.get(&input.id)
            .ok_or_else(|| Error::not_found(&input.id))
    }

    /// The task with this id, with its history.
    pub fn get(&self, id: &str) -> Option<&Task> {
        self.tasks.get(id).map(|entry| &entry.task)
    }

    /// Every task, in no particular order.
    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values().map(|entry| &entry.task)
    }

    /// Applies an executor's event to a task, at most once per callback id.
    ///
    /// The callback id is checked before the task is looked up, so an
    /// invalid request is an error even for an unknown task. A terminal
    /// transition puts one notification in the outbox. A lease the event
    /// opens or extends is counted from its `atMs`: what the vectors and
    /// the seed's runs replay. A server uses [`Book::apply_at`].
    pub fn apply(
        &mut self,
        task_id: &str,
        event: Event,
        callback_id: Option<&str>,
    ) -> Result<Applied<'_>, Error> {
        self.apply_received(task_id, event, callback_id, None)
    }

    /// [`Book::apply`] as a server receives a callback at `now_ms` on its
    /// own clock (PROTOCOL.md §Workers, "Reports"): an event that carries
    /// `attempt` with an `atMs` more than 5 minutes from `now_ms` is
    /// refused (`clock-skew`), and leases run from `now_ms`, not from the
    /// worker's clock.
    pub fn apply_at(
        &mut self,
        task_id: &str,
        event: Event,
        callback_id: Option<&str>,
        now_ms: f64,
    ) -> Result<Applied<'_>, Error> {
        let now = Millis::new(now_ms, "nowMs")?;
        check_callback_id(callback_id)?;
        check_report_clock(&event, now)?;
        self.apply_received(task_id, event, callback_id, Some(now))
    }

    /// The answer to a callback the server recognized as judged before
    /// without the book (the very signed request sent again: PROTOCOL.md
    /// "A signed request is used once"): `duplicate-callback`, nothing
    /// changes, with the `next` the task calls for now.
    pub fn redelivered(&self, task_id: &str, event: &Event) -> Result<Applied<'_>, Error> {
        let entry = self
            .tasks
            .get(task_id)
            .ok_or_else(|| Error::not_found(task_id))?;
        let outcome = Outcome {
            changed: false,
            duplicate: true,
            notify: false,
            reason: Reason::DuplicateCallback,
        };
        let applied = Applied::new(&entry.task, event.attempt(), outcome, true);
        #[cfg(feature = "steps")]
        let applied = applied.naming(event);
        Ok(applied)
    }

    fn apply_received(
        &mut self,
        task_id: &str,
        event: Event,
        callback_id: Option<&str>,
        received: Option<Millis>,
    ) -> Result<Applied<'_>, Error> {
        check_callback_id(callback_id)?;
        // One lookup per call: the outbox and the due queue are other
        // fields of the book, borrowed beside the entry.
        let entry = self
            .tasks
            .get_mut(task_id)
            .ok_or_else(|| Error::not_found(task_id))?;
        let seen = callback_id.and_then(|id| entry.callbacks.get(id));
        if let Some(outcome) = check_callback(seen, &event) {
            let duplicate_callback = outcome.reason == Reason::DuplicateCallback;
            let applied = Applied::new(&entry.task, event.attempt(), outcome, duplicate_callback);
            #[cfg(feature = "steps")]
            let applied = applied.naming(&event);
            return Ok(applied);
        }
        // The effect's key outlives the event, which the task takes.
        #[cfg(feature = "steps")]
        let effect = match &event {
            Event::Effect { .. } => Some(event.clone()),
            _ => None,
        };
        let at_ms = event.at_ms().get();
        let attempt = event.attempt();
        let remembered = callback_id.map(|id| (id.to_string(), event.clone()));
        let lease_before = entry.task.lease().copied();
        let outcome = entry.task.apply_received(event, received);
        if outcome.changed {
            if let Some((id, event)) = remembered {
                entry.callbacks.insert(id, event);
            }
        }
        if outcome.notify {
            self.outbox.push(Notification {
                task_id: task_id.to_string(),
                state: entry.task.state,
                at_ms,
            });
        }
        if outcome.changed || entry.task.lease().copied() != lease_before {
            sweep::schedule(&mut self.due, entry, task_id);
        }
        let applied = Applied::new(&entry.task, attempt, outcome, false);
        #[cfg(feature = "steps")]
        let applied = match &effect {
            Some(effect) => applied.naming(effect),
            None => applied,
        };
        Ok(applied)
    }

    /// Answers a client that last saw version `cursor` of a task: O(k) in
    /// the number of entries returned.
    pub fn resume(&self, task_id: &str, cursor: u64) -> Result<ResumeAnswer, Error> {
        let task = self.get(task_id).ok_or_else(|| Error::not_found(task_id))?;
        plan_resume(task.version, cursor, self.retention).answer(task.view().clone(), || {
            Ok(task.history_after(cursor).to_vec())
        })
    }

    /// Hands a succeeded task's result over under an idempotency key: the
    /// same key returns the same receipt; a key used for another task is
    /// refused without revealing that task's receipt.
    pub fn deliver_result(
        &mut self,
        task_id: &str,
        key: &str,
        now_ms: f64,
    ) -> Result<Delivery, Error> {
        let (key, now) = check_delivery_input(key, now_ms)?;
        let existing = self.deliveries.get(key.as_str());
        let task = self.get(task_id).map(|task| task.view());
        let delivery = decide_delivery(existing, task_id, task, &key, now)?;
        if let (DeliveryReason::Delivered, Some(receipt)) = (delivery.reason, &delivery.receipt) {
            self.deliveries.insert(key.into_string(), receipt.clone());
        }
        Ok(delivery)
    }

    /// Expires every live task whose `expiresAtMs <= nowMs`, each with its
    /// one notification (fix 10: a task nobody calls back for must still
    /// end). Returns the ids expired, earliest deadline first.
    pub fn expire_due(&mut self, now_ms: f64) -> Result<Vec<String>, Error> {
        let now = Millis::new(now_ms, "nowMs")?.get();
        let mut expired = Vec::new();
        while let Some(Reverse((deadline, _))) = self.deadlines.peek() {
            if deadline.0 > now {
                break;
            }
            let Some(Reverse((_, id))) = self.deadlines.pop() else {
                break;
            };
            let Some(entry) = self.tasks.get_mut(&id) else {
                continue;
            };
            if entry.task.expire().notify {
                // Expired, or timed out if its deadline came first.
                self.outbox.push(Notification {
                    task_id: id.clone(),
                    state: entry.task.state,
                    at_ms: now,
                });
                expired.push(id);
            }
        }
        Ok(expired)
    }

    /// Takes every notification out of the outbox, sorted by task id (in
    /// JavaScript's string order) and then by time.
    pub fn drain_notifications(&mut self) -> Vec<Notification> {
        let mut list = std::mem::take(&mut self.outbox);
        list.sort_by(|a, b| cmp_js(&a.task_id, &b.task_id).then(a.at_ms.total_cmp(&b.at_ms)));
        list
    }

    /// The notifications waiting in the outbox, oldest first.
    pub fn pending_notifications(&self) -> &[Notification] {
        &self.outbox
    }
}

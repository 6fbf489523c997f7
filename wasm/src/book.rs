//! `TaskBook`: many tasks kept inside wasm, O(1) per event.

use taskwire_core as tw;
use taskwire_wire::{from_json, to_json};
use wasm_bindgen::prelude::wasm_bindgen;

use crate::{safe_int, throw, Result};

/// The wasm side of `TaskBook` (the JS class wraps it).
#[wasm_bindgen]
pub struct BookHandle {
    book: tw::Book,
}

#[wasm_bindgen]
impl BookHandle {
    /// A book with the given retention window (a safe integer ≥ 0).
    #[wasm_bindgen(constructor)]
    pub fn new(retention: f64) -> Result<BookHandle> {
        let retention = safe_int(retention, "retentionVersions")?;
        Ok(BookHandle {
            book: tw::Book::with_retention(retention),
        })
    }

    /// The new task, with its (empty) history.
    pub fn create(&mut self, input: &str) -> Result<String> {
        let input: tw::CreateTask = from_json(input, "input").map_err(throw)?;
        self.book.create(&input).map(to_json).map_err(throw)
    }

    /// The task with its history, or `null`.
    pub fn get(&self, id: &str) -> String {
        match self.book.get(id) {
            Some(task) => to_json(task),
            None => String::from("null"),
        }
    }

    /// The task's timeline answer (PROTOCOL.md §Timeline), written by
    /// core, or `null`.
    pub fn timeline(&self, id: &str) -> String {
        match self.book.get(id) {
            Some(task) => tw::json::timeline_answer(task.view(), task.history()),
            None => String::from("null"),
        }
    }

    /// `{task, changed, duplicate, notify, reason, duplicateCallback,
    /// lease?}`; the task without its history (O(1) per call).
    pub fn apply(
        &mut self,
        task_id: &str,
        event: &str,
        callback_id: Option<String>,
    ) -> Result<String> {
        let event: tw::Event = from_json(event, "event").map_err(throw)?;
        self.book
            .apply(task_id, event, callback_id.as_deref())
            .map(|applied| to_json(&applied))
            .map_err(throw)
    }

    /// [`Book::apply`] as a server receives the callback at `now_ms`
    /// (core's `Book::apply_at`: the clock check, leases on that clock).
    pub fn apply_at(
        &mut self,
        task_id: &str,
        event: &str,
        callback_id: Option<String>,
        now_ms: f64,
    ) -> Result<String> {
        let event: tw::Event = from_json(event, "event").map_err(throw)?;
        self.book
            .apply_at(task_id, event, callback_id.as_deref(), now_ms)
            .map(|applied| to_json(&applied))
            .map_err(|e| match e.code {
                // Its own code (core's spelling), which the page's
                // `Code` list leaves out to spare every page its bytes.
                tw::ErrorCode::ClockSkew => crate::error::error(e.code.as_str(), &e.message, 0),
                _ => throw(e),
            })
    }

    /// The answer to the very signed request sent again (core's
    /// `Book::redelivered`): `duplicate-callback`, with `next`.
    pub fn redelivered(&self, task_id: &str, event: &str) -> Result<String> {
        let event: tw::Event = from_json(event, "event").map_err(throw)?;
        self.book
            .redelivered(task_id, &event)
            .map(|applied| to_json(&applied))
            .map_err(throw)
    }

    /// `{mode, events, task}`.
    pub fn resume(&self, task_id: &str, cursor: f64) -> Result<String> {
        let cursor = safe_int(cursor, "cursor")?;
        self.book
            .resume(task_id, cursor)
            .map(|answer| to_json(&answer))
            .map_err(throw)
    }

    /// `{ok, duplicate, reason, receipt?}`.
    pub fn deliver(&mut self, task_id: &str, key: &str, now_ms: f64) -> Result<String> {
        self.book
            .deliver_result(task_id, key, now_ms)
            .map(|d| to_json(&d))
            .map_err(throw)
    }

    /// The ids expired.
    pub fn expire_due(&mut self, now_ms: f64) -> Result<String> {
        self.book
            .expire_due(now_ms)
            .map(|ids| to_json(&ids))
            .map_err(throw)
    }

    /// `[{taskId, state, reason}]`: every lifecycle step due by `now_ms`
    /// (lapsed leases, grace periods, execution deadlines), each recorded
    /// at the time it fell due.
    pub fn sweep_due(&mut self, now_ms: f64) -> Result<String> {
        self.book
            .sweep_due(now_ms)
            .map(|swept| to_json(&swept))
            .map_err(throw)
    }

    /// `[{taskId, state, atMs}]`, emptying the outbox.
    pub fn drain(&mut self) -> String {
        to_json(&self.book.drain_notifications())
    }

    /// The number of tasks.
    pub fn size(&self) -> usize {
        self.book.len()
    }
}

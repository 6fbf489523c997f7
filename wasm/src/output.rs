//! `OutputLog` (the full build only): one live-output stream as a backend
//! written in JavaScript keeps it (PROTOCOL.md §Live output), so that the
//! Node reference backend judges appends and catches followers up by
//! core's rules (`taskwire_core::output`) instead of writing them again.
//!
//! The handle holds the stream as stored (the newest attempt's text), as
//! the Rust server's store does (`server/src/store/output.rs`): the task's
//! current attempt and whether it is live are given with each call, so
//! the stream never has to be told when a task moves on.

use taskwire_core as tw;
use tw::json::object;
use tw::output::{Catchup, Chunk, OutputLog, StreamName};
use wasm_bindgen::prelude::wasm_bindgen;

use crate::{safe_int, throw, Result};

/// The wasm side of `OutputLog` (the JS class wraps it).
#[wasm_bindgen]
pub struct OutputLogHandle {
    log: OutputLog,
}

impl Default for OutputLogHandle {
    fn default() -> Self {
        OutputLogHandle::new()
    }
}

#[wasm_bindgen]
impl OutputLogHandle {
    /// An empty stream.
    #[wasm_bindgen(constructor)]
    pub fn new() -> OutputLogHandle {
        OutputLogHandle {
            log: OutputLog::new(),
        }
    }

    /// Judges the chunk `(attempt, offset, text)` (checked by core's
    /// `Chunk::new`, its errors naming `field`.attempt, .text, .offset)
    /// against the stream, for a task at `task_attempt` that is `task_live`
    /// or has ended (core's `OutputLog::append`). Only `appended` changes
    /// the stream. `{reason, accepted, added, offset, superseded, attempt,
    /// expected}`.
    pub fn append(
        &mut self,
        attempt: f64,
        offset: f64,
        text: String,
        task_attempt: f64,
        task_live: bool,
        field: &str,
    ) -> Result<String> {
        let attempt = safe_int(attempt, &tw::error::join(&[field, ".attempt"]))?;
        let offset = safe_int(offset, &tw::error::join(&[field, ".offset"]))?;
        let task_attempt = safe_int(task_attempt, "taskAttempt")?;
        let chunk = Chunk::new(attempt, offset, text, field).map_err(throw)?;
        let a = self.log.append(&chunk, task_attempt, task_live);
        Ok(object(&[
            ("reason", &a.reason.as_str()),
            ("accepted", &a.reason.accepted()),
            ("added", &a.added.as_str()),
            ("offset", &a.offset),
            ("superseded", &a.superseded),
            ("attempt", &a.attempt),
            ("expected", &a.expected),
        ]))
    }

    /// What a follower holding `attempt`'s text up to `offset` lacks, for
    /// a task at `task_attempt` that is `task_live` or has ended (core's
    /// `OutputLog::follow_task`, then `since`, as the Rust server does).
    /// `{attempt, offset, text,
    /// complete, news}`, `news` being core's `Catchup::is_news` for the
    /// follower: whether a long-poll is answered at once.
    pub fn since(
        &self,
        attempt: f64,
        offset: f64,
        task_attempt: f64,
        task_live: bool,
    ) -> Result<String> {
        let attempt = safe_int(attempt, "outputAttempt")?;
        let offset = safe_int(offset, "outputOffset")?;
        let task_attempt = safe_int(task_attempt, "taskAttempt")?;
        let mut log = self.log.clone();
        log.follow_task(task_attempt, task_live);
        let c: Catchup = log.since(attempt, offset);
        Ok(object(&[
            ("attempt", &c.attempt),
            ("offset", &c.offset),
            ("text", &c.text.as_str()),
            ("complete", &c.complete),
            ("news", &c.is_news(attempt)),
        ]))
    }

    /// The attempt whose text the stream holds (0 before any).
    pub fn attempt(&self) -> f64 {
        self.log.attempt() as f64
    }

    /// The stream's length in UTF-16 code units.
    pub fn units(&self) -> f64 {
        self.log.units() as f64
    }
}

/// Checks a stream name (core's `StreamName`): 1 to 64 characters of
/// `a-z`, `0-9`, `-`, `_`; the error names `field`.
#[wasm_bindgen]
pub fn output_stream_name(name: &str, field: &str) -> Result<()> {
    StreamName::new(name, field).map(|_| ()).map_err(throw)
}

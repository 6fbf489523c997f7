//! The pure functions: `createTask`, `applyEvent`, `expireTask`, and the
//! server-side decisions a backend written in JavaScript takes from core
//! instead of writing them again (`worthHolding`, `planBatch`).
//!
//! They take and return whole tasks, history included, as in the seed:
//! O(history) per call, because the task lives in JavaScript between
//! calls. `TaskBook` keeps tasks inside wasm and is O(1) per event.

use taskwire_core as tw;
use taskwire_wire::{from_json, to_json};
use wasm_bindgen::prelude::wasm_bindgen;

use crate::{safe_int, throw, Result};

/// `createTask(input)`: a queued task at version 0.
#[wasm_bindgen]
pub fn create_task(input: &str) -> Result<String> {
    let input: tw::CreateTask = from_json(input, "input").map_err(throw)?;
    tw::create_task(&input).map(|t| to_json(&t)).map_err(throw)
}

/// `applyEvent(task, event)`: the transition, task included.
#[wasm_bindgen]
pub fn apply_event(task: &str, event: &str) -> Result<String> {
    // The event is checked first, as everywhere: invalid input is an error
    // whatever the task.
    let event: tw::Event = from_json(event, "event").map_err(throw)?;
    let task: tw::Task = from_json(task, "task").map_err(throw)?;
    Ok(to_json(&tw::apply_event(task, event)))
}

/// `expireTask(task)`: the transition, task included.
#[wasm_bindgen]
pub fn expire_task(task: &str) -> Result<String> {
    let task: tw::Task = from_json(task, "task").map_err(throw)?;
    Ok(to_json(&tw::expire_task(task)))
}

/// `worthHolding(waitMs, mode, live, askedEpoch, epoch)`: whether a
/// long-poll is held (core's `worth_holding` and `same_epoch`; PROTOCOL.md
/// §Resume): `mode` is the answer's, `live` whether what it follows can
/// still change, `askedEpoch` the request's `epoch` (undefined without
/// one), `epoch` the store's.
#[wasm_bindgen]
pub fn worth_holding(
    wait_ms: f64,
    mode: &str,
    live: bool,
    asked_epoch: Option<String>,
    epoch: &str,
) -> Result<bool> {
    use tw::ResumeMode::{CaughtUp, Delta, Snapshot};
    let wait_ms = safe_int(wait_ms, "request.waitMs")?;
    let mode = [CaughtUp, Delta, Snapshot]
        .into_iter()
        .find(|m| m.as_str() == mode)
        .ok_or_else(|| {
            throw(tw::Error::invalid(
                "request.mode: must be \"caught-up\", \"delta\" or \"snapshot\"",
            ))
        })?;
    let same_epoch = tw::same_epoch(asked_epoch.as_deref(), epoch);
    Ok(tw::worth_holding(wait_ms, mode, live, same_epoch))
}

/// `planBatch(seq, cursor, snapshot)`: which answer a batch's follower at
/// `cursor` gets from a batch at cursor `seq` (core's `plan_batch`;
/// PROTOCOL.md §Follow a batch): `"snapshot"`, `"caught-up"` or `"delta"`.
#[wasm_bindgen]
pub fn plan_batch(seq: f64, cursor: f64, snapshot: bool) -> Result<String> {
    let seq = safe_int(seq, "seq")?;
    let cursor = safe_int(cursor, "cursor")?;
    Ok(tw::batch::plan_batch(seq, cursor, snapshot).as_str().into())
}

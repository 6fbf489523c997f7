//! `TaskMirror`: one task as a client knows it.

use taskwire_core as tw;
use tw::json::{object, write};
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;

use crate::read::read;
use crate::{text, throw, Result};

/// The wasm side of `TaskMirror` (the JS class wraps it).
#[wasm_bindgen]
pub struct MirrorHandle {
    mirror: tw::Mirror,
}

#[wasm_bindgen]
impl MirrorHandle {
    /// A mirror, by `from`: 0, one that knows nothing yet about task
    /// `text`; 1, one starting from a task (`text`: the JSON of a task
    /// view); 2, one from its persisted JSON (`{taskId, task, epoch?}`).
    /// One export for the three (each export costs the page its glue on
    /// both sides).
    #[wasm_bindgen(constructor)]
    pub fn new(from: u8, text: &str) -> Result<MirrorHandle> {
        let mirror = match from {
            0 => tw::Mirror::new(text),
            1 => read(text, "task").map(tw::Mirror::from_snapshot),
            _ => read(text, "mirror"),
        };
        mirror.map(|mirror| MirrorHandle { mirror }).map_err(throw)
    }

    /// Merges a resume answer given as JSON text: `{outcome, task?}`.
    /// The answer's `epoch`, when it has one, is judged too (a snapshot
    /// of another epoch is taken even at a lower version).
    pub fn merge(&mut self, answer: &str) -> Result<JsValue> {
        let tw::EpochAnswer { epoch, answer } = read(answer, "answer").map_err(throw)?;
        let outcome = self.mirror.merge_from(epoch.as_deref(), &answer);
        // `{outcome, task?}`: the task when it changed, so that the JS
        // layer refreshes its cached task in the same crossing.
        Ok(text(match self.mirror.task().filter(|_| outcome.changed) {
            Some(task) => object(&[("outcome", &outcome), ("task", task)]),
            None => object(&[("outcome", &outcome)]),
        }))
    }

    /// The persisted form, `{taskId, task, epoch?}` (`task` is `null`
    /// before the first answer): also how the JS side reads the task id
    /// and the task, so that one export serves all three.
    pub fn to_json(&self) -> JsValue {
        text(write(&self.mirror))
    }
}

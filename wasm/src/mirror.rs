//! `TaskMirror`: one task as a client knows it.

use serde::Serialize;
use taskwire_core as tw;
use tw::wire::to_json;
use wasm_bindgen::prelude::wasm_bindgen;

use crate::read::read;
use crate::{throw, Result};

/// The wasm side of `TaskMirror` (the JS class wraps it).
#[wasm_bindgen]
pub struct MirrorHandle {
    mirror: tw::Mirror,
}

/// A merge result: the outcome, plus the task when it changed, so that
/// the JS layer refreshes its cached task in the same crossing.
#[derive(Serialize)]
struct Merged<'a> {
    outcome: &'a tw::MergeOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    task: Option<&'a tw::TaskView>,
}

#[wasm_bindgen]
impl MirrorHandle {
    /// A mirror that knows nothing yet.
    #[wasm_bindgen(constructor)]
    pub fn new(task_id: &str) -> Result<MirrorHandle> {
        tw::Mirror::new(task_id)
            .map(|mirror| MirrorHandle { mirror })
            .map_err(throw)
    }

    /// A mirror starting from a task (JSON of a task view).
    pub fn from_snapshot(task: &str) -> Result<MirrorHandle> {
        let task: tw::TaskView = read(task, "task").map_err(throw)?;
        Ok(MirrorHandle {
            mirror: tw::Mirror::from_snapshot(task),
        })
    }

    /// A mirror from its persisted JSON (`{taskId, task}`).
    pub fn from_json(text: &str) -> Result<MirrorHandle> {
        read(text, "mirror")
            .map(|mirror| MirrorHandle { mirror })
            .map_err(throw)
    }

    /// Merges a resume answer given as JSON text: `{outcome, task?}`.
    pub fn merge(&mut self, answer: &str) -> Result<String> {
        let answer: tw::ResumeAnswer = read(answer, "answer").map_err(throw)?;
        let outcome = self.mirror.merge(&answer);
        Ok(to_json(&Merged {
            task: self.mirror.task().filter(|_| outcome.changed),
            outcome: &outcome,
        }))
    }

    /// The task (JSON of a view), or `null`.
    pub fn task(&self) -> String {
        match self.mirror.task() {
            Some(task) => to_json(task),
            None => String::from("null"),
        }
    }

    /// The task id.
    pub fn task_id(&self) -> String {
        self.mirror.task_id().to_string()
    }

    /// The persisted form, `{taskId, task}`.
    pub fn to_json(&self) -> String {
        to_json(&self.mirror)
    }
}

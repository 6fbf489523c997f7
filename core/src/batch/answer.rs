//! [`BatchAnswer`]: one answer about a batch, on the wire.
//!
//! ```json
//! {"batchId":"bat_1","mode":"delta","cursor":7,"size":3,"open":2,"epoch":"e1",
//!  "tasks":[{"mode":"delta","events":[{"version":4,"event":{…}}],"task":{…}}]}
//! ```

use alloc::{string::String, vec::Vec};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::json::{self, Fields, FromJson, Gather, Path, Placeholder, Value};
use crate::resume::{ResumeAnswer, ResumeMode};
use crate::value::NonBlank;

/// One answer about a batch (PROTOCOL.md §Follow a batch):
///
/// | `mode` | `tasks` |
/// |---|---|
/// | `snapshot` | every task, each a `snapshot` |
/// | `caught-up` | none |
/// | `delta` | the tasks that changed after the cursor, in item order, each a `delta` (or a `snapshot` past the retention window) |
#[derive(Debug, Clone, PartialEq)]
pub struct BatchAnswer {
    /// The batch.
    pub batch_id: String,
    /// The answer's mode.
    pub mode: ResumeMode,
    /// The batch cursor after this answer.
    pub cursor: u64,
    /// How many tasks the batch has.
    pub size: u64,
    /// How many of them are not terminal.
    pub open: u64,
    /// Per task, in item order: its resume answer for the version the
    /// client held at the cursor.
    pub tasks: Vec<ResumeAnswer>,
    /// The history the answer comes from (`None`: a backend that sends
    /// none).
    pub epoch: Option<String>,
}

impl Serialize for BatchAnswer {
    /// `batchId`, `mode`, `cursor`, `size`, `open`, `tasks`, then `epoch`
    /// when known.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("BatchAnswer", 7)?;
        st.serialize_field("batchId", &self.batch_id)?;
        st.serialize_field("mode", &self.mode)?;
        st.serialize_field("cursor", &self.cursor)?;
        st.serialize_field("size", &self.size)?;
        st.serialize_field("open", &self.open)?;
        st.serialize_field("tasks", &self.tasks)?;
        match &self.epoch {
            Some(epoch) => st.serialize_field("epoch", epoch)?,
            None => st.skip_field("epoch")?,
        }
        st.end()
    }
}

impl Placeholder for ResumeMode {
    fn placeholder() -> Self {
        ResumeMode::CaughtUp
    }
}

impl FromJson for BatchAnswer {
    /// An unknown `mode` is an error; a `caught-up` answer has no
    /// `tasks`, a `snapshot` only snapshots; `open` is at most `size`.
    /// (Gathered: one early return, not one per field; docs/package.md.)
    fn from_json(value: &Value<'_>, at: Path<'_>) -> Result<Self, json::Error> {
        let f = Fields::of(value, at)?;
        let mut g = Gather::new(&f, None);
        let batch_id: NonBlank = g.req("batchId");
        let epoch: Option<NonBlank> = g.opt("epoch");
        let answer = BatchAnswer {
            batch_id: batch_id.into_string(),
            mode: g.req("mode"),
            cursor: g.req("cursor"),
            size: g.req("size"),
            open: g.req("open"),
            tasks: g.opt("tasks").unwrap_or_default(),
            epoch: epoch.map(NonBlank::into_string),
        };
        if answer.open > answer.size {
            g.fail("open", "must not be above size");
        }
        let snapshots = answer
            .tasks
            .iter()
            .all(|t| t.mode() == ResumeMode::Snapshot);
        match answer.mode {
            ResumeMode::CaughtUp if !answer.tasks.is_empty() => {
                g.fail("tasks", "must be empty for mode caught-up")
            }
            ResumeMode::Snapshot if !snapshots => {
                g.fail("tasks", "must all be snapshots for mode snapshot")
            }
            _ => {}
        }
        g.finish(answer)
    }
}

json::impl_deserialize!(BatchAnswer);

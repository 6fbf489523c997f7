//! The writers of what a follow tells its page: statuses, updates,
//! rejections, a batch's progress, and the persisted batch.

use super::{ToJson, Writer};
use crate::batch::BatchMirror;
use crate::follow::{BatchProgress, ConnState, Reject, Status, Update};
use crate::mirror::Mirror;
use crate::task::State;

impl ToJson for Status {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        let state = match self.state {
            ConnState::Connecting => "connecting",
            ConnState::Live => "live",
            ConnState::Reconnecting => "reconnecting",
            ConnState::Offline => "offline",
            ConnState::Closed => "closed",
        };
        w.field("state", state);
        w.some("attempt", &self.attempt);
        w.some("retryInMs", &self.retry_in_ms);
        w.some("error", &self.error);
        w.close();
    }
}

impl ToJson for Update {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("task", &self.task);
        w.field("mode", self.mode.as_str());
        w.field("applied", &self.applied);
        w.field("events", &self.events);
        w.field("rejected", &self.rejected);
        if let Some(reason) = self.reason {
            w.field("reason", reason.as_str());
        }
        w.close();
    }
}

impl ToJson for Reject {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.some("taskId", &self.task_id);
        w.field("mode", self.mode.as_str());
        w.field("rejected", &self.rejected);
        w.field("version", &self.version);
        w.close();
    }
}

impl ToJson for BatchProgress {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("size", &self.size);
        w.field("terminal", &self.terminal);
        w.key("counts");
        w.open();
        for (state, n) in State::ALL.iter().zip(&self.counts) {
            w.field(state.as_str(), n);
        }
        w.close();
        w.field("progress", &self.progress);
        w.close();
    }
}

impl ToJson for BatchMirror {
    /// As a snapshot answer ([`BatchMirror::to_snapshot`]), the persisted
    /// form, written from the mirror without copying it.
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("batchId", self.batch_id());
        w.field("mode", "snapshot");
        w.field("cursor", &self.cursor());
        w.field("size", &self.size());
        w.field("open", &self.open());
        w.key("tasks");
        w.out.push_str("[");
        for (i, task) in self.tasks().iter().filter_map(Mirror::task).enumerate() {
            if i > 0 {
                w.out.push_str(",");
            }
            w.out
                .push_str("{\"mode\":\"snapshot\",\"events\":[],\"task\":");
            task.write_json(w);
            w.out.push_str("}");
        }
        w.out.push_str("]");
        if let Some(epoch) = self.epoch() {
            w.field("epoch", epoch);
        }
        w.close();
    }
}

//! The timeline answer (PROTOCOL.md §Timeline): the only writer of its
//! types, so a server, a backend and a page write the same bytes.

use super::{ToJson, Writer};
use crate::ledger::CancelReport;
use crate::task::{HistoryEntry, TaskView};
use crate::timeline::{timeline, TimelineEntry};

impl ToJson for TimelineEntry<'_> {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("version", &self.version);
        w.field("atMs", &self.at_ms);
        w.field("kind", self.kind);
        w.some("attempt", &self.attempt);
        w.some("step", &self.step);
        w.some("durationMs", &self.duration_ms);
        w.some("usage", &self.usage);
        w.some("detail", &self.detail);
        w.close();
    }
}

impl ToJson for CancelReport<'_> {
    fn write_json(&self, w: &mut Writer) {
        w.open();
        w.field("finished", &self.finished);
        w.field("interrupted", &self.interrupted);
        w.field("notRun", &self.not_run);
        w.field("effects", self.effects);
        w.key("kept");
        w.out.push('[');
        for (i, (step, checkpoint)) in self.kept.iter().enumerate() {
            if i > 0 {
                w.out.push(',');
            }
            w.open();
            w.field("step", *step);
            w.field("outputRef", checkpoint.output_ref.as_str());
            w.field("outputHash", checkpoint.output_hash.as_str());
            w.close();
        }
        w.out.push(']');
        w.close();
    }
}

/// `{"taskId","state","version","entries":[…],"cancelReport"?}`: the
/// timeline of a task at `view` with its whole `history`, and, for a
/// cancelled task, what the cancel did.
pub fn timeline_answer(view: &TaskView, history: &[HistoryEntry]) -> alloc::string::String {
    let mut w = Writer::default();
    w.open();
    w.field("taskId", &view.id);
    w.field("state", view.state.as_str());
    w.field("version", &view.version);
    w.field("entries", &timeline(view, history));
    w.some("cancelReport", &view.cancel_report());
    w.close();
    w.finish()
}

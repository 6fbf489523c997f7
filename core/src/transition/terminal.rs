//! Rule 2: a terminal task absorbs everything. A repeat of what made it
//! terminal is a duplicate (so an executor's retry gets "duplicate", not
//! an error); anything else is a conflict. Nothing changes either way.

use super::{Outcome, Reason};
use crate::event::Event;
use crate::task::{State, TaskView};

impl TaskView {
    /// Rule 2: what a terminal task answers.
    pub(super) fn absorb(&self, event: &Event) -> Outcome {
        use Reason::*;
        // A succeeded task, or a cancelled one whose work finished anyway.
        let holds_result =
            self.result_hash.is_some() && matches!(self.state, State::Succeeded | State::Cancelled);
        match (event, self.state) {
            (Event::Succeed { result_hash, .. }, _) if holds_result => {
                if self.result_hash.as_deref() == Some(result_hash.as_str()) {
                    Outcome::unchanged(DuplicateResult, true)
                } else {
                    Outcome::unchanged(ResultConflict, false)
                }
            }
            (Event::Expire { .. }, State::Expired) => Outcome::unchanged(DuplicateExpire, true),
            (Event::Timeout { .. }, State::TimedOut) => Outcome::unchanged(DuplicateTimeout, true),
            (Event::Cancel { .. } | Event::AckCancel { .. }, State::Cancelled) => {
                Outcome::unchanged(DuplicateCancel, true)
            }
            (
                Event::Decide {
                    decision,
                    artifact_hash,
                    version,
                    ..
                },
                _,
            ) if self.is_repeat_decision(*decision, artifact_hash, *version) => {
                Outcome::unchanged(DuplicateDecision, true)
            }
            _ => Outcome::unchanged(TerminalConflict, false),
        }
    }
}

//! Cancelling: a person's `cancel`, and the executor's answer to it
//! (001 §10, 002 §八).
//!
//! - With no worker on the task (`queued`, `waiting_approval`, `unknown`),
//!   a cancel ends it at once: `cancelled`.
//! - With a worker (`running`), the task is `cancelling` until the worker
//!   answers: `ack_cancel` (it stopped) ends it `cancelled`;
//!   `cannot_cancel` (it cannot stop) makes it `cancel_ineffective`, a
//!   live state, so the page shows that the work goes on instead of a stop
//!   that did not happen. Either way, whatever the work does next ends the
//!   task as `cancelled` (see `work` and `approval`); a result that
//!   arrives is kept for compensation and never delivered.
//! - A cancel repeated is a duplicate, never a second version.

use super::{Outcome, Reason};
use crate::task::{State, TaskView};

impl TaskView {
    pub(super) fn cancel(&mut self) -> Outcome {
        match self.state {
            State::Running => {
                self.state = State::Cancelling;
                Outcome::changed(Reason::CancelRequested, false)
            }
            State::Cancelling | State::CancelIneffective => {
                Outcome::unchanged(Reason::DuplicateCancel, true)
            }
            // queued, waiting_approval, unknown: nobody to wait for.
            _ => {
                self.state = State::Cancelled;
                Outcome::changed(Reason::Cancelled, true)
            }
        }
    }

    pub(super) fn ack_cancel(&mut self) -> Outcome {
        match self.state {
            State::Cancelling | State::CancelIneffective => {
                self.state = State::Cancelled;
                Outcome::changed(Reason::CancelAcknowledged, true)
            }
            _ => Outcome::unchanged(Reason::NotCancelling, false),
        }
    }

    pub(super) fn cannot_cancel(&mut self) -> Outcome {
        match self.state {
            State::Cancelling => {
                self.state = State::CancelIneffective;
                Outcome::changed(Reason::CancelIneffective, false)
            }
            State::CancelIneffective => Outcome::unchanged(Reason::DuplicateCancel, true),
            _ => Outcome::unchanged(Reason::NotCancelling, false),
        }
    }
}

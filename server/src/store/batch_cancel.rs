//! Cancelling what is left of a batch in one request (PROTOCOL.md §Cancel
//! a batch): each of its tasks that is not terminal is judged by core as
//! one cancel of that task would be, in one commit.
//!
//! A page that shows a batch of 200 items and offers "cancel the rest"
//! would otherwise send 200 cancels, each with a token that lists its
//! task (a browser token's `batch` claim covers no single-task route).

use std::collections::BTreeMap;

use taskwire_core::{Event, Reason};

/// What a batch cancel asks: the caller's tenant, the batch, and the
/// `cancel` event (its time and actor the server's, as for one task).
#[derive(Debug, Clone)]
pub struct BatchCancel {
    /// The caller's tenant: the batch must be this tenant's.
    pub tenant: String,
    /// The batch.
    pub batch_id: String,
    /// The `cancel` event each open task is judged against.
    pub event: Event,
}

/// What a batch cancel did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchCancelled {
    /// How many tasks the batch has.
    pub size: u64,
    /// How many tasks a cancel changed (each one new version).
    pub changed: u64,
    /// Core's reasons, counted over the tasks that were open: `cancelled`
    /// (ended at once), `cancel-requested` (a running task's worker is
    /// asked to stop), `duplicate-cancel` (asked before). Tasks already
    /// terminal are not judged.
    pub reasons: BTreeMap<&'static str, u64>,
}

impl BatchCancelled {
    /// A batch of `size` tasks, nothing judged yet.
    pub(crate) fn of(size: u64) -> Self {
        BatchCancelled {
            size,
            ..Self::default()
        }
    }

    /// Counts one task's judgement.
    pub(crate) fn count(&mut self, reason: Reason, changed: bool) {
        *self.reasons.entry(reason.as_str()).or_default() += 1;
        self.changed += u64::from(changed);
    }
}

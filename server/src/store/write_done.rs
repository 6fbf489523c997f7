//! What a store's writer hands back for one write job.

use taskwire_core::Delivery;

use super::{
    Acted, BatchCancelled, BatchCreated, CallbackAnswer, Claimed, Created, Quarantined, StoreError,
    Swept,
};

/// What a store's writer hands back for one write job. Both stores queue
/// writes to a writer that batches them into transactions; the job's
/// caller unwraps the variant it asked for.
// A task view (in `NewTask`/`Created`) makes one variant ~400 bytes since
// the lifecycle fields (issue 11); each value lives only while its write
// is queued, so boxing would add an allocation per create to save a few
// hundred bytes per queued write.
#[allow(clippy::large_enum_variant)]
pub(crate) enum WriteDone {
    Created(Created),
    BatchCreated(BatchCreated),
    Callback(CallbackAnswer),
    Acted(Acted),
    BatchCancelled(BatchCancelled),
    Claimed(Claimed),
    Delivery(Delivery),
    Expired(Swept),
    Quarantined(Vec<Quarantined>),
    /// An output append's judgement, and the task it was for (whose
    /// followers wake when it appended).
    Output(String, String, taskwire_core::Appended),
    Unit,
}

impl WriteDone {
    /// A writer that answers a job with another job's result is a bug.
    fn unexpected() -> StoreError {
        StoreError::Internal("writer answered another job".into())
    }

    pub(crate) fn created(self) -> Result<Created, StoreError> {
        match self {
            WriteDone::Created(c) => Ok(c),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn batch_created(self) -> Result<BatchCreated, StoreError> {
        match self {
            WriteDone::BatchCreated(c) => Ok(c),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn callback(self) -> Result<CallbackAnswer, StoreError> {
        match self {
            WriteDone::Callback(a) => Ok(a),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn batch_cancelled(self) -> Result<BatchCancelled, StoreError> {
        match self {
            WriteDone::BatchCancelled(c) => Ok(c),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn acted(self) -> Result<Acted, StoreError> {
        match self {
            WriteDone::Acted(a) => Ok(a),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn claimed(self) -> Result<Claimed, StoreError> {
        match self {
            WriteDone::Claimed(c) => Ok(c),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn delivery(self) -> Result<Delivery, StoreError> {
        match self {
            WriteDone::Delivery(d) => Ok(d),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn expired(self) -> Result<Swept, StoreError> {
        match self {
            WriteDone::Expired(swept) => Ok(swept),
            _ => Err(Self::unexpected()),
        }
    }

    pub(crate) fn output(self) -> Result<taskwire_core::Appended, StoreError> {
        match self {
            WriteDone::Output(_, _, appended) => Ok(appended),
            _ => Err(Self::unexpected()),
        }
    }

    /// The task whose followers this write's output wakes, and what it
    /// appended, if it appended.
    pub(crate) fn output_appended(&self) -> Option<(&str, crate::hub::output::Piece)> {
        match self {
            WriteDone::Output(task, stream, a)
                if a.reason == taskwire_core::AppendReason::Appended =>
            {
                let piece = crate::hub::output::Piece {
                    stream: stream.clone(),
                    attempt: a.attempt,
                    offset: a.offset,
                    text: a.added.clone(),
                };
                Some((task, piece))
            }
            _ => None,
        }
    }

    pub(crate) fn quarantined(self) -> Result<Vec<Quarantined>, StoreError> {
        match self {
            WriteDone::Quarantined(rows) => Ok(rows),
            _ => Err(Self::unexpected()),
        }
    }
}

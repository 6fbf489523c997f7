//! Batches (PROTOCOL.md §Batches): many tasks created in one call and
//! followed as one, over one held request.
//!
//! A batch has a *cursor*, a counter of its changes (`1` after the
//! create, plus one per commit that changes any of its tasks). A client
//! holds the cursor and the current view of each task, nothing else: no
//! histories, O(1) memory per task.
//! - [`BatchAnswer`]: what `GET /v1/batches/{id}/resume` and each `batch`
//!   message of `…/events` carry: per-task [resume answers](crate::ResumeAnswer)
//!   of the tasks that changed after the cursor.
//! - [`BatchMirror`]: the batch as a client knows it. It merges each
//!   per-task answer through that task's own [`Mirror`](crate::Mirror),
//!   so every rule of a single task (stale, duplicate, gap, divergence,
//!   regression) holds per task, and it never moves the batch cursor
//!   back.
//! - [`plan_batch`], [`task_answer`]: which answer a follower gets, the
//!   rules every backend applies to build a [`BatchAnswer`].

mod answer;
mod mirror;
mod plan;

pub use answer::BatchAnswer;
pub use mirror::{BatchMirror, BatchOutcome, TaskOutcome};
pub use plan::{plan_batch, task_answer};

//! Which answer a batch's follower gets (PROTOCOL.md §Follow a batch): the
//! rules every backend applies, here once. The reference server's stores,
//! the Node backend (through the npm package's `planBatch`) and the
//! simulation's server call them.

use alloc::vec::Vec;

use crate::resume::{plan_resume, ResumeAnswer, ResumeMode};
use crate::task::{HistoryEntry, TaskView};

/// Which batch answer `cursor` gets, from the batch's cursor `seq` alone
/// (so a store reads only the rows it needs): `snapshot` when asked, when
/// the client knows nothing (0), or when it holds a cursor this batch
/// never had (above `seq`: a restored store, and only a snapshot mends
/// it); `caught-up` at `seq`; else `delta`.
pub fn plan_batch(seq: u64, cursor: u64, force_snapshot: bool) -> ResumeMode {
    if force_snapshot || cursor == 0 || cursor > seq {
        ResumeMode::Snapshot
    } else if cursor == seq {
        ResumeMode::CaughtUp
    } else {
        ResumeMode::Delta
    }
}

/// One changed task's answer in a `delta`: `entries` are those written
/// after the client's batch cursor, oldest first (a store reads at most
/// `retention + 1` of them). They must run without a gap up to the view:
/// then a `delta` from the version the client held, else (more than
/// `retention` of them, or rows that disagree) a `snapshot` of the task.
pub fn task_answer(view: TaskView, entries: Vec<HistoryEntry>, retention: u64) -> ResumeAnswer {
    let contiguous = entries.last().is_some_and(|e| e.version == view.version)
        && entries.windows(2).all(|w| w[0].version + 1 == w[1].version);
    let held = entries.first().map(|e| e.version.saturating_sub(1));
    match held {
        Some(held) if contiguous => plan_resume(view.version, held, retention)
            .answer(view, || Ok::<_, ()>(entries))
            .unwrap_or_else(|()| unreachable_answer()),
        _ => ResumeAnswer::Snapshot { task: view },
    }
}

/// `answer`'s closure above never fails; this keeps that without a panic.
#[cold]
fn unreachable_answer() -> ResumeAnswer {
    ResumeAnswer::CaughtUp { task: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Millis;
    use crate::{create_task, CreateTask, Event};
    use alloc::vec;

    fn view_at(version: u64) -> TaskView {
        let mut v = create_task(&CreateTask::new("t", 0.0, 60_000.0, 3))
            .unwrap()
            .view()
            .clone();
        v.version = version;
        v
    }

    fn entry(version: u64) -> HistoryEntry {
        HistoryEntry {
            version,
            event: Event::Expire {
                at_ms: Millis::new(1.0, "atMs").unwrap(),
            },
        }
    }

    #[test]
    fn a_task_gets_its_delta_or_a_snapshot_past_the_window() {
        let a = task_answer(view_at(3), vec![entry(2), entry(3)], 8);
        assert_eq!(a.mode(), ResumeMode::Delta);
        assert_eq!(a.events().len(), 2);
        let many: Vec<_> = (1..=9).map(entry).collect();
        assert_eq!(
            task_answer(view_at(9), many, 8).mode(),
            ResumeMode::Snapshot
        );
        // Rows that do not end at the view, or have a gap: a snapshot.
        assert_eq!(
            task_answer(view_at(4), vec![entry(2), entry(3)], 8).mode(),
            ResumeMode::Snapshot
        );
        assert_eq!(
            task_answer(view_at(3), vec![entry(1), entry(3)], 8).mode(),
            ResumeMode::Snapshot
        );
        assert_eq!(
            task_answer(view_at(3), vec![], 8).mode(),
            ResumeMode::Snapshot
        );
    }

    #[test]
    fn plans_each_mode_from_the_cursor() {
        assert_eq!(plan_batch(5, 0, false), ResumeMode::Snapshot);
        assert_eq!(plan_batch(5, 6, false), ResumeMode::Snapshot);
        assert_eq!(plan_batch(5, 3, true), ResumeMode::Snapshot);
        assert_eq!(plan_batch(5, 5, false), ResumeMode::CaughtUp);
        assert_eq!(plan_batch(5, 1, false), ResumeMode::Delta);
    }
}

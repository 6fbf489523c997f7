//! The batch mirror's own rules (the per-task ones are the mirror's, and
//! tested there): cursors, completeness, epochs, other batches.

use super::*;
use crate::book::Book;
use crate::json::testing::{from_json, to_json};

const IDS: [&str; 3] = ["t0", "t1", "t2"];

/// A book with three tasks and the versions each had at every cursor.
struct Batch {
    book: Book,
    /// `at[c]`: the tasks' versions at cursor `c` (index 0 unused).
    at: Vec<[u64; 3]>,
}

impl Batch {
    fn new() -> Batch {
        let mut book = Book::with_retention(2);
        for id in IDS {
            book.create(&crate::CreateTask::new(id, 0.0, 1e12, 3))
                .unwrap();
        }
        Batch {
            book,
            at: vec![[0; 3], [0; 3]],
        }
    }

    fn version(&self, i: usize) -> u64 {
        self.book.get(IDS[i]).unwrap().version
    }

    /// One commit: the next event of each task in `which`.
    fn commit(&mut self, which: &[usize]) {
        for &i in which {
            let v = self.version(i);
            let event = if v == 0 {
                r#"{"type":"start","atMs":1,"worker":"w"}"#.to_string()
            } else if v < 4 {
                format!(
                    r#"{{"type":"progress","atMs":{v},"progress":{},"cursor":""}}"#,
                    v * 20
                )
            } else {
                r#"{"type":"succeed","atMs":9,"resultRef":"r","resultHash":"h"}"#.to_string()
            };
            self.book
                .apply(IDS[i], from_json(&event, "event").unwrap(), None)
                .unwrap();
        }
        let now = [0, 1, 2].map(|i| self.version(i));
        self.at.push(now);
    }

    fn cursor(&self) -> u64 {
        self.at.len() as u64 - 1
    }

    fn open(&self) -> u64 {
        IDS.iter()
            .filter(|id| !self.book.get(id).unwrap().state.is_terminal())
            .count() as u64
    }

    fn answer(&self, mode: ResumeMode, tasks: Vec<ResumeAnswer>, epoch: &str) -> BatchAnswer {
        BatchAnswer {
            batch_id: "b".into(),
            mode,
            cursor: self.cursor(),
            size: 3,
            open: self.open(),
            tasks,
            epoch: Some(epoch.into()),
        }
    }

    fn snapshot(&self, epoch: &str) -> BatchAnswer {
        let tasks = IDS
            .iter()
            .map(|id| ResumeAnswer::Snapshot {
                task: self.book.get(id).unwrap().view().clone(),
            })
            .collect();
        self.answer(ResumeMode::Snapshot, tasks, epoch)
    }

    /// What the server answers a client at `cursor`.
    fn resume(&self, cursor: u64, epoch: &str) -> BatchAnswer {
        let held = self.at[cursor as usize];
        let tasks: Vec<ResumeAnswer> = (0..3)
            .filter(|&i| held[i] != self.version(i))
            .map(|i| self.book.resume(IDS[i], held[i]).unwrap())
            .collect();
        let mode = if tasks.is_empty() {
            ResumeMode::CaughtUp
        } else {
            ResumeMode::Delta
        };
        self.answer(mode, tasks, epoch)
    }
}

fn versions(m: &BatchMirror) -> Vec<u64> {
    m.tasks().iter().map(Mirror::version).collect()
}

#[test]
fn a_snapshot_then_deltas_follow_every_task_and_replays_are_refused_whole() {
    let mut b = Batch::new();
    let mut m = BatchMirror::new("b").unwrap();
    let out = m.merge(&b.snapshot("e"));
    assert!(out.changed() && out.advanced && out.next == Next::None);
    assert!(m.is_complete() && !m.is_done());
    b.commit(&[0, 2]);
    b.commit(&[2]);
    let delta = b.resume(m.cursor(), "e");
    assert_eq!(delta.tasks.len(), 2, "only the tasks that changed");
    let out = m.merge(&delta);
    assert_eq!(
        out.tasks.iter().map(|t| t.index).collect::<Vec<_>>(),
        [Some(0), Some(2)]
    );
    assert_eq!((m.cursor(), versions(&m)), (3, vec![1, 0, 2]));
    // The same delta again, and an old snapshot: refused whole.
    let again = m.merge(&delta);
    assert_eq!(again.rejected[0].reason, RejectReason::StaleAnswer);
    assert!(again.tasks.is_empty() && !again.changed());
    let mut old = b.snapshot("e");
    old.cursor = 2;
    assert_eq!(
        m.merge(&old).rejected[0].reason,
        RejectReason::StaleSnapshot
    );
    // Caught up: nothing; ahead of the mirror: not to be trusted.
    assert_eq!(m.merge(&b.resume(3, "e")).next, Next::None);
    let mut ahead = b.resume(3, "e");
    ahead.cursor = 9;
    assert_eq!(m.merge(&ahead).next, Next::Snapshot);
    assert_eq!(m.cursor(), 3);
}

#[test]
fn a_task_whose_answer_does_not_apply_asks_for_the_whole_batch_and_keeps_the_cursor() {
    let mut b = Batch::new();
    let mut m = BatchMirror::new("b").unwrap();
    m.merge(&b.snapshot("e"));
    b.commit(&[1]);
    b.commit(&[1]);
    let mut delta = b.resume(1, "e");
    if let ResumeAnswer::Delta { events, .. } = &mut delta.tasks[0] {
        events.remove(0); // a gap
    }
    let out = m.merge(&delta);
    assert_eq!(out.tasks[0].outcome.rejected[0].reason, RejectReason::Gap);
    assert_eq!((out.next, m.cursor()), (Next::Snapshot, 1));
    let out = m.merge(&b.snapshot("e"));
    assert!(out.changed() && out.next == Next::None);
    assert_eq!((m.cursor(), versions(&m)), (3, vec![0, 2, 0]));
}

#[test]
fn another_epoch_is_taken_only_as_a_snapshot_even_behind() {
    let mut b = Batch::new();
    for _ in 0..4 {
        b.commit(&[0, 1, 2]);
    }
    let mut m = BatchMirror::new("b").unwrap();
    m.merge(&b.snapshot("e1"));
    // A store restored from an older backup: cursor 2, lower versions.
    let mut restored = Batch::new();
    restored.commit(&[0]);
    let out = m.merge(&restored.resume(1, "e2"));
    assert_eq!(out.rejected[0].reason, RejectReason::OtherEpoch);
    assert_eq!(out.next, Next::Snapshot);
    let out = m.merge(&restored.snapshot("e2"));
    assert_eq!(out.reason, Some(UpdateReason::EpochChanged));
    assert!(out
        .tasks
        .iter()
        .all(|t| t.outcome.reason == Some(UpdateReason::EpochChanged)));
    assert_eq!(
        (m.cursor(), m.epoch(), versions(&m)),
        (2, Some("e2"), vec![1, 0, 0])
    );
}

#[test]
fn another_batch_or_task_is_refused_and_an_incomplete_view_asks_for_a_snapshot() {
    let mut b = Batch::new();
    let mut m = BatchMirror::new("b").unwrap();
    let mut other = b.snapshot("e");
    other.batch_id = "b2".into();
    assert_eq!(m.merge(&other).rejected[0].reason, RejectReason::WrongBatch);
    // A snapshot missing a task: taken, but the batch is asked for again.
    let mut partial = b.snapshot("e");
    partial.tasks.pop();
    assert_eq!(m.merge(&partial).next, Next::Snapshot);
    assert!(!m.is_complete());
    m.merge(&b.snapshot("e"));
    b.commit(&[0]);
    let mut delta = b.resume(1, "e");
    if let ResumeAnswer::Delta { task: Some(t), .. } = &mut delta.tasks[0] {
        t.id = "stranger".into();
    }
    let out = m.merge(&delta);
    assert_eq!(out.tasks[0].index, None);
    assert_eq!(
        out.tasks[0].outcome.rejected[0].reason,
        RejectReason::WrongTask
    );
    assert_eq!(out.next, Next::Snapshot);
}

#[test]
fn done_once_every_task_is_terminal_and_none_is_open() {
    let mut b = Batch::new();
    let mut m = BatchMirror::new("b").unwrap();
    m.merge(&b.snapshot("e"));
    while b.open() > 0 {
        b.commit(&[0, 1, 2]);
        let out = m.merge(&b.resume(m.cursor(), "e"));
        assert_eq!(out.next, Next::None, "{out:?}");
    }
    assert!(m.is_done());
    // A server that says none is open while a task is live: snapshot.
    let mut early = BatchMirror::new("b").unwrap();
    let mut lying = Batch::new().snapshot("e");
    lying.open = 0;
    assert_eq!(early.merge(&lying).next, Next::Snapshot);
    assert!(!early.is_done());
}

#[test]
fn the_persisted_form_is_a_snapshot_answer_that_restores_the_mirror() {
    let mut b = Batch::new();
    b.commit(&[1]);
    let mut m = BatchMirror::new("b").unwrap();
    m.merge(&b.snapshot("e"));
    let text = to_json(&m);
    assert!(
        text.starts_with(
            r#"{"batchId":"b","mode":"snapshot","cursor":2,"size":3,"open":3,"tasks":[{"mode":"snapshot","events":[],"task":{"id":"t0""#
        ),
        "{text}"
    );
    assert!(text.ends_with(r#""epoch":"e"}"#), "{text}");
    assert_eq!(crate::json::write(&m), text, "the page's writer agrees");
    let mut back = BatchMirror::new("b").unwrap();
    assert_eq!(
        back.merge(&from_json(&text, "persisted").unwrap()).next,
        Next::None
    );
    assert_eq!(back, m);
    // Another batch's stored value restores nothing.
    let mut other = BatchMirror::new("b2").unwrap();
    other.merge(&from_json(&text, "persisted").unwrap());
    assert_eq!(other.cursor(), 0);
    // From a create's answer: every task, the cursor, by delta from there.
    let created = Batch::new();
    let views = IDS
        .iter()
        .map(|id| created.book.get(id).unwrap().view().clone())
        .collect();
    let mut from = BatchMirror::from_tasks("b", 1, Some("e".into()), views).unwrap();
    assert!(from.is_complete());
    let out = from.merge(&b.resume(1, "e"));
    assert_eq!((out.next, versions(&from)), (Next::None, vec![0, 1, 0]));
    assert!(BatchMirror::new(" ").is_err());
}

#[test]
fn the_wire_answer_is_checked() {
    let bad = [
        (
            r#"{"batchId":"b","mode":"caught-up","cursor":1,"size":1,"open":1,"tasks":[{"mode":"caught-up","events":[]}]}"#,
            "answer.tasks: must be empty for mode caught-up",
        ),
        (
            r#"{"batchId":"b","mode":"snapshot","cursor":1,"size":1,"open":1,"tasks":[{"mode":"caught-up","events":[]}]}"#,
            "answer.tasks: must all be snapshots for mode snapshot",
        ),
        (
            r#"{"batchId":"b","mode":"delta","cursor":1,"size":1,"open":2,"tasks":[]}"#,
            "answer.open: must not be above size",
        ),
        (
            r#"{"batchId":"b","mode":"later","cursor":1,"size":1,"open":1,"tasks":[]}"#,
            "answer.mode",
        ),
        (
            r#"{"batchId":"","mode":"delta","cursor":1,"size":1,"open":1}"#,
            "answer.batchId",
        ),
    ];
    for (text, message) in bad {
        let e = from_json::<BatchAnswer>(text, "answer").unwrap_err();
        assert!(e.message.starts_with(message), "{text}: {}", e.message);
    }
    let b = Batch::new();
    let answer = b.snapshot("e");
    assert_eq!(
        from_json::<BatchAnswer>(&to_json(&answer), "answer").unwrap(),
        answer
    );
}

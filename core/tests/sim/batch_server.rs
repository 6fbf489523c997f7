//! The simulated batch server: a core `Book` with the batch's tasks and
//! the batch cursor as PROTOCOL.md §Batches says (1 after the create,
//! growing by one or more with every commit that changes any of its
//! tasks; one commit may change several), answering resume requests and
//! streams with `BatchAnswer`s: per-task resume answers of the tasks that
//! changed after the cursor, each from the version it had at that cursor.

use taskwire_core::batch::plan_batch;
use taskwire_core::{
    BatchAnswer, BatchMirror, Book, CreateTask, Event, ResumeAnswer, ResumeMode, TaskView,
};
use taskwire_wire::{from_json, from_json_bytes, to_json};

use super::{Rng, Served};

pub const BATCH: &str = "bat 1/é";
pub const EPOCH: &str = "epoch-1";

/// One commit: events for some of the tasks, (task index, callback id, event).
type Commit = Vec<(usize, String, Event)>;

pub struct BatchServer {
    pub book: Book,
    pub ids: Vec<String>,
    /// Commits still to apply.
    pub timeline: Vec<Commit>,
    /// Every cursor the batch had, rising, with every task's view then
    /// (cursor 0 means "I know nothing": the first is 1, the create).
    pub history: Vec<(u64, Vec<TaskView>)>,
}

/// A task's events: the seed's summary (sometimes with a failed, retried
/// attempt), a random number of progress steps (past the retention
/// window, sometimes), then a success or a final failure.
fn events(rng: &mut Rng, task: usize) -> Vec<Event> {
    let mut events = vec![r#"{"type":"start","atMs":1,"worker":"w1"}"#.to_string()];
    if rng.chance(0.2) {
        events.push(r#"{"type":"fail","atMs":2,"error":"quota","retryable":true}"#.into());
        events.push(r#"{"type":"start","atMs":3,"worker":"w2"}"#.into());
    }
    let mut progress = 0;
    for i in 0..rng.below(14) {
        progress = (progress + 1 + rng.below(12)).min(99);
        events.push(format!(
            r#"{{"type":"progress","atMs":{},"progress":{progress},"cursor":"c{task}-{i}"}}"#,
            10 + i
        ));
    }
    events.push(if rng.chance(0.8) {
        r#"{"type":"succeed","atMs":100,"resultRef":"r","resultHash":"h"}"#.into()
    } else {
        r#"{"type":"fail","atMs":100,"error":"bad input","retryable":false}"#.into()
    });
    events
        .iter()
        .map(|e| from_json(e, "event").expect("event"))
        .collect()
}

impl BatchServer {
    /// A batch of 2 to 8 tasks whose events interleave in commits of one
    /// to three tasks each.
    pub fn new(rng: &mut Rng) -> BatchServer {
        let mut book = Book::with_retention(8);
        let n = 2 + rng.below(7) as usize;
        let ids: Vec<String> = (0..n).map(|i| format!("tsk {i}/é")).collect();
        for id in &ids {
            book.create(&CreateTask::new(id, 0.0, 1e12, 3))
                .expect("create");
        }
        let mut queues: Vec<Vec<Event>> = (0..n).map(|i| events(rng, i)).collect();
        let mut timeline = Vec::new();
        let mut serial = 0;
        while queues.iter().any(|q| !q.is_empty()) {
            let mut commit = Commit::new();
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(n as u64) as usize;
                if commit.iter().any(|(t, _, _)| *t == i) || queues[i].is_empty() {
                    continue;
                }
                serial += 1;
                commit.push((i, format!("cb-{serial}"), queues[i].remove(0)));
            }
            if !commit.is_empty() {
                timeline.push(commit);
            }
        }
        let mut server = BatchServer {
            book,
            ids,
            timeline,
            history: Vec::new(),
        };
        server.history = vec![(1, server.views())];
        server
    }

    /// Every task's view now, in item order.
    pub fn views(&self) -> Vec<TaskView> {
        self.ids
            .iter()
            .map(|id| self.book.get(id).expect("task").view().clone())
            .collect()
    }

    /// Every task's view at cursor `cursor` (≥ 1).
    pub fn views_at(&self, cursor: u64) -> &[TaskView] {
        let after = self.history.partition_point(|(c, _)| *c <= cursor);
        &self.history[after.max(1) - 1].1
    }

    /// A cursor the batch really had, at random.
    pub fn some_cursor(&self, rng: &mut Rng) -> u64 {
        self.history[rng.below(self.history.len() as u64) as usize].0
    }

    fn open(views: &[TaskView]) -> u64 {
        views.iter().filter(|v| !v.state.is_terminal()).count() as u64
    }

    fn answer(
        &self,
        mode: ResumeMode,
        cursor: u64,
        tasks: Vec<ResumeAnswer>,
        views: &[TaskView],
    ) -> Vec<u8> {
        to_json(&BatchAnswer {
            batch_id: BATCH.into(),
            mode,
            cursor,
            size: self.ids.len() as u64,
            open: Self::open(views),
            tasks,
            epoch: Some(EPOCH.into()),
        })
        .into_bytes()
    }

    /// The whole batch as it was at cursor `at`.
    fn snapshot_at(&self, at: u64) -> Vec<u8> {
        let views = self.views_at(at);
        let tasks = views
            .iter()
            .map(|v| ResumeAnswer::Snapshot { task: v.clone() })
            .collect();
        self.answer(ResumeMode::Snapshot, at, tasks, views)
    }
}

impl Served for BatchServer {
    fn path(&self) -> &'static str {
        "/v1/batches/bat%201%2F%C3%A9"
    }

    fn cursor(&self) -> u64 {
        self.history.last().map_or(1, |(c, _)| *c)
    }

    fn terminal(&self) -> bool {
        self.ids
            .iter()
            .all(|id| self.book.get(id).is_some_and(|t| t.state.is_terminal()))
    }

    fn steps_left(&self) -> usize {
        self.timeline.len()
    }

    /// One commit (its events applied twice, sometimes: redeliveries with
    /// the same callback ids, which change nothing and move no cursor).
    fn step(&mut self, rng: &mut Rng) -> bool {
        if self.timeline.is_empty() {
            return false;
        }
        let commit = self.timeline.remove(0);
        let mut changed = false;
        for _ in 0..if rng.chance(0.3) { 2 } else { 1 } {
            for (i, id, event) in &commit {
                let applied = self
                    .book
                    .apply(&self.ids[*i], event.clone(), Some(id))
                    .expect("apply");
                changed |= applied.changed;
            }
        }
        if changed {
            // By one or more: a client compares cursors, never counts.
            let next = self.cursor() + 1 + rng.below(3);
            let now = self.views();
            self.history.push((next, now));
        }
        true
    }

    fn resume(&self, cursor: u64, snapshot: bool) -> Vec<u8> {
        let now = self.cursor();
        // Which answer: core's rule, as every backend's.
        match plan_batch(now, cursor, snapshot) {
            ResumeMode::Snapshot => return self.snapshot_at(now),
            ResumeMode::CaughtUp => {
                return self.answer(ResumeMode::CaughtUp, now, Vec::new(), self.views_at(now))
            }
            ResumeMode::Delta => {}
        }
        let views = self.views_at(now);
        let held = self.views_at(cursor);
        let tasks = self
            .ids
            .iter()
            .zip(held.iter().zip(views))
            .filter(|(_, (then, now))| then.version != now.version)
            .map(|(id, (then, _))| self.book.resume(id, then.version).expect("resume"))
            .collect();
        self.answer(ResumeMode::Delta, now, tasks, views)
    }

    fn message(&self, cursor: u64) -> (Vec<u8>, u64, bool) {
        let data = String::from_utf8(self.resume(cursor, false)).expect("utf-8");
        let id = self.cursor();
        let text = format!("event: batch\nid: {id}\ndata: {data}\n\n");
        (text.into_bytes(), id, self.terminal())
    }

    fn frozen(&self, at: u64, cursor: u64) -> Vec<u8> {
        if cursor == at {
            let views = self.views_at(at);
            return self.answer(ResumeMode::CaughtUp, at, Vec::new(), views);
        }
        self.snapshot_at(at)
    }

    fn lossy(&self, cursor: u64) -> Option<Vec<u8>> {
        let mut answer: BatchAnswer =
            from_json_bytes(&self.resume(cursor, false), "answer").ok()?;
        let entries = answer.tasks.iter_mut().find_map(|t| match t {
            ResumeAnswer::Delta { events, .. } if !events.is_empty() => Some(events),
            _ => None,
        })?;
        entries.remove(0);
        Some(to_json(&answer).into_bytes())
    }

    fn agrees(&self, batch: &BatchMirror) -> bool {
        let then = self.views_at(batch.cursor());
        // A task may be ahead of its view at the cursor (a delta applied
        // while another task's did not, and the cursor stayed): the next
        // delta brings it its own entries again, as duplicates.
        batch.tasks().len() == then.len()
            && batch
                .tasks()
                .iter()
                .zip(then)
                .all(|(m, v)| m.version() > v.version || m.task() == Some(v))
    }

    fn as_snapshot(&self, old: &[u8]) -> Vec<u8> {
        let old: BatchAnswer = from_json_bytes(old, "replay").expect("replayed answer");
        self.snapshot_at(old.cursor.max(1))
    }
}

//! The simulated server: a core `Book` with one task, answering resume
//! requests (held long-polls included) and SSE streams as PROTOCOL.md says.

use taskwire_core::{Book, CreateTask, Event, ResumeAnswer, TaskView};
use taskwire_wire::{from_json, from_json_bytes, to_json};

use super::{Rng, Served};

pub const TASK: &str = "tsk 1/é";

/// The server's book and the executor's timeline of events for the task.
pub struct Server {
    pub book: Book,
    /// Events still to apply: (callback id, event).
    pub timeline: Vec<(String, Event)>,
    /// Every view the task went through, by version.
    pub views: Vec<TaskView>,
}

impl Server {
    /// A task and a random timeline: the seed's summary (sometimes with a
    /// failed, retried attempt), with a random number of progress steps,
    /// so that outages sometimes outrun the retention window.
    pub fn new(rng: &mut Rng) -> Server {
        let mut book = Book::with_retention(8);
        let task = book
            .create(&CreateTask::new(TASK, 0.0, 1e12, 3))
            .expect("create");
        let views = vec![task.view().clone()];
        let mut events = vec![r#"{"type":"start","atMs":1,"worker":"w1"}"#.to_string()];
        if rng.chance(0.3) {
            events.push(r#"{"type":"progress","atMs":2,"progress":10,"cursor":"c"}"#.into());
            events.push(r#"{"type":"fail","atMs":3,"error":"quota","retryable":true}"#.into());
            events.push(r#"{"type":"start","atMs":4,"worker":"w2"}"#.into());
        }
        let steps = rng.below(20) as u32;
        let mut progress = 0;
        for i in 0..steps {
            progress = (progress + 1 + rng.below(8) as u32).min(99);
            events.push(format!(
                r#"{{"type":"progress","atMs":{},"progress":{progress},"cursor":"c{i}"}}"#,
                10 + i
            ));
        }
        events.push(r#"{"type":"succeed","atMs":100,"resultRef":"r","resultHash":"h"}"#.into());
        let timeline = events
            .iter()
            .enumerate()
            .map(|(i, e)| (format!("cb-{i}"), from_json(e, "event").expect("event")))
            .collect();
        Server {
            book,
            timeline,
            views,
        }
    }

    pub fn view(&self) -> TaskView {
        self.task().view().clone()
    }

    fn task(&self) -> &taskwire_core::Task {
        self.book.get(TASK).expect("the task exists")
    }
}

impl Served for Server {
    fn path(&self) -> &'static str {
        "/v1/tasks/tsk%201%2F%C3%A9"
    }

    fn cursor(&self) -> u64 {
        self.task().version
    }

    fn terminal(&self) -> bool {
        self.task().state.is_terminal()
    }

    fn steps_left(&self) -> usize {
        self.timeline.len()
    }

    /// Applies the next timeline event (twice, sometimes: a redelivery
    /// with the same callback id); false when the timeline is over.
    fn step(&mut self, rng: &mut Rng) -> bool {
        if self.timeline.is_empty() {
            return false;
        }
        let (id, event) = self.timeline.remove(0);
        for _ in 0..if rng.chance(0.3) { 2 } else { 1 } {
            let applied = self
                .book
                .apply(TASK, event.clone(), Some(&id))
                .expect("apply");
            if applied.changed {
                let view = applied.task.clone();
                self.views.push(view);
            }
        }
        true
    }

    fn resume(&self, cursor: u64, snapshot: bool) -> Vec<u8> {
        let answer = if snapshot {
            ResumeAnswer::Snapshot { task: self.view() }
        } else {
            self.book.resume(TASK, cursor).expect("resume")
        };
        to_json(&answer).into_bytes()
    }

    fn message(&self, cursor: u64) -> (Vec<u8>, u64, bool) {
        let data = String::from_utf8(self.resume(cursor, false)).expect("utf-8");
        let version = self.cursor();
        let text = format!("event: resume\nid: {version}\ndata: {data}\n\n");
        (text.into_bytes(), version, self.terminal())
    }

    fn frozen(&self, at: u64, cursor: u64) -> Vec<u8> {
        let task = self.views[at as usize].clone();
        let answer = if cursor == task.version {
            ResumeAnswer::CaughtUp { task: Some(task) }
        } else {
            ResumeAnswer::Snapshot { task }
        };
        to_json(&answer).into_bytes()
    }

    fn as_snapshot(&self, old: &[u8]) -> Vec<u8> {
        let old: ResumeAnswer = from_json_bytes(old, "replay").expect("replayed answer");
        match old.task() {
            Some(task) => to_json(&ResumeAnswer::Snapshot { task: task.clone() }).into_bytes(),
            None => to_json(&old).into_bytes(),
        }
    }
}

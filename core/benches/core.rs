//! Core benchmarks: `cargo bench -p taskwire-core`. Numbers go in
//! `core/README.md`.

use divan::counter::ItemsCount;
use divan::{black_box, Bencher};
use taskwire_core::{
    Book, CreateTask, Event, Millis, Mirror, NonBlank, Percent, ResumeAnswer, Task, TaskView,
};

fn main() {
    divan::main();
}

/// An endless valid stream: start, progress 1..=98, retryable fail, and
/// again (100 events per attempt), so tasks can be made arbitrarily long.
fn stream(n: usize) -> Vec<Event> {
    let ms = |i: usize| Millis::new(i as f64, "atMs").unwrap();
    (0..n)
        .map(|i| match i % 100 {
            0 => Event::Start {
                at_ms: ms(i),
                worker: "w".into(),
                attempt: None,
                lease_ms: None,
                plan: None,
            },
            99 => Event::Fail {
                at_ms: ms(i),
                error: "retry".into(),
                retryable: true,
                attempt: None,
            },
            p => Event::Progress {
                at_ms: ms(i),
                progress: Percent::new(p as f64, "p").unwrap(),
                cursor: String::new(),
                attempt: None,
            },
        })
        .collect()
}

fn input(id: &str) -> CreateTask {
    CreateTask::new(id, 0.0, 1e15, 1 << 40)
}

fn book_with(n: usize, retention: u64) -> Book {
    let mut book = Book::with_retention(retention);
    book.create(&input("t")).unwrap();
    for e in stream(n) {
        book.apply("t", e, None).unwrap();
    }
    book
}

/// `Book::apply` on one task, events pre-built: the state machine, the
/// task lookup and the history append.
#[divan::bench(args = [1_000, 10_000, 100_000])]
fn book_apply(bencher: Bencher, n: usize) {
    bencher
        .counter(ItemsCount::new(n))
        .with_inputs(|| (book_with(0, 8), stream(n)))
        .bench_local_values(|(mut book, events)| {
            for e in events {
                black_box(book.apply("t", e, None).unwrap().changed);
            }
            book
        });
}

/// `Book::apply` with a callback id per event (the dedup layer on).
#[divan::bench(args = [10_000])]
fn book_apply_with_callback_ids(bencher: Bencher, n: usize) {
    let ids: Vec<String> = (0..n).map(|i| format!("cb-{i}")).collect();
    bencher
        .counter(ItemsCount::new(n))
        .with_inputs(|| (book_with(0, 8), stream(n)))
        .bench_local_values(|(mut book, events)| {
            for (e, id) in events.into_iter().zip(&ids) {
                black_box(book.apply("t", e, Some(id)).unwrap().changed);
            }
            book
        });
}

/// The pure reducer on a view (what a mirror runs per entry).
#[divan::bench(args = [10_000])]
fn view_apply(bencher: Bencher, n: usize) {
    let events = stream(n);
    let start: TaskView = taskwire_core::create_task(&input("t"))
        .unwrap()
        .view()
        .clone();
    bencher.counter(ItemsCount::new(n)).bench_local(|| {
        let mut view = start.clone();
        for e in &events {
            black_box(view.apply(e));
        }
        view
    });
}

/// Building a whole task of n events from scratch, through the functional
/// API (`apply_event` by value): linear in n.
#[divan::bench(args = [10_000])]
fn task_of_n_events(bencher: Bencher, n: usize) {
    bencher
        .counter(ItemsCount::new(n))
        .with_inputs(|| stream(n))
        .bench_local_values(|events| {
            let mut task: Task = taskwire_core::create_task(&input("t")).unwrap();
            for e in events {
                task = taskwire_core::apply_event(task, e).task;
            }
            task
        });
}

/// `Book::resume` of a delta of k events from a 10,000-event task.
#[divan::bench(args = [8, 1_000])]
fn resume_delta(bencher: Bencher, k: u64) {
    let book = book_with(10_000, k);
    bencher
        .counter(ItemsCount::new(k as usize))
        .bench_local(|| book.resume("t", 10_000 - k).unwrap());
}

/// `Mirror::merge` of a 1,000-event delta.
#[divan::bench]
fn mirror_merge_1000(bencher: Bencher) {
    let book = book_with(10_000, 1_000);
    let answer = book.resume("t", 9_000).unwrap();
    let mut base_book = book_with(9_000, 8);
    let base = Mirror::from_snapshot(base_book.get("t").unwrap().view().clone());
    base_book.drain_notifications();
    bencher
        .counter(ItemsCount::new(1_000usize))
        .with_inputs(|| base.clone())
        .bench_local_values(|mut mirror| {
            let outcome = mirror.merge(&answer);
            assert_eq!(outcome.applied.len(), 1_000);
            mirror
        });
}

/// Parsing a 1,000-event resume answer from JSON text, then merging it:
/// what the browser client does per long-poll answer.
#[divan::bench]
fn mirror_merge_1000_from_json(bencher: Bencher) {
    let book = book_with(10_000, 1_000);
    let text = taskwire_wire::to_json(&book.resume("t", 9_000).unwrap());
    let base = Mirror::from_snapshot(book_with(9_000, 8).get("t").unwrap().view().clone());
    bencher
        .counter(ItemsCount::new(1_000usize))
        .with_inputs(|| base.clone())
        .bench_local_values(|mut mirror| {
            let answer: ResumeAnswer = taskwire_wire::from_json(&text, "answer").unwrap();
            mirror.merge(&answer);
            mirror
        });
}

/// Parsing one event from JSON text (every HTTP callback does this).
#[divan::bench]
fn parse_event(bencher: Bencher) {
    let text = r#"{"type":"succeed","atMs":24300,"resultRef":"blob://summaries/doc-1","resultHash":"sha256:ab12"}"#;
    bencher.bench_local(|| taskwire_wire::from_json::<Event>(black_box(text), "event").unwrap());
    let _ = NonBlank::new("x", "x");
}

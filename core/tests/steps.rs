//! Steps never regress (issue 26, PROTOCOL.md §Steps), over random
//! streams of step reports, starts, failures, lapses, holds and
//! decisions (proptest): a succeeded or skipped step keeps its status and
//! checkpoint for the task's life, no step returns to `pending`, and
//! progress never falls below the share of finished steps, across
//! retries and continuations. The client side agrees: replaying the
//! recorded history onto the initial view gives the same task.

mod strategies;

use proptest::prelude::*;
use strategies::{attempt, ms, text, timed};
use taskwire_core::steps::{Checkpoint, StepReport, StepStatus};
use taskwire_core::{apply_event, create_task, CreateTask, DecisionKind, Event, State};

const NAMES: [&str; 4] = ["load", "classify", "assemble", "publish"];

fn report() -> impl Strategy<Value = StepReport> {
    let status = prop_oneof![
        Just(StepStatus::Running),
        Just(StepStatus::Succeeded),
        Just(StepStatus::Failed),
        Just(StepStatus::Skipped)
    ];
    (0..NAMES.len(), status, 0..3u8, any::<bool>()).prop_map(|(i, status, hash, label)| {
        let checkpoint = (status == StepStatus::Succeeded && hash > 0).then(|| Checkpoint {
            output_ref: text("ref"),
            output_hash: text(if hash == 1 { "h1" } else { "h2" }),
        });
        StepReport {
            name: text(NAMES[i]),
            status,
            label: label.then(|| "working".into()),
            usage: None,
            checkpoint,
        }
    })
}

/// Events in time order are built by the test; these are their kinds.
fn event(at: f64) -> impl Strategy<Value = Event> {
    let at = ms(at);
    prop_oneof![
        6 => (report(), attempt()).prop_map(move |(report, attempt)| Event::Step { at_ms: at, report, attempt }),
        2 => attempt().prop_map(move |attempt| Event::Start { at_ms: at, worker: "w".into(), attempt, lease_ms: None, plan: None }),
        1 => attempt().prop_map(move |attempt| Event::Fail { at_ms: at, error: "e".into(), retryable: true, attempt }),
        1 => attempt().prop_map(move |attempt| Event::Hold { at_ms: at, artifact_ref: text("a"), artifact_hash: text("h"), question: None, attempt }),
        1 => (0u64..30).prop_map(move |version| Event::Decide { at_ms: at, decision: DecisionKind::Approve, artifact_hash: text("h"), version, reason: None, actor: None }),
    ]
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    timed(60, event)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn steps_never_regress(events in events()) {
        let names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
        let mut task = create_task(&CreateTask {
            workflow_version: Some("v1".into()),
            steps: Some(names),
            ..CreateTask::new("t", 0.0, 1e9, 3)
        }).unwrap();
        for event in events {
            let before = task.view().clone();
            let t = apply_event(task, event);
            task = t.task;
            let (was, now) = (before.plan.as_ref().unwrap(), task.plan.as_ref().unwrap());
            prop_assert_eq!(&was.workflow_version, &now.workflow_version);
            for (old, new) in was.steps.iter().zip(&now.steps) {
                prop_assert_eq!(&old.name, &new.name);
                if old.status.is_final() {
                    prop_assert_eq!(old, new, "a finished step moved");
                }
                if old.status != StepStatus::Pending {
                    prop_assert_ne!(new.status, StepStatus::Pending);
                }
            }
            if task.state != State::Succeeded {
                prop_assert!(task.progress >= now.percent_done());
            }
            if task.attempts == before.attempts && before.state.holds_attempt() && task.state.holds_attempt() {
                prop_assert!(task.progress >= before.progress, "progress fell within an attempt");
            }
            prop_assert!(task.progress >= before.progress.min(was.percent_done()));
        }
        // The client's replay of the history agrees with the server's task.
        let mut replay = task.view().initial();
        for entry in task.history() {
            prop_assert!(replay.apply(&entry.event).changed);
        }
        prop_assert_eq!(&replay, task.view());
    }
}

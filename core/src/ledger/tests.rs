use crate::json::testing::{from_json, to_json};
use crate::ledger::Budget;
use crate::{apply_event, create_task, CreateTask, Event, Task, TaskView};

fn event(json: &str) -> Event {
    from_json(json, "event").unwrap()
}

fn task_with(events: &[&str]) -> Task {
    let mut task = create_task(&CreateTask {
        workflow_version: Some("v1".into()),
        steps: Some(vec!["draft".into(), "publish".into(), "notify".into()]),
        budget: Some(Budget {
            max_tokens: Some(1000),
            max_cost_cents: None,
        }),
        ..CreateTask::new("t", 0.0, 1e6, 2)
    })
    .unwrap();
    for json in events {
        let t = apply_event(task, event(json));
        assert!(t.changed, "{json}: {:?}", t.reason);
        task = t.task;
    }
    task
}

const RUN: [&str; 6] = [
    r#"{"type":"start","atMs":1,"worker":"w","attempt":1}"#,
    r#"{"type":"step","atMs":2,"name":"draft","status":"succeeded","outputRef":"s3://d","outputHash":"hd","attempt":1}"#,
    r#"{"type":"reserve","atMs":3,"reservation":"1:publish","step":"publish","tokens":300,"attempt":1}"#,
    r#"{"type":"settle","atMs":4,"reservation":"1:publish","tokens":120,"costCents":2,"toolCalls":1,"attempt":1}"#,
    r#"{"type":"reserve","atMs":5,"reservation":"1:notify","tokens":50,"attempt":1}"#,
    r#"{"type":"effect","atMs":6,"step":"publish","action":"post","resourceId":"REP-7","attempt":1}"#,
];

#[test]
fn a_view_with_a_ledger_is_written_the_same_both_ways_and_read_back() {
    let task = task_with(&RUN);
    let view = task.view();
    let text = to_json(view);
    assert_eq!(serde_json::to_string(view).unwrap(), text);
    assert!(
        text.ends_with(concat!(
            r#""budget":{"maxTokens":1000},"used":{"tokens":120,"costCents":2,"toolCalls":1},"#,
            r#""reserved":{"tokens":50,"costCents":0},"#,
            r#""reservations":[{"id":"1:publish","attempt":1,"step":"publish","tokens":300,"costCents":0,"settled":{"tokens":120,"costCents":2,"toolCalls":1}},"#,
            r#"{"id":"1:notify","attempt":1,"tokens":50,"costCents":0}],"#,
            r#""effects":[{"step":"publish","action":"post","resourceId":"REP-7","attempt":1}]}"#
        )),
        "{text}"
    );
    let back: TaskView = from_json(&text, "task").unwrap();
    assert_eq!(&back, view);
}

#[test]
fn a_cancel_report_is_derived_from_the_steps_and_the_effects() {
    let mut events = RUN.to_vec();
    events.push(r#"{"type":"step","atMs":7,"name":"publish","status":"running","attempt":1}"#);
    events.push(r#"{"type":"cancel","atMs":8}"#);
    events.push(r#"{"type":"ack_cancel","atMs":9,"attempt":1}"#);
    let task = task_with(&events);
    let report = task.view().cancel_report().unwrap();
    assert_eq!(report.finished, ["draft"]);
    assert_eq!(report.interrupted, ["publish"]);
    assert_eq!(report.not_run, ["notify"]);
    assert_eq!(report.effects.len(), 1);
    assert_eq!(report.effects[0].resource_id, "REP-7");
    assert_eq!(report.kept.len(), 1);
    assert_eq!(report.kept[0].0, "draft");
    // Only a cancelled task has one.
    assert!(task_with(&RUN).view().cancel_report().is_none());
}

#[test]
fn a_replay_starts_from_the_budget_alone() {
    let task = task_with(&RUN);
    let initial = task.view().initial();
    let ledger = initial.ledger.as_deref().unwrap();
    assert_eq!(ledger.budget.unwrap().max_tokens, Some(1000));
    assert!(ledger.reservations.is_empty() && ledger.effects.is_empty());
    let mut replay = initial;
    for entry in task.history() {
        assert!(replay.apply(&entry.event).changed);
    }
    assert_eq!(&replay, task.view());
}

#[test]
fn the_timeline_reads_each_change_with_its_step_attempt_duration_and_usage() {
    let mut events = RUN.to_vec();
    events.push(r#"{"type":"step","atMs":7,"name":"publish","status":"running","attempt":1}"#);
    events.push(r#"{"type":"fail","atMs":8,"error":"vendor 503","retryable":true,"attempt":1}"#);
    events.push(r#"{"type":"start","atMs":10,"worker":"w2","attempt":2}"#);
    events.push(r#"{"type":"step","atMs":11,"name":"publish","status":"running","attempt":2}"#);
    events.push(r#"{"type":"step","atMs":15,"name":"publish","status":"succeeded","attempt":2}"#);
    events.push(r#"{"type":"cancel","atMs":16}"#);
    events.push(r#"{"type":"ack_cancel","atMs":18,"attempt":2}"#);
    let task = task_with(&events);
    let lines = crate::timeline::timeline(task.view(), task.history());
    let kinds: Vec<&str> = lines.iter().map(|l| l.kind).collect();
    assert_eq!(
        kinds,
        [
            "attempt.started",
            "step.completed",
            "budget.reserved",
            "model.completed",
            "budget.reserved",
            "side_effect.completed",
            "step.started",
            "retry.scheduled",
            "attempt.started",
            "step.started",
            "step.completed",
            "cancel.requested",
            "job.cancelled",
        ]
    );
    let settled = &lines[3];
    assert_eq!(
        (settled.duration_ms, settled.usage.map(|u| u.tokens)),
        (Some(1.0), Some(120)),
        "the call's time is from its reservation"
    );
    let publish = &lines[10];
    assert_eq!(
        (publish.step, publish.attempt, publish.duration_ms),
        (Some("publish"), Some(2), Some(4.0)),
        "a step's end counts from its start in the same attempt"
    );
    assert_eq!(lines[7].detail, Some("vendor 503"));
    assert_eq!(lines[7].duration_ms, Some(7.0), "attempt 1 ran from 1 to 8");
    assert_eq!(
        lines[12].duration_ms,
        Some(8.0),
        "attempt 2 ran from 10 to 18"
    );

    let answer = crate::json::timeline_answer(task.view(), task.history());
    assert!(answer.starts_with(r#"{"taskId":"t","state":"cancelled","version":13,"entries":[{"version":1,"atMs":1,"kind":"attempt.started","attempt":1},"#), "{answer}");
    assert!(
        answer.ends_with(concat!(
            r#""cancelReport":{"finished":["draft","publish"],"interrupted":[],"notRun":["notify"],"#,
            r#""effects":[{"step":"publish","action":"post","resourceId":"REP-7","attempt":1}],"#,
            r#""kept":[{"step":"draft","outputRef":"s3://d","outputHash":"hd"}]}}"#
        )),
        "{answer}"
    );
}

#[test]
fn a_timeline_stops_where_the_history_has_a_gap() {
    let task = task_with(&RUN);
    let history = task.history();
    let with_gap: Vec<_> = history.iter().filter(|e| e.version != 3).cloned().collect();
    let lines = crate::timeline::timeline(task.view(), &with_gap);
    assert_eq!(lines.len(), 2, "versions 1 and 2, then the gap");
}

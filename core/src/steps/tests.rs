use super::*;
use crate::json::testing::{from_json, to_json};
use crate::Event;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_creation_plan_is_checked_field_by_field() {
    let err =
        |v: Option<&str>, s: Option<&[String]>| PlanInput::from_input(v, s).unwrap_err().message;
    assert!(err(Some("v1"), None).starts_with("steps: required"));
    assert!(err(None, Some(&names(&["a"]))).starts_with("workflowVersion: required"));
    assert!(err(Some(" "), Some(&names(&["a"]))).starts_with("workflowVersion: must not"));
    assert!(err(Some("v1"), Some(&names(&["a", " "]))).starts_with("steps[1]: must not"));
    assert!(err(Some("v1"), Some(&names(&["a", "b", "a"])))
        .starts_with("steps[2]: \"a\" is named twice"));
    assert!(err(Some("v1"), Some(&[])).starts_with("steps: must name 1 to 200"));
    assert_eq!(PlanInput::from_input(None, None).unwrap(), None);
}

#[test]
fn a_step_event_is_read_whole_and_written_back_the_same() {
    let text = r#"{"type":"step","atMs":5,"name":"load","status":"succeeded","label":"1/2","usage":{"tokens":10,"costCents":2,"toolCalls":1},"outputRef":"s3://o","outputHash":"h","attempt":1}"#;
    let event: Event = from_json(text, "event").unwrap();
    assert_eq!(to_json(&event), text);
}

#[test]
fn a_step_event_refuses_pending_and_a_checkpoint_off_success() {
    let bad = [
        (
            r#"{"type":"step","atMs":5,"name":"a","status":"pending"}"#,
            "status",
        ),
        (
            r#"{"type":"step","atMs":5,"name":" ","status":"running"}"#,
            "name",
        ),
        (
            r#"{"type":"step","atMs":5,"name":"a","status":"done"}"#,
            "status",
        ),
        (
            r#"{"type":"step","atMs":5,"name":"a","status":"failed","outputRef":"r","outputHash":"h"}"#,
            "outputRef",
        ),
        (
            r#"{"type":"step","atMs":5,"name":"a","status":"succeeded","outputRef":"r"}"#,
            "outputHash",
        ),
        (
            r#"{"type":"step","atMs":5,"name":"a","status":"running","usage":{"tokens":-1}}"#,
            "usage.tokens",
        ),
        (
            r#"{"type":"start","atMs":5,"worker":"w","workflowVersion":"v","steps":["a","a"]}"#,
            "steps[1]",
        ),
        (
            r#"{"type":"start","atMs":5,"worker":"w","steps":["a"]}"#,
            "workflowVersion",
        ),
    ];
    for (text, field) in bad {
        let err = from_json::<Event>(text, "event").unwrap_err();
        assert!(err.message.contains(field), "{text}: {}", err.message);
    }
}

#[test]
fn progress_is_the_share_of_finished_steps_rounded_down() {
    let plan = PlanInput::from_input(Some("v"), Some(&names(&["a", "b", "c"])))
        .unwrap()
        .unwrap();
    let mut kept = plan.to_plan();
    assert_eq!(kept.percent_done(), 0);
    kept.steps[0].status = StepStatus::Succeeded;
    kept.steps[1].status = StepStatus::Skipped;
    assert_eq!(kept.percent_done(), 66);
    assert_eq!(kept.resume_at(), Some("c"));
    assert!(kept.is(&plan));
}

#[test]
fn the_hand_written_writers_match_the_serde_ones() {
    use crate::json::write;
    let texts = [
        r#"{"type":"start","atMs":1,"worker":"w","attempt":1,"leaseMs":500,"workflowVersion":"v1","steps":["load","classify"]}"#,
        r#"{"type":"step","atMs":2,"name":"load","status":"running","label":"1/2","attempt":1}"#,
        r#"{"type":"step","atMs":3,"name":"load","status":"succeeded","usage":{"tokens":5,"costCents":1,"toolCalls":0},"outputRef":"o","outputHash":"h","attempt":1}"#,
    ];
    let mut view = crate::create_task(&crate::CreateTask {
        workflow_version: Some("v1".into()),
        steps: Some(names(&["load", "classify"])),
        ..crate::CreateTask::new("t", 0.0, 1e6, 2)
    })
    .unwrap()
    .view()
    .clone();
    for text in texts {
        let event: Event = from_json(text, "event").unwrap();
        assert_eq!(write(&event), to_json(&event), "{text}");
        assert!(view.apply(&event).changed, "{text}");
        assert_eq!(write(&view), to_json(&view));
    }
    assert!(write(&view).contains(r#""steps":[{"name":"load","status":"succeeded","attempt":1,"label":"1/2","usage":{"tokens":5,"costCents":1,"toolCalls":0},"outputRef":"o","outputHash":"h"},{"name":"classify","status":"pending"}]"#));
}

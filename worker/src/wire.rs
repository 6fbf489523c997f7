//! The bodies the worker sends and reads, through taskwire-wire (the
//! workspace's one JSON reader and writer).
//!
//! - A report's body is core's [`Event`] plus `taskId`, written by the
//!   same writer, in the same order, as the server's own executor writes
//!   it (`taskId` first, then the event's fields).
//! - A claim answer's tasks are read with core's [`TaskView`] reader, so
//!   a task the state machine could not have produced is refused here
//!   too; `input` is kept as the exact text the server sent (its numbers
//!   keep their digits).

use serde::{Deserialize, Serialize};
use taskwire_core::{Directive, Event, TaskView};
use taskwire_wire::exact;

/// `POST /v1/work/claim`'s body.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClaimRequest<'a> {
    pub(crate) worker: &'a str,
    pub(crate) kinds: &'a [String],
    pub(crate) max: usize,
    pub(crate) wait_ms: u64,
    pub(crate) lease_ms: u64,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub(crate) workflow_versions: &'a [String],
}

/// One claimed task.
#[derive(Debug, Clone)]
pub(crate) struct Claimed {
    pub(crate) view: TaskView,
    pub(crate) kind: String,
    /// `input` as sent, or `None` when the task has none.
    pub(crate) input: Option<String>,
    /// The whole task as the server sent it.
    pub(crate) raw: String,
    /// When its lease ends, on the server's clock (`lease.expiresAtMs`).
    pub(crate) lease_expires_at_ms: Option<f64>,
}

/// A claim's answer.
#[derive(Debug)]
pub(crate) struct ClaimAnswer {
    pub(crate) tasks: Vec<Claimed>,
    /// The server's clock when it answered.
    pub(crate) now_ms: Option<f64>,
}

/// The parts of a claimed task that are not in [`TaskView`].
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Extras {
    kind: Option<String>,
    lease: Option<LeaseFields>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct LeaseFields {
    expires_at_ms: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Now {
    now_ms: Option<f64>,
}

/// Reads a claim answer; the error names the field at fault.
pub(crate) fn read_claim(text: &str) -> Result<ClaimAnswer, String> {
    let err = |e: taskwire_core::json::Error, what: &str| e.to_error(what).message;
    let members = exact::members(text).map_err(|e| err(e, "answer"))?;
    let now: Now = taskwire_wire::from_json_serde(text, "answer").map_err(|e| e.message)?;
    let tasks_text = members
        .iter()
        .find(|(k, _)| k == "tasks")
        .map(|(_, v)| *v)
        .ok_or("answer.tasks: required")?;
    let items = exact::elements(tasks_text)
        .map_err(|e| err(e, "answer.tasks"))?
        .ok_or("answer.tasks: must be an array")?;
    let mut tasks = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let what = format!("answer.tasks[{i}]");
        let view: TaskView = taskwire_wire::from_json(item, &what).map_err(|e| e.message)?;
        let extras: Extras = taskwire_wire::from_json_serde(item, &what).map_err(|e| e.message)?;
        let input = exact::members(item)
            .map_err(|e| err(e, &what))?
            .into_iter()
            .find(|(k, _)| k == "input")
            .map(|(_, v)| v.to_string())
            .filter(|v| v != "null");
        tasks.push(Claimed {
            view,
            kind: extras.kind.unwrap_or_default(),
            input,
            raw: item.to_string(),
            lease_expires_at_ms: extras.lease.and_then(|l| l.expires_at_ms),
        });
    }
    Ok(ClaimAnswer {
        tasks,
        now_ms: now.now_ms,
    })
}

/// The part of a callback's answer the worker decides by: `next`, and
/// whether the report was taken (`changed`, `duplicate`); `reason` only
/// names a refusal, never decides.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ReplyFields {
    next: Option<String>,
    changed: bool,
    duplicate: bool,
    reason: Option<String>,
    resource_id: Option<String>,
}

/// A callback's answer, as the worker reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// What the attempt does now.
    pub next: Directive,
    /// The answer's `reason` when the report was refused
    /// ([`taskwire_core::work::report_taken`] says it was not taken).
    pub refused: Option<String>,
    /// For an `effect`: the resource id recorded first under its key.
    pub resource_id: Option<String>,
}

/// Reads a callback answer. An unknown or missing `next` is an error,
/// never a silent "continue".
pub(crate) fn read_reply(text: &str) -> Result<Reply, String> {
    let f: ReplyFields = taskwire_wire::from_json_serde(text, "answer").map_err(|e| e.message)?;
    // Core's spelling of each directive: the one the server writes.
    let all = [Directive::Continue, Directive::Cancel, Directive::Stop];
    let next = match f.next.as_deref() {
        Some(text) => all
            .into_iter()
            .find(|d| d.as_str() == text)
            .ok_or_else(|| {
                format!("answer.next: unknown value \"{text}\", expected continue, cancel or stop")
            })?,
        None => return Err("answer.next: required (a server without §Workers?)".into()),
    };
    let refused = match taskwire_core::work::report_taken(f.changed, f.duplicate) {
        true => None,
        false => Some(f.reason.unwrap_or_default()),
    };
    Ok(Reply {
        next,
        refused,
        resource_id: f.resource_id,
    })
}

/// A report's body: `taskId`, then the event's fields.
pub(crate) fn callback_body(task_id: &str, event: &Event) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        task_id: &'a str,
        #[serde(flatten)]
        event: &'a Event,
    }
    taskwire_wire::to_json(&Body { task_id, event })
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_core::{Millis, Percent};

    #[test]
    fn a_claim_names_its_workflow_versions_only_when_it_has_some() {
        let kinds = ["summary".to_string()];
        let claim = |versions: &[String]| {
            taskwire_wire::to_json(&ClaimRequest {
                worker: "w",
                kinds: &kinds,
                max: 1,
                wait_ms: 0,
                lease_ms: 30_000,
                workflow_versions: versions,
            })
        };
        assert_eq!(
            claim(&[]),
            r#"{"worker":"w","kinds":["summary"],"max":1,"waitMs":0,"leaseMs":30000}"#
        );
        assert!(
            claim(&["v2".to_string()]).ends_with(r#""leaseMs":30000,"workflowVersions":["v2"]}"#)
        );
    }

    #[test]
    fn a_report_is_task_id_then_the_event() {
        let event = Event::Progress {
            at_ms: Millis::new(6400.0, "atMs").unwrap(),
            progress: Percent::new(25.0, "progress").unwrap(),
            cursor: "c25".into(),
            attempt: Some(2),
        };
        assert_eq!(
            callback_body("tsk_1", &event),
            r#"{"taskId":"tsk_1","type":"progress","atMs":6400,"progress":25,"cursor":"c25","attempt":2}"#
        );
    }

    #[test]
    fn a_claim_answer_keeps_the_input_text() {
        let text = r#"{"tasks":[{"id":"t1","state":"running","expiresAtMs":9e12,"attempts":2,"maxAttempts":3,"progress":0,"version":5,"kind":"summary","input":{"n":9007199254740993},"decision":"request_changes","decisionVersion":4,"decisionReason":"shorter","lease":{"attempt":2,"expiresAtMs":1,"leaseMs":30000}}],"nowMs":1764409200123}"#;
        let answer = read_claim(text).unwrap();
        assert_eq!(answer.now_ms, Some(1764409200123.0));
        let t = &answer.tasks[0];
        assert_eq!(t.kind, "summary");
        assert_eq!(t.input.as_deref(), Some(r#"{"n":9007199254740993}"#));
        assert_eq!(t.view.attempts, 2);
        assert_eq!(t.lease_expires_at_ms, Some(1.0));
        let decision = t.view.decision.as_ref().unwrap();
        assert_eq!(decision.reason.as_deref(), Some("shorter"));
    }

    #[test]
    fn a_bad_claim_answer_names_the_field() {
        let e = read_claim(r#"{"tasks":[{"id":"t1"}],"nowMs":1}"#).unwrap_err();
        assert!(e.contains("answer.tasks[0]"), "{e}");
    }

    #[test]
    fn next_is_read_strictly() {
        assert_eq!(
            read_reply(r#"{"next":"cancel","changed":true,"reason":"x"}"#).unwrap(),
            Reply {
                next: Directive::Cancel,
                refused: None,
                resource_id: None,
            }
        );
        assert_eq!(
            read_reply(
                r#"{"next":"continue","changed":false,"duplicate":false,"reason":"unknown-step"}"#
            )
            .unwrap()
            .refused
            .as_deref(),
            Some("unknown-step")
        );
        assert!(read_reply(r#"{"next":"later"}"#)
            .unwrap_err()
            .contains("answer.next"));
        assert!(read_reply(r#"{"reason":"progress"}"#).is_err());
    }
}

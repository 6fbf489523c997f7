//! An executor's event as an outside executor writes it, for the
//! callbacks this crate sends itself: the demo's executor and the load
//! tool. Loosely typed on purpose (core's `Event` holds only valid
//! values, and has no event without its time): a plan holds events
//! before their time is stamped, and the server, not the sender, judges
//! what was sent.

use serde::Serialize;
use taskwire_core::EventKind;

/// One event, written as PROTOCOL.md shows it: `type`, `atMs`, the
/// kind's fields, then `attempt` and `leaseMs` (core's own order); fields
/// left `None` are not sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorEvent {
    /// `start`, `progress`, …
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// When it happened (stamped when sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<f64>,
    /// `start`: who picked the task up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// `progress`: percent done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<u64>,
    /// `progress`: the executor's resume point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// `succeed`: where the result is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_ref: Option<String>,
    /// `succeed`: the result's content hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_hash: Option<String>,
    /// `fail`: what went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `fail`: whether another attempt may help.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// `hold`: the artifact to decide on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_ref: Option<String>,
    /// `hold`: its content hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_hash: Option<String>,
    /// `hold`: what the person is asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// `cannot_cancel`: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The attempt the event belongs to (the fencing token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u64>,
    /// `start`, `heartbeat`: the lease asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

impl ExecutorEvent {
    /// An event of `kind` with no field set.
    pub fn new(kind: EventKind) -> Self {
        ExecutorEvent {
            kind,
            at_ms: None,
            worker: None,
            progress: None,
            cursor: None,
            result_ref: None,
            result_hash: None,
            error: None,
            retryable: None,
            artifact_ref: None,
            artifact_hash: None,
            question: None,
            reason: None,
            attempt: None,
            lease_ms: None,
        }
    }

    /// `start` by `worker`.
    pub fn start(worker: &str) -> Self {
        ExecutorEvent {
            worker: Some(worker.to_string()),
            ..Self::new(EventKind::Start)
        }
    }

    /// `progress` at `percent`, with the executor's `cursor`.
    pub fn progress(percent: u64, cursor: &str) -> Self {
        ExecutorEvent {
            progress: Some(percent),
            cursor: Some(cursor.to_string()),
            ..Self::new(EventKind::Progress)
        }
    }

    /// `succeed` with the result's place and hash.
    pub fn succeed(result_ref: &str, result_hash: &str) -> Self {
        ExecutorEvent {
            result_ref: Some(result_ref.to_string()),
            result_hash: Some(result_hash.to_string()),
            ..Self::new(EventKind::Succeed)
        }
    }

    /// `fail`, retryable or not.
    pub fn fail(error: &str, retryable: bool) -> Self {
        ExecutorEvent {
            error: Some(error.to_string()),
            retryable: Some(retryable),
            ..Self::new(EventKind::Fail)
        }
    }

    /// The same event, happened at `at_ms`.
    pub fn at(self, at_ms: f64) -> Self {
        ExecutorEvent {
            at_ms: Some(at_ms),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_core::Event;
    use taskwire_wire::{from_json, to_json};

    #[test]
    fn written_as_core_writes_the_same_event() {
        let mut started = ExecutorEvent::start("w").at(5.0);
        started.attempt = Some(2);
        started.lease_ms = Some(1_500);
        let events = [
            started,
            ExecutorEvent::progress(25, "c25").at(6400.0),
            ExecutorEvent::succeed("blob://r", "sha256:ab").at(7.0),
            ExecutorEvent::fail("quota", true).at(8.0),
        ];
        for event in events {
            let text = to_json(&event);
            let core: Event = from_json(&text, "event").unwrap();
            assert_eq!(to_json(&core), text);
        }
    }
}

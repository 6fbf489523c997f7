//! What a [`Follow`](super::Follow) asks of its executor and tells the
//! page: requests to send, and events for the page's listeners.

use alloc::{string::String, vec::Vec};
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::mirror::{Rejection, UpdateReason};
use crate::resume::ResumeMode;
use crate::task::{HistoryEntry, State, TaskView};

/// Long-poll or Server-Sent Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `GET …/resume?cursor=N&waitMs=M`, again and again.
    LongPoll,
    /// `GET …/events` with `Last-Event-ID`, read as a stream.
    Sse,
}

/// Names one request, so that an answer that arrives after the follow
/// moved on (it was aborted, timed out, or replaced) is recognised and
/// ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// What a request is for; it decides the `Accept` header and how the
/// answer is fed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A long-poll resume: feed the body to `handle_body`.
    Poll,
    /// A resume with `snapshot=1` (not held): feed the body to `handle_body`.
    Snapshot,
    /// An SSE stream: feed each chunk to `handle_chunk`, then `handle_end`.
    Stream,
}

/// One `GET` to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Quote it in every `handle_*` call about this request.
    pub id: RequestId,
    /// What it is for.
    pub kind: RequestKind,
    /// The path under the base URL, the task id percent-encoded:
    /// `/v1/tasks/tsk_1/resume`.
    pub path: String,
    /// The query without `?` (empty for a stream): `cursor=3&waitMs=25000`.
    pub query: String,
    /// `Last-Event-ID` for a stream.
    pub last_event_id: Option<u64>,
    /// How long it may take before the follow aborts it (through
    /// `poll_abort`, at a deadline of `poll_timeout`). An executor need not
    /// enforce it; it may, if its runtime has native request timeouts.
    pub timeout_ms: Option<u32>,
}

impl Request {
    /// The `Accept` header.
    pub fn accept(&self) -> &'static str {
        match self.kind {
            RequestKind::Stream => "text/event-stream",
            RequestKind::Poll | RequestKind::Snapshot => "application/json",
        }
    }

    /// The full URL under `base` (its trailing slashes ignored).
    pub fn url(&self, base: &str) -> String {
        let mut url = String::from(super::request::trim_slashes(base));
        url.push_str(&self.path);
        if !self.query.is_empty() {
            url.push_str("?");
            url.push_str(&self.query);
        }
        url
    }
}

/// Why a request produced no usable answer, as the executor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure<'a> {
    /// The request or the body read failed; the runtime's message.
    Network(&'a str),
    /// A stream's response has no readable body.
    NoBody,
}

/// The connection state, for an indicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnState {
    /// Before the first answer.
    Connecting,
    /// Answers arrive.
    Live,
    /// Waiting out a backoff delay, or falling back to long-poll.
    Reconnecting,
    /// The runtime says it is offline: no request is made.
    Offline,
    /// The follow ended (terminal task, fatal answer, or stop).
    Closed,
}

/// `onStatus`'s payload. Repeats of a plain state are not reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The state.
    pub state: ConnState,
    /// Consecutive failures, when reconnecting after one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The delay before the next attempt (whole ms), when reconnecting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<f64>,
    /// What went wrong, for humans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `onUpdate`'s payload: the version rose.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Update {
    /// The task after the answer (without history).
    pub task: Option<TaskView>,
    /// The answer's mode.
    pub mode: ResumeMode,
    /// The versions applied.
    pub applied: Vec<u64>,
    /// The history entries applied (a delta's; empty for a snapshot).
    pub events: Vec<HistoryEntry>,
    /// Everything refused since the previous update.
    pub rejected: Vec<Rejection>,
    /// Set when the task was started over from a snapshot of another
    /// epoch (`"epoch-changed"`): the server's history changed, and the
    /// task may have gone back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<UpdateReason>,
}

/// `onReject`'s payload: an answer was (partly) refused and the version
/// did not rise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reject {
    /// In a batch: the task whose answer was refused; `None` when the
    /// batch answer was refused whole (`version` is then the batch
    /// cursor held). Always `None` for a single task.
    #[serde(rename = "taskId", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The answer's mode.
    pub mode: ResumeMode,
    /// What was refused.
    pub rejected: Vec<Rejection>,
    /// The version held (unchanged); for a whole batch answer, the batch
    /// cursor held.
    pub version: u64,
}

/// `onProgress`'s payload: a batch as a whole, reported when it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchProgress {
    /// How many tasks the batch has.
    pub size: u64,
    /// How many of them are terminal.
    pub terminal: u64,
    /// How many are in each state, in [`State::ALL`]'s order.
    pub counts: [u64; 11],
    /// The mean of the tasks' progress (0 to 100), a terminal task
    /// counting 100 whatever its own.
    pub progress: f64,
}

impl BatchProgress {
    /// The aggregate of `tasks`' known views.
    pub fn of<'a>(tasks: impl Iterator<Item = &'a TaskView>) -> BatchProgress {
        let mut p = BatchProgress {
            size: 0,
            terminal: 0,
            counts: [0; 11],
            progress: 0.0,
        };
        let mut sum = 0.0;
        for task in tasks {
            p.size += 1;
            if let Some(n) = p.counts.get_mut(task.state as usize) {
                *n += 1;
            }
            if task.state.is_terminal() {
                p.terminal += 1;
                sum += 100.0;
            } else {
                sum += f64::from(task.progress);
            }
        }
        if p.size > 0 {
            p.progress = sum / p.size as f64;
        }
        p
    }
}

impl Serialize for BatchProgress {
    /// `{"size","terminal","counts":{"queued":n,…every state},"progress"}`.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Counts<'a>(&'a [u64; 11]);
        impl Serialize for Counts<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(11))?;
                for (state, n) in State::ALL.iter().zip(self.0) {
                    map.serialize_entry(state.as_str(), n)?;
                }
                map.end()
            }
        }
        let mut st = s.serialize_struct("BatchProgress", 4)?;
        st.serialize_field("size", &self.size)?;
        st.serialize_field("terminal", &self.terminal)?;
        st.serialize_field("counts", &Counts(&self.counts))?;
        st.serialize_field("progress", &self.progress)?;
        st.end()
    }
}

/// Why a follow ended without a terminal task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailCode {
    /// 401: the credentials were refused.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 404: no such task or batch (or another tenant's).
    NotFound,
    /// `stop()` was called first.
    Stopped,
}

impl FailCode {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailCode::Unauthorized => "unauthorized",
            FailCode::Forbidden => "forbidden",
            FailCode::NotFound => "not-found",
            FailCode::Stopped => "stopped",
        }
    }
}

/// The follow ended without a terminal task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fail {
    /// Why.
    pub code: FailCode,
    /// For humans.
    pub message: String,
    /// The HTTP status (0 for `stopped`).
    pub status: u16,
}

/// What happened, for the page, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowEvent {
    /// The connection state changed.
    Status(Status),
    /// The version rose.
    Update(Update),
    /// An answer was refused without the version rising.
    Reject(Reject),
    /// A batch's aggregate changed.
    Progress(BatchProgress),
    /// The task is terminal (or every task of the batch: then `None`, the
    /// tasks came in their updates): the follow is over.
    Done(Option<TaskView>),
    /// The follow is over without a terminal task.
    Fail(Fail),
}

//! What one answer comes to, and what the follow does next: the decisions
//! of the watch loop, each in one place.

use super::output::{ConnState, Fail, FailCode, FollowEvent, Status};
use super::{Flight, Follow, Phase, Transport, SHORT_SSE_LIMIT, SHORT_SSE_MS};
use crate::mirror::Next;
use alloc::{string::String, vec::Vec};

/// What one exchange came to.
#[derive(Debug)]
pub(super) enum Step {
    /// A usable answer (which may or may not have changed anything).
    Answered,
    /// Ask again at once (e.g. for a snapshot).
    Again,
    /// The task is terminal.
    Done,
    /// Give up: 401, 403, 404.
    Fatal {
        code: FailCode,
        status: u16,
        message: String,
    },
    /// Retry after a backoff delay, at least `floor_ms`.
    Retry {
        error: String,
        floor_ms: Option<f64>,
    },
}

impl Step {
    pub(super) fn retry(error: &str, floor_ms: Option<f64>) -> Step {
        Step::Retry {
            error: String::from(error),
            floor_ms,
        }
    }
}

/// The words joined (`concat` costs the page ~0.4 KB of wasm).
pub(super) fn words(parts: [&str; 3]) -> String {
    let mut out = String::new();
    for part in parts {
        out.push_str(part);
    }
    out
}

/// Maps a non-200 status to its step; `noun` names what is followed
/// (`task`, `batch`).
pub(super) fn classify(status: u16, retry_after_ms: Option<f64>, noun: &str) -> Step {
    let fatal = |code, parts: [&str; 3]| Step::Fatal {
        code,
        status,
        message: words(parts),
    };
    match status {
        401 => fatal(
            FailCode::Unauthorized,
            ["the server refused the credentials (401)", "", ""],
        ),
        403 => fatal(
            FailCode::Forbidden,
            ["the server forbids this ", noun, " (403)"],
        ),
        404 => fatal(
            FailCode::NotFound,
            ["the server has no such ", noun, " (404)"],
        ),
        429 | 503 => {
            let mut error = String::from("the server is busy (");
            crate::text::push_u64(&mut error, u64::from(status));
            error.push_str(")");
            Step::Retry {
                error,
                floor_ms: retry_after_ms,
            }
        }
        _ => {
            let mut error = String::from("unexpected HTTP status ");
            crate::text::push_u64(&mut error, u64::from(status));
            Step::Retry {
                error,
                floor_ms: None,
            }
        }
    }
}

impl Follow {
    /// Merges one answer (of a task or a batch: the target reads it) and
    /// decides what comes of it. `unheld`: it answers a long-poll the
    /// server did not hold.
    pub(super) fn merge(&mut self, text: &str, snapshot_request: bool, unheld: bool) -> Step {
        let mut events = Vec::new();
        let merged = match self.target.merge(text, &self.config, &mut events) {
            Ok(merged) => merged,
            Err(e) => {
                let mut error = String::from("bad answer from the server: ");
                error.push_str(&e.message);
                return Step::Retry {
                    error,
                    floor_ms: None,
                };
            }
        };
        if merged.next == Next::Snapshot {
            self.need_snapshot = true;
        } else if snapshot_request {
            self.need_snapshot = false;
        }
        self.status(ConnState::Live, None, None, None);
        self.events.append(&mut events);
        if merged.done && merged.next == Next::None {
            return Step::Done;
        }
        if merged.next == Next::Snapshot {
            // A snapshot that is itself refused (a wrong or regressing
            // server) must not turn into a tight loop: back off.
            if snapshot_request && !merged.changed {
                return Step::retry("the server's snapshot was refused", None);
            }
            return Step::Again;
        }
        if !merged.changed && merged.rejected {
            // Nothing new and something refused: a stale replay (a cache, a
            // lagging replica). A server that keeps answering like that
            // must not be asked again at once, in a tight loop.
            return Step::retry("the server's answer was stale", None);
        }
        if !merged.changed && unheld {
            // Nothing new, at once: a server that ignores `waitMs`, or a
            // cache or replica that answers for it. Asking again at once
            // would be a tight loop (the simulation found one).
            return Step::retry(
                "the server answered at once without holding the long-poll",
                None,
            );
        }
        Step::Answered
    }

    /// A stream ended (normally, broken, aborted by the follow): counts
    /// short streams, falls back to long-poll after too many, and decides
    /// whether to reconnect at once or back off.
    pub(super) fn end_stream(&mut self, flight: Flight, outcome: Step, t: f64) {
        if matches!(outcome, Step::Done | Step::Fatal { .. }) {
            return self.finish(outcome, t);
        }
        let lived_ms = t - flight.started;
        let lasted = flight.messages > 0 && lived_ms >= SHORT_SSE_MS;
        self.short_streams = if lasted { 0 } else { self.short_streams + 1 };
        if self.short_streams >= SHORT_SSE_LIMIT {
            self.transport = Transport::LongPoll;
            self.status(
                ConnState::Reconnecting,
                None,
                None,
                Some("the event stream keeps ending early (a buffering proxy?): falling back to long-poll"),
            );
            return self.finish(Step::Again, t);
        }
        let step = match outcome {
            // A stream that ended normally after real messages: reconnect at once.
            Step::Answered if lasted => Step::Answered,
            Step::Answered => Step::retry("the event stream ended early", None),
            other => other,
        };
        self.finish(step, t);
    }

    /// Acts on a step: the next request, a backoff wait, or the end.
    pub(super) fn finish(&mut self, step: Step, t: f64) {
        match step {
            Step::Answered => {
                self.failures = 0;
                self.advance(t);
            }
            Step::Again => self.advance(t),
            Step::Done => {
                self.finished = true;
                self.phase = Phase::Closed;
                self.events.push(self.target.done_event());
                self.status(ConnState::Closed, None, None, None);
            }
            Step::Fatal {
                code,
                status,
                message,
            } => {
                self.finished = true;
                self.phase = Phase::Closed;
                self.events.push(FollowEvent::Fail(Fail {
                    code,
                    message: message.clone(),
                    status,
                }));
                self.status(ConnState::Closed, None, None, Some(&message));
            }
            Step::Retry { error, floor_ms } => {
                self.failures = self.failures.saturating_add(1);
                let random = self.jitter.draw();
                let delay = self.config.backoff.delay(self.failures, random, floor_ms);
                self.status(
                    ConnState::Reconnecting,
                    Some(self.failures),
                    Some(crate::value::round(delay)),
                    Some(&error),
                );
                self.phase = Phase::Waiting { until: t + delay };
            }
        }
    }

    /// Reports a status, unless it repeats a plain state.
    pub(super) fn status(
        &mut self,
        state: ConnState,
        attempt: Option<u32>,
        retry_in_ms: Option<f64>,
        error: Option<&str>,
    ) {
        if self.last_state == Some(state) && attempt.is_none() && error.is_none() {
            return;
        }
        self.last_state = Some(state);
        self.events.push(FollowEvent::Status(Status {
            state,
            attempt,
            retry_in_ms,
            error: error.map(String::from),
        }));
    }
}

//! One attempt's reports: signed callbacks carrying `attempt`, and what
//! their answers' `next` means for the job.
//!
//! The reporter owns the attempt's view of its lease and its signal:
//!
//! - `next: "cancel"` fires the signal with [`StopReason::Cancel`]: the
//!   job stops and the worker answers `ack_cancel`;
//! - `next: "stop"` fires it with [`StopReason::Stop`]: the attempt is
//!   over (replaced, ended, the task terminal) and nothing more is sent;
//! - a report that could not be delivered before the lease could have run
//!   out fires it with [`StopReason::LeaseLost`]: the server has given up
//!   on this attempt or soon will, so nothing more is sent either;
//! - a report refused outright (400, 401 other than the clock, 404, 422,
//!   500) fires it with [`StopReason::Stop`]: no resend changes that.
//!
//! Reports of one attempt are sent one at a time, in order, and nothing is
//! sent after its last one (`succeed`, `fail`, `hold`, `ack_cancel`) or
//! after the attempt was stopped.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskwire_core::{Directive, Event, Millis};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::http::{Persist, SendError, Transport, REQUEST_TIMEOUT};
use crate::sign::random_id;
use crate::wire::{callback_body, read_reply, Reply};

/// Why a job's cancellation signal fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A person cancelled the task (`next: "cancel"`): the worker sends
    /// `ack_cancel` once the job returns.
    Cancel,
    /// The attempt is over (`next: "stop"`): another attempt took over, or
    /// the task ended. Nothing more is reported.
    Stop,
    /// No report reached the server before the lease could have run out:
    /// the attempt is presumed lost. Nothing more is reported.
    LeaseLost,
    /// The worker is shutting down and the grace period is over: the task
    /// is reported `fail`, retryable, so another worker takes it.
    Shutdown,
}

impl StopReason {
    /// `cancel`, `stop`, `lease-lost` or `shutdown`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Cancel => "cancel",
            StopReason::Stop => "stop",
            StopReason::LeaseLost => "lease-lost",
            StopReason::Shutdown => "shutdown",
        }
    }
}

/// A job's cancellation token and the reason it fired (the first reason
/// wins). The token is replaced by a fresh one when the job answers a
/// cancel with `cannot_cancel` and goes on ([`Signal::resume`]): a
/// `CancellationToken` cannot be un-fired.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<SignalState>,
}

#[derive(Default)]
struct SignalState {
    token: CancellationToken,
    why: Option<StopReason>,
}

impl Signal {
    fn state(&self) -> std::sync::MutexGuard<'_, SignalState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn fire(&self, why: StopReason) {
        let state = &mut *self.state();
        state.why.get_or_insert(why);
        state.token.cancel();
    }

    pub(crate) fn why(&self) -> Option<StopReason> {
        self.state().why
    }

    /// The current token.
    pub(crate) fn token(&self) -> CancellationToken {
        self.state().token.clone()
    }

    /// After a cancel only: a fresh token, no reason; false otherwise.
    pub(crate) fn resume(&self) -> bool {
        let state = &mut *self.state();
        if state.why != Some(StopReason::Cancel) {
            return false;
        }
        state.why = None;
        state.token = CancellationToken::new();
        true
    }
}

/// Whether a report renews the lease or ends the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `progress`, `heartbeat`: the lease runs on from its arrival.
    Renewing,
    /// `cannot_cancel`: the attempt goes on, its lease unchanged.
    Note,
    /// `succeed`, `fail`, `hold`, `ack_cancel`: the attempt's last word.
    Last,
}

/// Why an answer's `next` fires the job's signal after a report of
/// `kind`, if it does: `cancel` fires [`StopReason::Cancel`]; `stop` fires
/// [`StopReason::Stop`], except after the attempt's last word, to which
/// `stop` is the expected answer. Only `next` is read, never `reason`
/// (the shared vectors pin it: tests/vectors.rs).
pub(crate) fn signal_for(kind: Kind, next: Directive) -> Option<StopReason> {
    match (kind, next) {
        (_, Directive::Continue) | (Kind::Last, _) => None,
        (_, Directive::Cancel) => Some(StopReason::Cancel),
        (_, Directive::Stop) => Some(StopReason::Stop),
    }
}

/// Why a report was not delivered.
#[derive(Debug)]
pub(crate) enum ReportError {
    /// The attempt had already ended or been stopped: nothing was sent.
    Ended,
    /// The event could not be written (a bad value from the handler).
    Invalid(String),
    /// The server refused it, or it could not be delivered in time.
    Send(SendError),
    /// The server's answer could not be read.
    Answer(String),
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Ended => f.write_str("the attempt is over"),
            ReportError::Invalid(m) | ReportError::Answer(m) => f.write_str(m),
            ReportError::Send(e) => write!(f, "{e}"),
        }
    }
}

struct LeaseState {
    /// When the lease ends at the latest, as far as this worker knows: the
    /// last renewing report's send time plus the lease (the server counts
    /// from its arrival, which is later).
    until: Instant,
    ended: bool,
}

/// The reports of one attempt.
pub(crate) struct Reporter {
    transport: Arc<Transport>,
    pub(crate) task_id: String,
    pub(crate) attempt: u64,
    lease: Duration,
    pub(crate) signal: Signal,
    state: Mutex<LeaseState>,
    /// One report at a time, in order.
    sending: tokio::sync::Mutex<()>,
    /// The attempt's output streams (`output.rs`), flushed before its
    /// last report.
    pub(crate) outputs: Mutex<Vec<Arc<crate::output::Stream>>>,
}

impl Reporter {
    /// The reporter of an attempt whose lease ends at `lease_end` at the
    /// latest.
    pub(crate) fn new(
        transport: Arc<Transport>,
        task_id: String,
        attempt: u64,
        lease: Duration,
        lease_end: Instant,
    ) -> Self {
        Reporter {
            transport,
            task_id,
            attempt,
            lease,
            signal: Signal::default(),
            state: Mutex::new(LeaseState {
                until: lease_end,
                ended: false,
            }),
            sending: tokio::sync::Mutex::new(()),
            outputs: Mutex::new(Vec::new()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether nothing more will be sent for this attempt.
    pub(crate) fn ended(&self) -> bool {
        self.state().ended
    }

    /// The server's time now, as this worker knows it.
    pub(crate) fn now_ms(&self) -> f64 {
        self.transport.clock.now_ms()
    }

    /// When the lease could no longer be alive (as last renewed): output
    /// sends stop resending then.
    pub(crate) fn lease_until(&self) -> Instant {
        self.state().until
    }

    /// The connection to the server.
    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The lease, for heartbeats.
    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    /// Sends the event `make(atMs, attempt)` builds; the answer's `next`,
    /// and its reason when the report was refused.
    /// A 400 `clock-skew` (this worker's clock was off) has set the clock
    /// from the server's answer: the event is written again once, with
    /// the corrected time, under a new callback id.
    pub(crate) async fn report(
        &self,
        kind: Kind,
        make: impl Fn(Millis, u64) -> Result<Event, taskwire_core::Error>,
    ) -> Result<Reply, ReportError> {
        let _one_at_a_time = self.sending.lock().await;
        let until = {
            let mut state = self.state();
            if state.ended {
                return Err(ReportError::Ended);
            }
            if Instant::now() >= state.until {
                state.ended = true;
                drop(state);
                self.signal.fire(StopReason::LeaseLost);
                return Err(ReportError::Ended);
            }
            state.until
        };
        let mut rewritten = false;
        loop {
            let now = self.transport.clock.now_ms();
            let at = Millis::new(now, "atMs").map_err(|e| ReportError::Invalid(e.message))?;
            let event = make(at, self.attempt).map_err(|e| ReportError::Invalid(e.message))?;
            let body = callback_body(&self.task_id, &event);
            let path = format!("/v1/tasks/{}/callbacks", self.task_id);
            let persist = Persist {
                until: Some(until),
                timeout: REQUEST_TIMEOUT,
                resend: true,
            };
            let sent_at = Instant::now();
            match self
                .transport
                .post_signed(&path, &random_id("cb"), &body, persist)
                .await
            {
                Ok(text) => {
                    let reply = read_reply(&text).map_err(ReportError::Answer)?;
                    self.heard(kind, reply.next, sent_at);
                    return Ok(reply);
                }
                Err(SendError::Status {
                    status: 400, code, ..
                }) if code == "clock-skew" && !rewritten => {
                    rewritten = true;
                }
                Err(e @ SendError::GaveUp(_)) => {
                    self.state().ended = true;
                    self.signal.fire(StopReason::LeaseLost);
                    return Err(ReportError::Send(e));
                }
                Err(e) => {
                    // Refused outright (400, 401 other than the clock, 404,
                    // 422, 500): no resend changes that, and this attempt
                    // cannot report; it stops, as after `next: stop`.
                    self.state().ended = true;
                    self.signal.fire(StopReason::Stop);
                    return Err(ReportError::Send(e));
                }
            }
        }
    }

    /// What an answer's `next` changes: the lease, the signal, the end.
    fn heard(&self, kind: Kind, next: Directive, sent_at: Instant) {
        let fired = signal_for(kind, next);
        {
            let mut state = self.state();
            if kind == Kind::Last || fired == Some(StopReason::Stop) {
                state.ended = true;
            } else if kind == Kind::Renewing {
                // Still this worker's attempt (also while it winds down to
                // its `ack_cancel`): the lease runs on from the send.
                state.until = sent_at + self.lease;
            }
        }
        if let Some(why) = fired {
            self.signal.fire(why);
        }
    }

    /// `cannot_cancel`: the job goes on after a cancel it cannot honour.
    /// False (nothing sent) unless the signal fired for a cancel.
    pub(crate) async fn cannot_cancel(&self, reason: Option<&str>) -> Result<bool, ReportError> {
        if !self.signal.resume() {
            return Ok(false);
        }
        self.report(Kind::Note, |at_ms, attempt| {
            Ok(Event::CannotCancel {
                at_ms,
                reason: reason.map(str::to_string),
                attempt: Some(attempt),
            })
        })
        .await
        .map(|_| true)
    }

    /// `heartbeat` with the lease: renews it, and hears `next`.
    pub(crate) async fn heartbeat(&self) -> Result<Directive, ReportError> {
        let lease = self.lease.as_millis() as f64;
        self.report(Kind::Renewing, move |at_ms, attempt| {
            Ok(Event::Heartbeat {
                at_ms,
                attempt: Some(attempt),
                lease_ms: Some(Millis::new(lease, "leaseMs")?),
            })
        })
        .await
        .map(|reply| reply.next)
    }

    /// `fail`, retryable or not: the attempt's last word.
    pub(crate) async fn fail(
        &self,
        error: &str,
        retryable: bool,
    ) -> Result<Directive, ReportError> {
        self.report(Kind::Last, |at_ms, attempt| {
            Ok(Event::Fail {
                at_ms,
                error: error.to_string(),
                retryable,
                attempt: Some(attempt),
            })
        })
        .await
        .map(|reply| reply.next)
    }

    /// `ack_cancel`: the job stopped after a cancel.
    pub(crate) async fn ack_cancel(&self) -> Result<Directive, ReportError> {
        self.report(Kind::Last, |at_ms, attempt| {
            Ok(Event::AckCancel {
                at_ms,
                attempt: Some(attempt),
            })
        })
        .await
        .map(|reply| reply.next)
    }
}

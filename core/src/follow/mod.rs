//! Following one task, or one batch, from a client: the watch loop as a
//! sans-IO state machine.
//!
//! [`Follow`] decides everything a client's watch loop decides (which
//! request to send, how to read each HTTP status, when to back off and for
//! how long, when to ask for a snapshot, when SSE has to give way to
//! long-poll, which status changes the page hears about) and does none of
//! the I/O. Like quinn-proto's `Connection`, it never reads a clock, opens
//! a socket, sets a timer or draws a random number: time comes in as an
//! argument, inputs are `handle_*` calls, outputs are values the caller
//! polls, and the jitter comes from a seed. The browser executor
//! (`js/follow.js`, through `wasm/src/client`) and the native simulation
//! (`core/tests/follow_sim.rs`) drive the same code.
//!
//! A follow is of a task ([`Follow::new`]: `/v1/tasks/{id}/resume|events`,
//! the cursor is the task's version) or of a batch ([`Follow::batch`]:
//! `/v1/batches/{id}/resume|events`, the batch cursor, per-task answers);
//! the loop is one and the same, and only what `target.rs` and `batch.rs`
//! hold differs.
//!
//! Every answer is merged through a [`Mirror`] (each task of a batch
//! through its own, in a [`BatchMirror`]), so stale, duplicated or
//! divergent answers never reach the page, and no version it reports
//! ever goes back.
//!
//! ## Driving it
//! 1. [`Follow::new`] with the mirror to start from and the current time.
//! 2. After creating it and after every input, drain the outputs in this
//!    order: [`poll_event`](Follow::poll_event) (give each event to the
//!    page; a listener may call [`stop`](Follow::stop)), then
//!    [`poll_abort`](Follow::poll_abort) (abort those requests), then
//!    [`poll_request`](Follow::poll_request) (send it), then arm one timer
//!    for [`poll_timeout`](Follow::poll_timeout), replacing the previous one.
//! 3. Feed what happens: a response head ([`handle_head`](Follow::handle_head)),
//!    a long-poll body ([`handle_body`](Follow::handle_body)), stream chunks
//!    ([`handle_chunk`](Follow::handle_chunk)) and their end
//!    ([`handle_end`](Follow::handle_end)), a failure
//!    ([`handle_failure`](Follow::handle_failure)), the timer
//!    ([`handle_timeout`](Follow::handle_timeout)), `online`/`offline`
//!    events ([`handle_network`](Follow::handle_network)), the page becoming
//!    visible ([`handle_visibility`](Follow::handle_visibility)), and
//!    [`stop`](Follow::stop). Before each, report the runtime's network
//!    reading with [`set_online`](Follow::set_online) if it has one
//!    (`navigator.onLine`); it is read when the next request is decided.
//!
//! Inputs about a request the follow no longer waits for (it aborted or
//! replaced it) are ignored, so the executor never has to tell an abort's
//! own error from a real one. `now` is the wall clock in ms (`Date.now()`);
//! when it jumps back, no time is taken to have passed, and the timer
//! firing is trusted to mean its deadline has come.

mod backoff;
mod batch;
mod input;
mod output;
mod request;
pub mod sse;
mod step;
mod target;

pub use backoff::{http_date_ms, retry_after_ms, Backoff, DateReader, Jitter};
pub use batch::BatchReader;
pub use output::{
    BatchProgress, ConnState, Fail, FailCode, Failure, FollowEvent, Reject, Request, RequestId,
    RequestKind, Status, Transport, Update,
};
pub use request::{encode_segment, trim_slashes};

use crate::batch::BatchMirror;
use crate::mirror::Mirror;
use crate::resume::EpochAnswer;
use alloc::{string::String, vec::Vec};
use target::{Target, TaskTarget};

/// After this many SSE connections in a row that delivered nothing (or
/// died within a second), the path is assumed to buffer (a proxy holding
/// the stream back) and the follow falls back to long-poll.
pub const SHORT_SSE_LIMIT: u32 = 3;
/// An SSE connection whose first message (the server sends one at once)
/// has not arrived by then is assumed to be buffered.
pub const SSE_FIRST_MESSAGE_MS: f64 = 10_000.0;
/// A stream silent this long after its first message (no message, no
/// heartbeat: the reference server sends one every 15 s) is presumed dead.
/// Without it, a stream stranded on a connection that died silently
/// (the network changed without an `online` event) would hang forever;
/// the simulation found that.
pub const SSE_IDLE_MS: f64 = 45_000.0;
/// A stream that lived less than this is short.
pub const SHORT_SSE_MS: f64 = 1_000.0;
/// Extra time a long-poll may take beyond `waitMs` before it is presumed
/// dead (a silently dropped connection never errors by itself).
pub const POLL_GRACE_MS: u32 = 15_000;
/// While offline, the network reading is looked at again this often, in
/// case an `online` event is missed.
pub const OFFLINE_RECHECK_MS: f64 = 5_000.0;
/// The longest long-poll a server may hold (PROTOCOL.md).
pub const MAX_WAIT_MS: u32 = 30_000;

/// How a follow behaves.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    /// Delays between failed attempts.
    pub backoff: Backoff,
    /// Long-poll or SSE (SSE falls back to long-poll by itself).
    pub transport: Transport,
    /// How long the server may hold a long-poll, ≤ [`MAX_WAIT_MS`].
    pub wait_ms: u32,
    /// Seeds the jitter of the backoff delays.
    pub seed: u64,
    /// Reads the HTTP dates of `Retry-After`.
    pub read_date: DateReader,
    /// Reads a resume answer from JSON text (a browser executor lets
    /// `JSON.parse` do it: the page then carries no JSON text parser).
    pub read_answer: AnswerReader,
    /// Reads a batch answer from JSON text, likewise.
    pub read_batch: BatchReader,
}

/// Reads a resume answer and its epoch from JSON text; errors name the
/// field.
pub type AnswerReader = fn(&str) -> Result<EpochAnswer, crate::Error>;

impl FollowConfig {
    /// The default settings (long-poll, a 25 s wait, the default
    /// backoff, seed 0, RFC 9110 dates) with the embedder's readers of
    /// answer text. Core has no text parser: `taskwire-wire` brings one
    /// (`taskwire_wire::follow_config()`), and the browser page reads
    /// through `JSON.parse` so that it carries none.
    pub fn new(read_answer: AnswerReader, read_batch: BatchReader) -> Self {
        FollowConfig {
            backoff: Backoff::default(),
            transport: Transport::LongPoll,
            wait_ms: 25_000,
            seed: 0,
            read_date: http_date_ms,
            read_answer,
            read_batch,
        }
    }
}

/// One task, or one batch, followed until it is over (the task, or every
/// task of the batch, terminal), refused, or stopped. See the module docs
/// for the order of calls.
#[derive(Debug)]
pub struct Follow {
    config: FollowConfig,
    target: Target,
    /// `/v1/tasks/{id}` or `/v1/batches/{id}`, the id percent-encoded.
    path: String,
    transport: Transport,
    need_snapshot: bool,
    failures: u32,
    short_streams: u32,
    last_state: Option<ConnState>,
    online: bool,
    phase: Phase,
    clock: Clock,
    jitter: Jitter,
    next_id: u64,
    /// Events not yet polled; `delivered` of them were.
    events: Vec<FollowEvent>,
    delivered: usize,
    request: Option<Request>,
    aborts: Vec<RequestId>,
    /// A `Done` or `Fail` was queued.
    finished: bool,
    stopped: bool,
}

#[derive(Debug)]
enum Phase {
    /// No request: the runtime is offline; look again at `recheck_at`.
    Offline { recheck_at: f64 },
    /// Backing off until `until`.
    Waiting { until: f64 },
    /// A request is out.
    Flight(Flight),
    /// Over.
    Closed,
}

#[derive(Debug)]
struct Flight {
    id: RequestId,
    kind: RequestKind,
    started: f64,
    /// The poll's timeout, or the stream's first-message or idle deadline.
    deadline: Option<f64>,
    /// A 200 head arrived.
    head: bool,
    parser: sse::Parser,
    messages: u32,
}

/// Time as the follow counts it: the caller's clock, except that a jump
/// back counts as no time passing, so deadlines never move away.
#[derive(Debug, Default)]
struct Clock {
    last: f64,
    elapsed: f64,
}

impl Clock {
    fn tick(&mut self, now: f64) -> f64 {
        if now.is_finite() {
            if now > self.last {
                self.elapsed += now - self.last;
            }
            self.last = now;
        }
        self.elapsed
    }

    /// A deadline on the caller's clock.
    fn outside(&self, at: f64) -> f64 {
        self.last + (at - self.elapsed)
    }
}

impl Follow {
    /// Starts following `mirror`'s task at `now`. `cursor_hint` is the
    /// version to send while the mirror knows nothing; `online` is the
    /// runtime's network reading.
    pub fn new(
        config: FollowConfig,
        mirror: Mirror,
        cursor_hint: u64,
        now: f64,
        online: bool,
    ) -> Follow {
        let mut path = String::from("/v1/tasks/");
        encode_segment(mirror.task_id(), &mut path);
        let target = Target::Task(TaskTarget {
            mirror,
            hint: cursor_hint,
            unreported: Vec::new(),
        });
        Follow::start(config, target, path, now, online)
    }

    /// Starts following `mirror`'s batch at `now`, from its cursor (0 when
    /// it knows nothing: the first answer is then a snapshot). A mirror
    /// that knows the whole batch (restored, or from the create's answer)
    /// reports its [`BatchProgress`] at once.
    pub fn batch(config: FollowConfig, mirror: BatchMirror, now: f64, online: bool) -> Follow {
        let mut path = String::from("/v1/batches/");
        encode_segment(mirror.batch_id(), &mut path);
        let mut target = batch::BatchTarget::new(mirror);
        let mut events = Vec::new();
        target.progress(&mut events);
        let mut follow = Follow::start(config, Target::Batch(target), path, now, online);
        follow.events.extend(events);
        follow
    }

    fn start(config: FollowConfig, target: Target, path: String, now: f64, online: bool) -> Follow {
        let mut follow = Follow {
            transport: config.transport,
            jitter: Jitter::new(config.seed),
            config,
            target,
            path,
            need_snapshot: false,
            failures: 0,
            short_streams: 0,
            last_state: None,
            online,
            phase: Phase::Closed,
            clock: Clock::default(),
            next_id: 0,
            events: Vec::new(),
            delivered: 0,
            request: None,
            aborts: Vec::new(),
            finished: false,
            stopped: false,
        };
        let t = follow.clock.tick(now);
        follow.status(ConnState::Connecting, None, None, None);
        follow.advance(t);
        follow
    }

    /// The task as known, when the follow is of a task.
    pub fn mirror(&self) -> Option<&Mirror> {
        match &self.target {
            Target::Task(t) => Some(&t.mirror),
            Target::Batch(_) => None,
        }
    }

    /// The batch as known, when the follow is of a batch.
    pub fn batch_mirror(&self) -> Option<&BatchMirror> {
        match &self.target {
            Target::Batch(b) => Some(&b.mirror),
            Target::Task(_) => None,
        }
    }

    /// The cursor of the next request: the task's version, or the batch
    /// cursor.
    pub fn cursor(&self) -> u64 {
        self.target.cursor()
    }

    /// The transport in use (SSE may have fallen back to long-poll).
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// True once the follow is over; it then asks for nothing more.
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

    // ---- outputs ----------------------------------------------------------

    /// The next event for the page.
    pub fn poll_event(&mut self) -> Option<FollowEvent> {
        // A Vec read from the front (a VecDeque costs the page ~1 KB);
        // emptied whenever it has all been read.
        let event = self
            .events
            .get_mut(self.delivered)
            .map(|e| core::mem::replace(e, FollowEvent::Done(None)));
        self.delivered += 1;
        if self.delivered >= self.events.len() {
            self.events.clear();
            self.delivered = 0;
        }
        event
    }

    /// A request to abort (its later inputs are ignored anyway).
    pub fn poll_abort(&mut self) -> Option<RequestId> {
        self.aborts.pop()
    }

    /// The request to send now.
    pub fn poll_request(&mut self) -> Option<Request> {
        self.request.take()
    }

    /// When to call [`handle_timeout`](Follow::handle_timeout), on the
    /// caller's clock; `None`: no timer.
    pub fn poll_timeout(&self) -> Option<f64> {
        let at = match &self.phase {
            Phase::Offline { recheck_at } => *recheck_at,
            Phase::Waiting { until } => *until,
            Phase::Flight(flight) => flight.deadline?,
            Phase::Closed => return None,
        };
        Some(self.clock.outside(at))
    }
}

#[cfg(test)]
mod tests;

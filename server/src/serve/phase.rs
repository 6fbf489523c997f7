//! What a connection is doing, so that its task knows which deadline
//! applies: waiting for a request head, busy with a request, or idle
//! between requests.
//!
//! hyper 1.12 has one timer for this, `header_read_timeout`, which starts
//! whenever hyper waits for a head: at accept *and* right after every
//! response, so it is the idle time and the head time together, one
//! number for both. We want a short head limit (a slowloris sends a head
//! slowly) and a longer idle one (a browser keeps a connection for its
//! next poll), so the phase is tracked here from three places, all
//! polled inside the connection's own task:
//!
//! - [`Watched`], the socket: the first byte read while idle starts a head;
//! - the service: a request whose head was parsed makes the connection
//!   busy ([`Busy`]);
//! - [`Tracked`], the response body: when hyper drops it (fully written,
//!   or the connection ended) the connection is idle again.
//!
//! The request body has its own limit, [`TimedBody`], checked where it is
//! read, so every route that reads a body gets it.
//!
//! The accept loop reads the phases too: at the connection cap it asks a
//! connection that has been idle, or stuck in its head, for a while to
//! make room ([`super::reclaim`]).

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use futures_util::task::AtomicWaker;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// What the connection waits for; each phase has its own deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// A request head: from accept (first request) or from its first byte.
    Head,
    /// A request is being handled or its answer written (held long-polls
    /// and SSE streams stay here): no connection deadline.
    Busy,
    /// Between requests on a keep-alive connection.
    Idle,
    /// Busy, but waiting for the request body ([`TimedBody`] bounds it);
    /// at the connection cap it may be closed like a slow head.
    Body,
}

/// A connection's phase, as its own task and the accept loop see it.
///
/// The phase is kept with a count of changes in the upper bits: the
/// connection task compares whole values, so a request served entirely
/// within one poll (idle → head → busy → idle) still restarts the idle
/// deadline. The accept loop reads the phase and its age to pick a
/// connection to close at the cap ([`super::reclaim`]) and tells it so.
#[derive(Debug)]
pub(super) struct Activity {
    state: AtomicU32,
    /// When the phase began, on [`clock_ms`].
    since_ms: AtomicU32,
    /// Set when the accept loop wants the slot: the connection closes as
    /// soon as it is not busy.
    reclaimed: AtomicBool,
    /// The connection's task, woken when its slot is reclaimed.
    waker: AtomicWaker,
    /// The current request has a body not yet read to its end. A handler
    /// that answers without reading it (a refusal judged from the headers)
    /// leaves it set, and the answer then says `Connection: close`: hyper
    /// closes such a connection after the answer, and a client that was
    /// not told would send its next request on it and see it closed.
    body_unread: AtomicBool,
    /// Requests being handled: one at most over HTTP/1.1; over HTTP/2
    /// (TLS, [`super::tls`]) as many as the client's streams. The
    /// connection is busy while any is, and idle when the last one ends.
    in_flight: AtomicU32,
}

/// [`Activity`]'s value: the phase and how many changes led to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen(u32);

impl Seen {
    pub(super) fn phase(self) -> Phase {
        match self.0 & 3 {
            0 => Phase::Head,
            1 => Phase::Busy,
            2 => Phase::Idle,
            _ => Phase::Body,
        }
    }
}

/// Milliseconds since the first call, wrapping after 49 days (ages are
/// differences, taken with `wrapping_sub`).
pub(super) fn clock_ms() -> u32 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u32
}

impl Activity {
    /// A new connection waits for its first head.
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Activity {
            state: AtomicU32::new(0),
            since_ms: AtomicU32::new(clock_ms()),
            reclaimed: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            body_unread: AtomicBool::new(false),
            in_flight: AtomicU32::new(0),
        })
    }

    pub(super) fn seen(&self) -> Seen {
        Seen(self.state.load(Ordering::Relaxed))
    }

    /// Only the connection's task calls this (from inside its poll), so a
    /// load and a store are enough; relaxed, since nothing else is ordered
    /// by it (the accept loop's reading is a heuristic).
    pub(super) fn set(&self, phase: Phase) {
        let bits = match phase {
            Phase::Head => 0,
            Phase::Busy => 1,
            Phase::Idle => 2,
            Phase::Body => 3,
        };
        let changes = (self.state.load(Ordering::Relaxed) >> 2).wrapping_add(1);
        self.state.store(changes << 2 | bits, Ordering::Relaxed);
        self.since_ms.store(clock_ms(), Ordering::Relaxed);
    }

    /// Waiting for a head or a body, or idle, for at least `min_ms` (at
    /// `now_ms`), and not already asked to close.
    pub(super) fn reclaimable(&self, now_ms: u32, min_ms: u32) -> bool {
        self.seen().phase() != Phase::Busy
            && now_ms.wrapping_sub(self.since_ms.load(Ordering::Relaxed)) >= min_ms
            && !self.reclaimed.load(Ordering::Acquire)
    }

    /// Asks the connection to close as soon as it is not busy.
    pub(super) fn reclaim(&self) {
        self.reclaimed.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Called by the connection's task on every poll, before it looks at
    /// [`Activity::is_reclaimed`], so a reclaim is never missed.
    pub(super) fn register(&self, waker: &Waker) {
        self.waker.register(waker);
    }

    pub(super) fn is_reclaimed(&self) -> bool {
        self.reclaimed.load(Ordering::Acquire)
    }
}

/// The socket, reporting the first byte of a head that follows idleness.
///
/// Over HTTP/2 (`heads: false`) a byte read proves nothing: the client's
/// pings and window updates come between requests, and a request's head
/// is a frame hyper hands on whole. Such a connection is idle or busy,
/// and closed after the idle timeout with no request in flight.
pub(super) struct Watched<S> {
    io: S,
    activity: Arc<Activity>,
    heads: bool,
}

impl<S> Watched<S> {
    /// An HTTP/1.1 connection's socket.
    pub(super) fn new(io: S, activity: Arc<Activity>) -> Self {
        Watched {
            io,
            activity,
            heads: true,
        }
    }

    /// An HTTP/2 connection's socket.
    pub(super) fn without_heads(io: S, activity: Arc<Activity>) -> Self {
        Watched {
            io,
            activity,
            heads: false,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.heads && buf.filled().len() > before && this.activity.seen().phase() == Phase::Idle
        {
            this.activity.set(Phase::Head);
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Marks the connection busy for as long as it lives: created when the
/// service is called, moved into the response body ([`Tracked`]).
#[derive(Debug)]
pub(super) struct Busy(Arc<Activity>);

impl Busy {
    /// A request whose head was parsed; `has_body` when a body follows it.
    pub(super) fn start(activity: &Arc<Activity>, has_body: bool) -> Self {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        activity.set(Phase::Busy);
        activity.body_unread.store(has_body, Ordering::Relaxed);
        Busy(Arc::clone(activity))
    }

    /// Whether the request's body was left unread (see `body_unread`).
    pub(super) fn body_left_unread(&self) -> bool {
        self.0.body_unread.load(Ordering::Relaxed)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.set(Phase::Idle);
        }
    }
}

/// The response body, carrying the [`Busy`] mark until hyper drops it.
/// hyper is generic over the body type, so this wraps axum's body without
/// boxing it again.
pub(super) struct Tracked {
    body: Body,
    _busy: Busy,
}

impl Tracked {
    pub(super) fn new(body: Body, busy: Busy) -> Self {
        Tracked { body, _busy: busy }
    }
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The request body, failing with [`BodyTimedOut`] when it has not
/// arrived whole within the limit from the first read that had to wait
/// for it. The timer is made then, so a body that came with its head, and
/// a request without one (every held long-poll), cost nothing more. While
/// it waits, the connection is in [`Phase::Body`].
pub(super) struct TimedBody {
    body: Incoming,
    timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
    activity: Arc<Activity>,
}

impl TimedBody {
    pub(super) fn new(body: Incoming, timeout: Duration, activity: Arc<Activity>) -> Self {
        TimedBody {
            body,
            timeout,
            deadline: None,
            activity,
        }
    }

    /// Back to [`Phase::Busy`] once the body is in (or failed).
    fn done_waiting(&self) {
        if self.activity.seen().phase() == Phase::Body {
            self.activity.set(Phase::Busy);
        }
    }
}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            if frame.is_none() || (matches!(frame, Some(Ok(_))) && this.body.is_end_stream()) {
                // Read to its end: the connection can carry the next request.
                this.activity.body_unread.store(false, Ordering::Relaxed);
            }
            if !matches!(frame, Some(Ok(_))) || this.body.is_end_stream() {
                this.done_waiting();
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let timeout = this.timeout;
        let deadline = this.deadline.get_or_insert_with(|| {
            // Alone on its connection, a request waiting for its body lets
            // the connection be reclaimed like a slow head; beside other
            // streams (HTTP/2) the connection stays busy for them.
            if this.activity.in_flight.load(Ordering::Relaxed) <= 1 {
                this.activity.set(Phase::Body);
            }
            Box::pin(tokio::time::sleep(timeout))
        });
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.done_waiting();
                Poll::Ready(Some(Err(Box::new(BodyTimedOut(timeout)))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that did not arrive within `--body-timeout-ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimedOut(pub Duration);

impl fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "body not received within {} ms", self.0.as_millis())
    }
}

impl StdError for BodyTimedOut {}

/// The [`BodyTimedOut`] somewhere in an error's chain (axum wraps body
/// errors once or twice on their way to a handler's rejection).
pub fn body_timed_out(error: &(dyn StdError + 'static)) -> Option<BodyTimedOut> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(timed_out) = e.downcast_ref::<BodyTimedOut>() {
            return Some(*timed_out);
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests;

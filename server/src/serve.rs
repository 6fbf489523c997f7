//! The connection loop: accept, one hyper connection per socket,
//! one router shared by all of them, CORS around it, graceful shutdown.
//!
//! This replaces `axum::serve`, which costs ~12 KB more per held request
//! (measured with heaptrack, see server/README.md "Memory"):
//! - it gives every connection its own copy of the router
//!   (`Router: Service<IncomingStream>` rebuilds the route maps, ~4 KB);
//! - it serves through hyper-util's `auto` builder, which reads the first
//!   bytes to look for an HTTP/2 preface and replays them to hyper; that
//!   short first read makes hyper grow its 8 KiB read buffer to 16 KiB on
//!   every connection, and the buffer lives as long as the connection.
//!
//! Here the router is built once (cloning it is an `Arc` clone) and hyper's
//! HTTP/1 connection is used directly: plain connections speak HTTP/1.1
//! only. With `--tls-cert` every connection is TLS, and ALPN picks
//! HTTP/2 or HTTP/1.1 ([`tls`]): there is no preface to sniff.
//!
//! The limits of [`crate::limits`] are kept here: each connection task
//! closes its socket when the deadline of its [`phase`] passes (a head
//! not received in time, or an idle keep-alive connection), every request
//! body is read under the body timeout, and at the connection cap a new
//! connection takes the slot of an idle or slow one ([`reclaim`]) or, when
//! there is none, is answered 503 ([`refuse`]) instead of being served.
//!
//! Every listening port is served here, each with its own [`Port`]: the
//! API (`--listen`) and the metrics (`--metrics-listen`). A port served
//! without these limits is a way around them: 21,000 half-sent requests on
//! the metrics port, once served by `axum::serve`, took every descriptor
//! and the API's `accept` failed with "Too many open files".

mod phase;
mod reclaim;
mod refuse;
mod service;
mod tls;

pub use phase::{body_timed_out, BodyTimedOut};
pub use reclaim::MIN_AGE_MS as RECLAIM_MIN_AGE_MS;
pub use refuse::CONNECTION_RETRY_AFTER_SECS;
pub use tls::acceptor as tls_acceptor;

use std::future::Future;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, Sleep};

use self::phase::{Activity, Phase, Seen, Watched};
use self::reclaim::Reclaimer;
use self::refuse::Refuser;
use self::service::connection_service;
use crate::limits::Limits;
use crate::AppState;

/// hyper's per-connection buffer limit (see [`serve`]).
const MAX_BUF_BYTES: usize = 16 * 1024;

/// The largest request head (request line and headers) accepted; a larger
/// one gets 431 and the connection is closed. hyper's default is its
/// ~400 KB buffer limit, which 20,000 slow connections could each fill
/// (8 GB); our heads are a few hundred bytes. 16 KiB, as Node.js.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Connections the kernel may queue for `accept` (capped by
/// `net.core.somaxconn`, 4096 on current Linux). tokio's `bind` asks for
/// 1,024; under a connection flood (an attacker reconnecting as fast as
/// it is closed) a full queue drops the handshakes of normal clients too,
/// which then wait for a SYN retransmit (1 s, then 3 s).
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `listen` (`host:port`; the first address that binds) with
/// [`LISTEN_BACKLOG`].
pub async fn bind(listen: &str) -> io::Result<TcpListener> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to bind");
    for addr in tokio::net::lookup_host(listen).await? {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // As std and tokio do on Unix: a restarted server can bind its
        // port while old connections are in TIME_WAIT.
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        match socket
            .bind(addr)
            .and_then(|()| socket.listen(LISTEN_BACKLOG))
        {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// What one listening port is served with.
#[derive(Clone)]
pub struct Port {
    /// Its flag (`--listen`, `--metrics-listen`), named in what is logged.
    pub flag: &'static str,
    /// Its timeouts and connection cap ([`Limits::max_connections`]); the
    /// caps of all ports together stay under the descriptor limit
    /// ([`crate::limits`]).
    pub limits: Limits,
    /// The API's CORS origins (from its state); `None` on a port that
    /// answers no browser.
    pub cors: Option<AppState>,
    /// TLS with HTTP/2 and HTTP/1.1 offered by ALPN (`--tls-cert`);
    /// `None`: plain HTTP/1.1.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Port {
    /// The API's port: the server's limits, CORS.
    pub fn api(state: &AppState, tls: Option<tokio_rustls::TlsAcceptor>) -> Port {
        Port {
            flag: "--listen",
            limits: state.limits.clone(),
            cors: Some(Arc::clone(state)),
            tls,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` fires (or its sender is
/// dropped); then stops accepting, lets every connection finish its
/// current request and waits for all of them.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    port: Port,
    shutdown: oneshot::Receiver<()>,
) -> io::Result<()> {
    // `true` once shutting down; every connection task holds a receiver, so
    // `closed()` on the sender means "all connections are gone".
    let (stop_tx, stop_rx) = watch::channel(false);
    let open = Arc::new(AtomicUsize::new(0));
    let Port {
        flag,
        limits,
        cors: cors_state,
        tls,
    } = port;
    let limits = Arc::new(limits);
    // Connections over the cap waiting to close for the ones that took
    // their slots: a small port gets as many as its cap, not more.
    let max_reclaiming = reclaim::MAX_RECLAIMING.min(limits.max_connections);
    let mut http = http1::Builder::new();
    // hyper grows a connection's read buffer while reads fill it (8 KiB,
    // doubling up to ~400 KiB) and keeps it for the connection's life: a
    // body that piled up in the socket while its headers were judged (a
    // callback waits for its task's tenant) would cost 64-128 KiB of buffer
    // per connection. 16 KiB caps that; it is also the largest request head.
    http.max_buf_size(MAX_BUF_BYTES);
    http.max_header_size(MAX_HEAD_BYTES);
    let mut refuser = Refuser::new(flag, limits.max_connections);
    let mut reclaimer = Reclaimer::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    accept_error(flag, e).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let now_open = open.load(Ordering::Relaxed);
        if now_open >= limits.max_connections {
            // Room is made by closing an idle or slow connection, if any;
            // else (or with too many such closes still under way) 503.
            let room =
                now_open < limits.max_connections + max_reclaiming && reclaimer.reclaim_one();
            if !room {
                refuser.refuse(stream);
                continue;
            }
            refuser.reclaimed();
        }
        let counted = Open::count(&open);
        // Answers are written whole; don't let Nagle hold a small one back.
        let _ = stream.set_nodelay(true);
        let activity = Activity::new();
        reclaimer.track(&activity);
        let mut stop = stop_rx.clone();
        let parts = Parts {
            stopping: Box::pin(async move {
                let _ = stop.wait_for(|stopping| *stopping).await;
            }),
            deadline: tokio::time::sleep(limits.header_timeout),
            activity,
            limits: Arc::clone(&limits),
            counted,
            alive: stop_rx.clone(),
        };
        match &tls {
            None => {
                let service = connection_service(
                    &app,
                    cors_state.clone(),
                    &parts.activity,
                    limits.body_timeout,
                    false,
                );
                let io = TokioIo::new(Watched::new(stream, Arc::clone(&parts.activity)));
                tokio::spawn(parts.serve(http.serve_connection(io, service)));
            }
            Some(acceptor) => {
                // The service is made once ALPN has said which protocol.
                let routes = tls::Routes {
                    app: app.clone(),
                    cors: cors_state.clone(),
                    body_timeout: limits.body_timeout,
                    http1: http.clone(),
                };
                tokio::spawn(tls::serve(acceptor.clone(), stream, routes, parts));
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(stop_rx);
    stop_tx.closed().await;
    Ok(())
}

type StopFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Everything a connection's task holds besides the hyper connection,
/// made at accept: the TLS handshake (when there is one) happens first,
/// within the head's deadline, which starts at accept.
struct Parts {
    stopping: StopFuture,
    deadline: Sleep,
    activity: Arc<Activity>,
    limits: Arc<Limits>,
    counted: Open,
    alive: watch::Receiver<bool>,
}

impl Parts {
    fn serve<C>(self, conn: C) -> Serving<C> {
        Serving {
            conn,
            stopping: Some(self.stopping),
            seen: self.activity.seen(),
            deadline: self.deadline,
            activity: self.activity,
            limits: self.limits,
            _counted: self.counted,
            _alive: self.alive,
        }
    }
}

pin_project_lite::pin_project! {
    /// One connection's task: the hyper connection, closed when its
    /// phase's deadline passes, and told to shut down gracefully when the
    /// server stops.
    ///
    /// A plain struct rather than an `async` block: the block would hold the
    /// connection twice (the captured value and the pinned one it is moved
    /// into), ~650 bytes more for every open connection.
    struct Serving<C> {
        conn: C,
        // Resolves when the server stops; `None` once the connection was told.
        stopping: Option<StopFuture>,
        // What the connection was doing when last polled.
        seen: Seen,
        // When the current phase's time is up (ignored while busy). Inline,
        // not boxed: the task is boxed once by `tokio::spawn` anyway.
        #[pin]
        deadline: Sleep,
        activity: Arc<Activity>,
        limits: Arc<Limits>,
        // Counts the connection against the cap until it ends.
        _counted: Open,
        // Held until the connection ends: the server waits for all of these.
        _alive: watch::Receiver<bool>,
    }
}

impl<C> Future for Serving<C>
where
    C: Future + GracefulShutdown + Unpin,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        this.activity.register(cx.waker());
        if let Some(stopping) = this.stopping {
            if stopping.as_mut().poll(cx).is_ready() {
                *this.stopping = None;
                this.conn.shutdown_gracefully();
            }
        }
        // Errors are the client's (reset, bad request): nothing to do.
        if Pin::new(&mut *this.conn).poll(cx).is_ready() {
            return Poll::Ready(());
        }
        // Every phase change happens inside the poll above (reads, the
        // service call, the response body dropped), so this sees them all.
        let now = this.activity.seen();
        if now != *this.seen {
            *this.seen = now;
            let timeout = match now.phase() {
                Phase::Head => Some(this.limits.header_timeout),
                Phase::Idle => Some(this.limits.idle_timeout),
                // The body has its own timer (`TimedBody`).
                Phase::Busy | Phase::Body => None,
            };
            if let Some(timeout) = timeout {
                this.deadline.as_mut().reset(Instant::now() + timeout);
            }
        }
        // Asked to make room at the connection cap: close, unless a request
        // is being handled (then once it is answered); a request still
        // waiting for its body is closed like a slow head.
        if now.phase() != Phase::Busy && this.activity.is_reclaimed() {
            return Poll::Ready(());
        }
        // Busy or reading a body: the request is bounded elsewhere (waitMs,
        // the body timeout, the held-watch cap). A deadline armed before may still wake the
        // task once; it is not polled, so it does nothing.
        let timed = matches!(now.phase(), Phase::Head | Phase::Idle);
        if timed && this.deadline.poll(cx).is_ready() {
            // Time is up for a head or an idle keep-alive connection:
            // dropping the connection closes the socket, without an answer
            // (no request to answer; RFC 9112 §9.5 lets a server close an
            // idle connection at any time).
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// One open connection, counted against `--max-connections` while it
/// lives (only the accept loop adds, so a relaxed count is exact there).
struct Open(Arc<AtomicUsize>);

impl Open {
    fn count(open: &Arc<AtomicUsize>) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        Open(Arc::clone(open))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// hyper's `graceful_shutdown`, for [`Serving`].
trait GracefulShutdown {
    fn shutdown_gracefully(&mut self);
}

impl<I, S> GracefulShutdown for http1::Connection<I, S>
where
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: hyper::body::Body + 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn shutdown_gracefully(&mut self) {
        Pin::new(self).graceful_shutdown();
    }
}

/// As `axum::serve`: a client that went away before its connection was
/// accepted is not an error; anything else (e.g. out of file descriptors)
/// is reported and retried after a pause instead of spinning.
async fn accept_error(flag: &str, e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    let _ = writeln!(io::stderr(), "taskwire-server: {flag}: accept: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

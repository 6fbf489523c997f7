//! The HTTP/1 connection loop: accept, one hyper connection per socket,
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
//! HTTP/1 connection is used directly: the server only speaks HTTP/1.1
//! (axum's `http2` feature was never enabled, so nothing is lost).

use std::convert::Infallible;
use std::future::Future;
use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures_util::future::{self, Either, FutureExt};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tower_service::Service;

use crate::routes::cors::Cors;
use crate::AppState;

/// hyper's per-connection buffer limit (see [`serve`]).
const MAX_BUF_BYTES: usize = 16 * 1024;

/// Serves `app` on `listener` until `shutdown` fires (or its sender is
/// dropped); then stops accepting, lets every connection finish its
/// current request and waits for all of them.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    state: AppState,
    shutdown: oneshot::Receiver<()>,
) -> io::Result<()> {
    // `true` once shutting down; every connection task holds a receiver, so
    // `closed()` on the sender means "all connections are gone".
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut http = http1::Builder::new();
    // hyper grows a connection's read buffer while reads fill it (8 KiB,
    // doubling up to ~400 KiB) and keeps it for the connection's life: a
    // body that piled up in the socket while its headers were judged (a
    // callback waits for its task's tenant) would cost 64-128 KiB of buffer
    // per connection. 16 KiB caps that; it is also the largest request head.
    http.max_buf_size(MAX_BUF_BYTES);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Answers are written whole; don't let Nagle hold a small one back.
        let _ = stream.set_nodelay(true);
        let router = app.clone();
        let state = state.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let cors = Cors::of(&state, &req);
            // A combinator rather than an `async` block: the block would
            // store the router's future twice (captured, then moved into its
            // state), and hyper keeps this future for as long as a request is
            // held.
            if cors.preflight() {
                let mut res = StatusCode::NO_CONTENT.into_response();
                cors.apply(&mut res);
                Either::Right(future::ready(Ok(res)))
            } else {
                // `Router::call` is always ready; cloning it is an Arc clone.
                let routed = router.clone().call(req.map(Body::new));
                Either::Left(routed.map(move |res: Result<Response, Infallible>| {
                    let mut res = res.unwrap_or_else(|never| match never {});
                    cors.apply(&mut res);
                    Ok::<Response, Infallible>(res)
                }))
            }
        });
        let conn = http.serve_connection(TokioIo::new(stream), service);
        let mut stop = stop_rx.clone();
        let stopping: StopFuture = Box::pin(async move {
            let _ = stop.wait_for(|stopping| *stopping).await;
        });
        tokio::spawn(Serving {
            conn,
            stopping: Some(stopping),
            _alive: stop_rx.clone(),
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(stop_rx);
    stop_tx.closed().await;
    Ok(())
}

type StopFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One connection's task: the hyper connection, told to shut down
/// gracefully when the server stops.
///
/// A plain struct rather than an `async` block: the block would hold the
/// connection twice (the captured value and the pinned one it is moved
/// into), ~650 bytes more for every open connection.
struct Serving<C> {
    conn: C,
    /// Resolves when the server stops; `None` once the connection was told.
    stopping: Option<StopFuture>,
    /// Held until the connection ends: the server waits for all of these.
    _alive: watch::Receiver<bool>,
}

impl<C> Future for Serving<C>
where
    C: Future + GracefulShutdown + Unpin,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if let Some(stopping) = &mut this.stopping {
            if stopping.as_mut().poll(cx).is_ready() {
                this.stopping = None;
                this.conn.shutdown_gracefully();
            }
        }
        // Errors are the client's (reset, bad request): nothing to do.
        Pin::new(&mut this.conn).poll(cx).map(|_| ())
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
async fn accept_error(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    let _ = writeln!(io::stderr(), "taskwire-server: accept: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

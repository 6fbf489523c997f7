//! TLS on the API's port (`--tls-cert`, `--tls-key`), with HTTP/2 and
//! HTTP/1.1 offered by ALPN.
//!
//! Why: a browser opens at most 6 HTTP/1.1 connections per origin, and
//! every task a page follows holds one request. A page following a dozen
//! tasks over HTTP/1.1 waits for a free connection before some of its
//! long-polls are even sent. Over HTTP/2 they all share one connection
//! (PROTOCOL.md §Limits, docs/backend.md "HTTP/2"). Browsers speak
//! HTTP/2 only over TLS, so this is where it is offered; a front proxy
//! that terminates TLS can offer it instead, and then this stays off.
//!
//! A TLS connection is served as a plain one is, with the same limits:
//! the handshake counts in the head's deadline (from accept), the
//! connection cap and reclaiming see it like any other, and an HTTP/2
//! connection is busy while any of its streams is, idle when none is
//! ([`super::phase`]).

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;

use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::PrivateKeyDer;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

use super::phase::Watched;
use super::service::connection_service;
use super::{GracefulShutdown, Parts, MAX_HEAD_BYTES};
use crate::AppState;

/// The acceptor of `--tls-cert` (PEM, the certificate first, then any
/// intermediates) and `--tls-key` (PEM, PKCS#8, PKCS#1 or SEC1). A file
/// that cannot be read or holds nothing usable is an error naming its
/// flag and path; a key that does not match the certificate is one too.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    let chain = crate::pem::certificates(cert, "--tls-cert")?;
    let key_pem = std::fs::read(key).map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        format!(
            "--tls-key {}: no private key in it (expected a PEM \"PRIVATE KEY\" block): {e}",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("--tls-cert: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            format!(
                "--tls-key {}: does not fit --tls-cert {}: {e}",
                key.display(),
                cert.display()
            )
        })?;
    // HTTP/2 first: every browser that can, does.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// What a TLS connection's service is made of, once ALPN has chosen.
pub(super) struct Routes {
    pub app: Router,
    pub cors: Option<AppState>,
    pub body_timeout: Duration,
    pub http1: http1::Builder,
}

/// Serves one accepted connection over TLS: the handshake, bounded by the
/// head's deadline (a client that never finishes it is closed with no
/// answer, as a slow head is), then HTTP/2 or HTTP/1.1 as ALPN chose.
pub(super) async fn serve(acceptor: TlsAcceptor, stream: TcpStream, routes: Routes, parts: Parts) {
    let handshake = acceptor.accept(stream);
    // A timer of its own that ends with the head's: the one in `parts`
    // goes on to bound the first request.
    let deadline = tokio::time::sleep_until(parts.deadline.deadline());
    let tls = tokio::select! {
        done = handshake => match done {
            Ok(tls) => tls,
            // A client that is not speaking TLS, or gave up: nothing to answer.
            Err(_) => return,
        },
        () = deadline => return,
    };
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let Routes {
        app,
        cors,
        body_timeout,
        http1,
    } = routes;
    let service = connection_service(&app, cors, &parts.activity, body_timeout, http2);
    let activity = Arc::clone(&parts.activity);
    if http2 {
        let io = TokioIo::new(Watched::without_heads(tls, activity));
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder.max_header_list_size(MAX_HEAD_BYTES as u32);
        parts.serve(builder.serve_connection(io, service)).await;
    } else {
        let io = TokioIo::new(Watched::new(tls, activity));
        parts.serve(http1.serve_connection(io, service)).await;
    }
}

impl<I, S, E> GracefulShutdown for http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: hyper::body::Body + 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn shutdown_gracefully(&mut self) {
        Pin::new(self).graceful_shutdown();
    }
}

//! `--tls-cert` / `--tls-key`: the API over TLS, HTTP/2 and HTTP/1.1 by
//! ALPN (src/serve/tls.rs). Why it matters: a browser holds at most 6
//! HTTP/1.1 connections per origin, so a page following 12 tasks cannot
//! hold 12 long-polls; over HTTP/2 they share one connection.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use common::raw::{until_closed, PATIENCE};
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use taskwire_server::config::Config;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// A self-signed certificate for 127.0.0.1 written next to the data, and
/// its DER for the client's roots.
fn certificate(dir: &std::path::Path) -> (PathBuf, PathBuf, CertificateDer<'static>) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key, made.cert.der().clone())
}

struct Tls {
    h: Harness,
    root: CertificateDer<'static>,
}

async fn tls_harness(tweak: impl FnOnce(&mut Config)) -> Tls {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, root) = certificate(dir.path());
    let h = harness(|c| {
        c.tls_cert = Some(cert);
        c.tls_key = Some(key);
        tweak(c);
    })
    .await;
    // The files were read at start; the directory may go.
    drop(dir);
    Tls { h, root }
}

async fn connect(t: &Tls, alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let mut roots = RootCertStore::empty();
    roots.add(t.root.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(&t.h.addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("handshake")
}

fn request(method: &str, path: &str, body: Option<Value>) -> hyper::Request<Full<Bytes>> {
    let builder = hyper::Request::builder()
        .method(method)
        .uri(format!("https://127.0.0.1{path}"))
        .header("authorization", "Bearer demo")
        .header("content-type", "application/json");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    builder.body(Full::new(Bytes::from(body))).unwrap()
}

async fn send(
    sender: &mut http2::SendRequest<Full<Bytes>>,
    req: hyper::Request<Full<Bytes>>,
) -> (u16, Value) {
    let res = sender.send_request(req).await.expect("answer");
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&body).expect("JSON"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_held_long_polls_and_their_changes_share_one_http2_connection() {
    let t = tls_harness(|_| {}).await;
    let tls = connect(&t, &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut ids = Vec::new();
    for _ in 0..12 {
        let body = json!({"ttlMs": 3_600_000, "maxAttempts": 1});
        let (status, task) = send(
            &mut sender.clone(),
            request("POST", "/v1/tasks", Some(body)),
        )
        .await;
        assert_eq!(status, 201, "{task}");
        ids.push(task["id"].as_str().unwrap().to_string());
    }
    // Twelve long-polls held at once on the one connection.
    let polls: Vec<_> = ids
        .iter()
        .map(|id| {
            let mut sender = sender.clone();
            let path = format!("/v1/tasks/{id}/resume?cursor=0&waitMs=20000");
            tokio::spawn(async move {
                let (status, answer) = send(&mut sender, request("GET", &path, None)).await;
                (status, answer, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    if let Some(done) = polls.iter().position(|p| p.is_finished()) {
        let (status, answer, _) = polls.into_iter().nth(done).unwrap().await.unwrap();
        panic!("poll {done} was not held: {status} {answer}");
    }
    // A change to each task, sent on the same connection beside them, is
    // answered on its poll at once.
    for (id, poll) in ids.iter().zip(polls) {
        let sent = Instant::now();
        let path = format!("/v1/tasks/{id}/cancel");
        let (status, cancel) =
            send(&mut sender.clone(), request("POST", &path, Some(json!({})))).await;
        assert_eq!(status, 200, "{cancel}");
        let (status, answer, at) = poll.await.unwrap();
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["task"]["state"], "cancelled", "{answer}");
        let waited = at.saturating_duration_since(sent);
        assert!(
            waited < Duration::from_secs(2),
            "{id}: answered {waited:?} after its change"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_offers_only_http1_is_served_http1_over_tls() {
    let t = tls_harness(|_| {}).await;
    let tls = connect(&t, &[b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (mut sender, conn) = http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    for _ in 0..2 {
        // Twice: the connection is kept alive between requests.
        sender
            .ready()
            .await
            .expect("the connection serves another request");
        let res = sender
            .send_request(request("GET", "/v1/notifications", None))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        res.into_body().collect().await.unwrap();
    }
    // A body refused unread (an unknown token, judged from the headers)
    // closes an HTTP/1.1 connection, and the answer says so, as in plain.
    let mut refused = request("POST", "/v1/tasks", Some(json!({"ttlMs": 1000})));
    refused
        .headers_mut()
        .insert("authorization", "Bearer nobody".parse().unwrap());
    sender.ready().await.unwrap();
    let res = sender.send_request(refused).await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers()["connection"], "close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_finishes_its_handshake_is_closed_at_the_head_deadline() {
    let t = tls_harness(|c| c.header_timeout_ms = 300).await;
    let mut tcp = TcpStream::connect(&t.h.addr).await.unwrap();
    let opened = Instant::now();
    let (got, closed) = until_closed(&mut tcp, PATIENCE).await;
    assert_eq!(got, "", "no answer to a connection that sent nothing");
    let closed = closed.expect("closed");
    assert!(closed.duration_since(opened) >= Duration::from_millis(250));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_to_the_tls_port_gets_no_answer() {
    let t = tls_harness(|_| {}).await;
    let mut tcp = TcpStream::connect(&t.h.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(
        &mut tcp,
        b"GET /v1/notifications HTTP/1.1\r\nhost: t\r\n\r\n",
    )
    .await
    .unwrap();
    let (got, closed) = until_closed(&mut tcp, PATIENCE).await;
    assert!(!got.contains("HTTP/1.1 200"), "{got}");
    assert!(closed.is_some(), "closed");
}

#[tokio::test]
async fn bad_certificate_and_key_files_are_refused_at_start_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, _) = certificate(dir.path());
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let (_, other_key, _) = certificate(&other);
    let missing = dir.path().join("missing.pem");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not PEM\n").unwrap();
    let cases = [
        (missing.clone(), key.clone(), "--tls-cert"),
        (garbage.clone(), key.clone(), "--tls-cert"),
        (cert.clone(), missing, "--tls-key"),
        (cert.clone(), garbage, "--tls-key"),
        (cert.clone(), other_key, "does not fit --tls-cert"),
    ];
    for (cert, key, names) in cases {
        let data = tempfile::tempdir().unwrap();
        let mut config = test_config(data.path());
        config.tls_cert = Some(cert.clone());
        config.tls_key = Some(key.clone());
        let e = taskwire_server::start(config).await.err().expect("refused");
        assert!(e.contains(names), "{cert:?} {key:?}: {e}");
    }
    // The demo's workers speak plain HTTP to their server.
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(data.path());
    config.tls_cert = Some(cert);
    config.tls_key = Some(key);
    config.demo = true;
    let e = taskwire_server::start(config).await.err().expect("refused");
    assert!(e.contains("--demo") && e.contains("--tls-cert"), "{e}");
}

//! `https://` notify receivers against a real TLS receiver on loopback
//! (tests/notify_tls/receiver.rs: a test CA and leaves made with rcgen,
//! served with tokio-rustls): a receiver with a certificate of the CA of
//! `--notify-ca-file` gets the signed post; one whose certificate is
//! untrusted, for another name or expired gets nothing, its notification
//! stays owed and is retried, and is delivered once the receiver presents
//! a valid certificate. Bad URLs and CA files are refused at start.

mod common;
#[path = "notify_tls/receiver.rs"]
mod receiver;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use receiver::{Leaf, Post, TestCa, TlsReceiver, Validity};
use serde_json::Value;
use taskwire_server::{client, Config};

/// The names a valid receiver certificate is for.
const RECEIVER_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// Writes `ca`'s certificate to a PEM file in `dir`.
fn ca_file(dir: &tempfile::TempDir, ca: &TestCa) -> PathBuf {
    let path = dir.path().join("notify-ca.pem");
    std::fs::write(&path, ca.pem()).unwrap();
    path
}

async fn wait_until(deadline: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while !done() {
        if t0.elapsed() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// A post the server sent for `key`: the notification, signed with the
/// notify secret like the plain-HTTP posts (tests/api.rs).
fn assert_notification(post: &Post, key: &str) {
    assert_eq!(post.headers["webhook-id"], key);
    assert_eq!(post.headers["content-type"], "application/json");
    assert!(
        verifies(&secret(), &post.headers, &post.body),
        "signed like callbacks"
    );
    let v: Value = serde_json::from_slice(&post.body).unwrap();
    assert_eq!(v["key"], key);
    assert_eq!(v["state"], "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_receivers_get_signed_posts_over_tls_trusting_the_ca_file() {
    let ca = TestCa::new("taskwire test CA");
    let receiver = TlsReceiver::start(&ca.leaf(&RECEIVER_NAMES, Validity::Current)).await;
    let dir = tempfile::tempdir().unwrap();
    let cas = ca_file(&dir, &ca);
    // One tenant by IP address (checked against the IP SAN), one by DNS
    // name (sent as SNI, checked against the DNS SAN).
    let h = harness(|c| {
        c.tenant_notify_urls = vec![
            format!("demo={}", receiver.url("127.0.0.1", "/by-ip")),
            format!("other={}", receiver.url("localhost", "/by-name?x=1")),
        ];
        c.notify_ca_file = Some(cas);
    })
    .await;
    let by_ip = h.succeeded_task("demo").await;
    let by_name = h.succeeded_task("other").await;
    assert!(wait_until(Duration::from_secs(10), || receiver.posts().len() >= 2).await);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let posts = receiver.posts();
    assert_eq!(posts.len(), 2, "each posted once (200 answered): {posts:?}");
    for (path, key) in [("/by-ip", &by_ip), ("/by-name", &by_name)] {
        let post = posts.iter().find(|p| p.path == path).expect(path);
        assert_notification(post, key);
    }
}

/// The receiver presents `bad` first: its notification gets no post (no
/// byte past the handshake), is tried again with backoff, and arrives
/// once, signed, after the receiver switches to a valid certificate.
async fn refused_until_valid(bad: impl FnOnce(&TestCa) -> Leaf, tweak: impl Fn(&mut Config)) {
    let ca = TestCa::new("taskwire test CA");
    let receiver = TlsReceiver::start(&bad(&ca)).await;
    let dir = tempfile::tempdir().unwrap();
    let cas = ca_file(&dir, &ca);
    let url = receiver.url("127.0.0.1", "/hook");
    let h = harness(|c| {
        c.notify_url = Some(url);
        c.notify_ca_file = Some(cas);
        tweak(c);
    })
    .await;
    let key = h.succeeded_task("demo").await;
    // Attempts 1 and 2 (after the 0.5 s backoff), and a third.
    let retried = wait_until(Duration::from_secs(10), || receiver.connections() >= 3).await;
    assert!(retried, "{} attempts", receiver.connections());
    assert!(receiver.posts().is_empty(), "{:?}", receiver.posts());
    receiver.present(&ca.leaf(&RECEIVER_NAMES, Validity::Current));
    let delivered = wait_until(Duration::from_secs(15), || !receiver.posts().is_empty()).await;
    assert!(
        delivered,
        "still owed, delivered once the certificate is valid"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let posts = receiver.posts();
    assert_eq!(posts.len(), 1, "answered 200 once, posted once: {posts:?}");
    assert_notification(&posts[0], &key);
}

fn untrusted(_: &TestCa) -> Leaf {
    TestCa::new("a CA nobody trusts").leaf(&RECEIVER_NAMES, Validity::Current)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused_and_retried_until_a_valid_one() {
    refused_until_valid(untrusted, |_| {}).await;
}

/// The PostgreSQL outbox claims rows with a lease: a refused post is
/// recorded as failed and comes back with its backoff there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused_and_retried_on_postgres() {
    let Some(url) = pg::database().await else {
        return;
    };
    refused_until_valid(untrusted, move |c| c.data = url.clone().into()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_is_refused() {
    refused_until_valid(
        |ca| ca.leaf(&["elsewhere.test", "127.0.0.2"], Validity::Current),
        |_| {},
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_is_refused() {
    refused_until_valid(|ca| ca.leaf(&RECEIVER_NAMES, Validity::Expired), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_receivers_still_get_plain_posts_next_to_https_ones() {
    let (plain_url, plain_seen) = plain_receiver().await;
    let ca = TestCa::new("taskwire test CA");
    let receiver = TlsReceiver::start(&ca.leaf(&RECEIVER_NAMES, Validity::Current)).await;
    let dir = tempfile::tempdir().unwrap();
    let cas = ca_file(&dir, &ca);
    let h = harness(|c| {
        c.notify_url = Some(plain_url);
        c.tenant_notify_urls = vec![format!("other={}", receiver.url("127.0.0.1", "/hook"))];
        c.notify_ca_file = Some(cas);
    })
    .await;
    let plain = h.succeeded_task("demo").await;
    let tls = h.succeeded_task("other").await;
    let both = wait_until(Duration::from_secs(10), || {
        !plain_seen.lock().unwrap().is_empty() && !receiver.posts().is_empty()
    })
    .await;
    assert!(both);
    let seen = plain_seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_notification(&seen[0], &plain);
    assert_notification(&receiver.posts()[0], &tls);
}

/// A plain `http://` receiver answering 200.
async fn plain_receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Post>>>) {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<Post>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let seen = Arc::clone(&seen2);
                async move {
                    seen.lock().unwrap().push(Post {
                        path: "/hook".into(),
                        headers,
                        body,
                    });
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

/// A change to a test's config.
type Tweak = Box<dyn Fn(&mut Config)>;

#[tokio::test]
async fn bad_urls_and_ca_files_are_refused_at_start_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let cases: [(&str, Tweak); 5] = [
        (
            "--notify-url",
            Box::new(|c| c.notify_url = Some("ftp://127.0.0.1/hook".into())),
        ),
        (
            "--tenant-notify-url",
            Box::new(|c| c.tenant_notify_urls = vec!["demo=wss://127.0.0.1/hook".into()]),
        ),
        (
            "--notify-url",
            Box::new(|c| c.notify_url = Some("https://user:pw@127.0.0.1/hook".into())),
        ),
        (
            "--notify-ca-file",
            Box::new(|c| {
                c.notify_url = Some("https://127.0.0.1/hook".into());
                c.notify_ca_file = Some("/nonexistent/ca.pem".into());
            }),
        ),
        (
            "--notify-ca-file",
            Box::new(move |c| {
                c.notify_url = Some("https://127.0.0.1/hook".into());
                c.notify_ca_file = Some(not_pem.clone());
            }),
        ),
    ];
    for (flag, tweak) in cases {
        let data = tempfile::tempdir().unwrap();
        let mut config = test_config(data.path());
        tweak(&mut config);
        let e = taskwire_server::start(config).await.err().expect("refused");
        assert!(e.starts_with(flag), "{e:?} should name {flag}");
    }
}

/// The binary logs each refused attempt with rustls's reason (on
/// stderr, where an operator looks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_refused_attempt_is_logged_with_the_reason() {
    let receiver = TlsReceiver::start(&untrusted(&TestCa::new("unused"))).await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskwire-server"))
        .args(["--listen", "127.0.0.1:0", "--token", "demo=demo"])
        .arg("--data")
        .arg(dir.path())
        .arg("--notify-url")
        .arg(receiver.url("127.0.0.1", "/hook"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // A task that expires: its notification is owed.
    let created = client::request(
        &addr,
        "POST",
        "/v1/tasks",
        &[
            ("authorization", "Bearer demo"),
            ("content-type", "application/json"),
        ],
        r#"{"ttlMs":100,"maxAttempts":1}"#,
    )
    .await
    .unwrap();
    assert_eq!(created.status, 201, "{:?}", created.json());
    let mut refused = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while refused.len() < 2 && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            if line.contains("notify") {
                refused.push(line);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for line in &refused {
        assert!(
            line.contains("invalid peer certificate: UnknownIssuer"),
            "{line}"
        );
        assert!(line.contains(&receiver.url("127.0.0.1", "/hook")), "{line}");
    }
    assert!(receiver.posts().is_empty());
}

//! `--demo`'s static files: regular files under the canonical root only,
//! streamed. Symlinks out of the root, FIFOs, directories and traversal
//! are the JSON 404; a FIFO never holds a blocking thread.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;

/// A demo dir with a page, and a harness serving it.
async fn serve(dir: &Path) -> Harness {
    let demo_dir = dir.to_path_buf();
    harness(move |c| {
        c.demo = true;
        c.demo_dir = demo_dir;
    })
    .await
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs")
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_out_of_the_root_and_traversal_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.sqlite3"), "SQLite format 3").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<h1>demo</h1>").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/page.txt"), "inside").unwrap();
    let link = |target: &Path, name: &str| {
        std::os::unix::fs::symlink(target, dir.path().join(name)).unwrap();
    };
    link(&outside.path().join("secret.sqlite3"), "db.sqlite3");
    link(outside.path(), "out");
    link(&dir.path().join("sub/page.txt"), "inside.txt");
    let h = serve(dir.path()).await;

    for path in [
        "/db.sqlite3",
        "/out/secret.sqlite3",
        "/../Cargo.toml",
        "/%2e%2e/Cargo.toml",
        "/..%2fCargo.toml",
        "/sub/..%2f..%2fCargo.toml",
        "/sub/%2e%2e/%2e%2e/Cargo.toml",
        "/sub",
    ] {
        let r = h.req("GET", path, &[], "").await;
        assert_error(&r, 404, "not-found", "path");
        assert!(
            !String::from_utf8_lossy(&r.body).contains("SQLite"),
            "{path}"
        );
    }
    // A symlink that stays inside the root is served.
    let inside = h.req("GET", "/inside.txt", &[], "").await;
    assert_eq!((inside.status, &inside.body[..]), (200, &b"inside"[..]));
    let page = h.req("GET", "/sub/page.txt", &[], "").await;
    assert_eq!(page.header("content-length"), Some("6"));
    let head = h.req("HEAD", "/", &[], "").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("13"));
    assert!(head.body.is_empty());
}

/// As `main` builds it: 16 blocking threads. A FIFO opened without
/// O_NONBLOCK waits for a writer on one of them; 20 such requests left
/// none for the store's reads.
#[test]
fn fifos_are_refused_at_once_and_never_starve_store_reads() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipe"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        .enable_all()
        .build()
        .unwrap();
    let (fifo_answers, read) = rt.block_on(async {
        let h = serve(dir.path()).await;
        let id = h.create_default().await;
        let t0 = Instant::now();
        let requests: Vec<_> = (0..20)
            .map(|_| {
                let addr = h.addr.clone();
                tokio::spawn(async move {
                    let r = tokio::time::timeout(
                        Duration::from_secs(3),
                        taskwire_server::client::request(&addr, "GET", "/pipe", &[], ""),
                    )
                    .await;
                    r.ok()
                        .and_then(|r| r.ok())
                        .map(|r| (r.status, t0.elapsed()))
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let read = tokio::time::timeout(
            Duration::from_secs(3),
            h.get("demo", &format!("/v1/tasks/{id}")),
        )
        .await
        .ok()
        .map(|r| r.status);
        let mut answers = Vec::new();
        for r in requests {
            answers.push(r.await.ok().flatten());
        }
        (answers, read)
    });
    // On failure, threads stuck in open() must not keep the test waiting.
    rt.shutdown_timeout(Duration::from_millis(100));
    assert_eq!(read, Some(200), "a store read during 20 FIFO requests");
    for answer in fifo_answers {
        let (status, took) = answer.expect("the FIFO request was answered");
        assert_eq!(status, 404);
        assert!(took < Duration::from_secs(2), "answered after {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_is_streamed_whole() {
    let dir = tempfile::tempdir().unwrap();
    // 24 MiB of bytes that are not one repeated pattern (an xorshift).
    let mut bytes = Vec::with_capacity(24 << 20);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while bytes.len() < 24 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(dir.path().join("big.bin"), &bytes).unwrap();
    let h = serve(dir.path()).await;
    let r = h.req("GET", "/big.bin", &[], "").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-length"),
        Some(bytes.len().to_string().as_str())
    );
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert!(r.body[..] == bytes[..], "the bytes served are the file's");
}

//! The notify sender reads a receiver's answer up to
//! `notify::REPLY_LIMIT` and no further: a receiver on loopback answers
//! 200 with a body that never ends, and the notification is delivered
//! (its status decides) while the sender stops reading and closes the
//! connection, long before the response timeout.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use taskwire_server::notify::REPLY_LIMIT;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The receiver stops writing here even if nobody stops reading (the old
/// sender read on until its timeout): the test must not eat the machine.
const WRITE_AT_MOST: usize = 64 * 1024 * 1024;

/// What the receiver saw of each post.
#[derive(Debug, Default, Clone)]
struct Answered {
    posts: usize,
    /// Body bytes it managed to write on the last connection.
    written: usize,
    /// When it began answering, and when it found the connection closed.
    started: Option<Instant>,
    closed: Option<Instant>,
}

/// A receiver that reads the post and answers `200` with a chunked body
/// it writes for as long as the connection takes it.
async fn endless_receiver() -> (String, Arc<Mutex<Answered>>) {
    let socket = TcpSocket::new_v4().unwrap();
    // A small send buffer: what it "wrote" is close to what was read.
    socket.set_send_buffer_size(16 * 1024).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(16).unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Answered>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(answer_endlessly(sock, Arc::clone(&seen2)));
        }
    });
    (url, seen)
}

async fn answer_endlessly(mut sock: TcpStream, seen: Arc<Mutex<Answered>>) {
    if read_request(&mut sock).await.is_none() {
        return;
    }
    {
        let mut s = seen.lock().unwrap();
        s.posts += 1;
        s.written = 0;
        s.started = Some(Instant::now());
        s.closed = None;
    }
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
    let mut chunk = b"4000\r\n".to_vec();
    chunk.extend_from_slice(&[b'x'; 0x4000]);
    chunk.extend_from_slice(b"\r\n");
    let mut open = sock.write_all(head).await.is_ok();
    let mut written = 0;
    while open && written < WRITE_AT_MOST {
        open = sock.write_all(&chunk).await.is_ok();
        if open {
            written += 0x4000;
            seen.lock().unwrap().written = written;
        }
    }
    // Never ends the body: waits for the sender to close.
    let mut sink = [0u8; 1024];
    while open {
        open = matches!(sock.read(&mut sink).await, Ok(n) if n > 0);
    }
    seen.lock().unwrap().closed = Some(Instant::now());
}

/// Reads a request head and its `content-length` body.
async fn read_request(sock: &mut TcpStream) -> Option<()> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length: usize = text
            .split("\r\n")
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if got.len() >= end + 4 + length {
            return Some(());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_with_an_endless_body_is_delivered_and_read_only_up_to_the_cap() {
    let (url, seen) = endless_receiver().await;
    let h = harness(|c| {
        c.notify_url = Some(url);
        // Long: only the reply cap can end the read in time.
        c.notify_timeout_ms = 20_000;
    })
    .await;
    h.succeeded_task("demo").await;

    // Delivered: its 2xx counts, the body past the cap notwithstanding.
    let t0 = Instant::now();
    let mut undelivered = u64::MAX;
    while t0.elapsed() < Duration::from_secs(5) {
        undelivered = h.state().store.outbox_backlog().await.unwrap().undelivered;
        if undelivered == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(undelivered, 0, "the 200 was not counted delivered in 5 s");

    // The sender closed the connection soon after the cap.
    let t0 = Instant::now();
    while seen.lock().unwrap().closed.is_none() && t0.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.posts, 1, "delivered at the first post: {seen:?}");
    let (Some(started), Some(closed)) = (seen.started, seen.closed) else {
        panic!("the sender still reads after 3 s: {seen:?}");
    };
    assert!(
        closed - started < Duration::from_secs(3),
        "closed only after {:?}",
        closed - started
    );
    // What it wrote: what the sender read (the cap and hyper's buffer)
    // plus what the kernel buffers held when it closed; the old sender
    // read all 64 MiB the receiver was willing to write.
    let bound = REPLY_LIMIT + 4 * 1024 * 1024;
    assert!(
        seen.written < bound,
        "the receiver wrote {} bytes before the sender closed (bound {bound})",
        seen.written
    );
}

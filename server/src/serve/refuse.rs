//! Past the connection cap: a whole 503 `connection-limit` with
//! `Retry-After`, written on the accepted socket, which is then closed in
//! a way that lets the client read it.
//!
//! Accepting and answering (rather than leaving connections in the
//! kernel's backlog, or dropping them) tells a client at once to come
//! back later, and keeps `accept` from ever failing for lack of
//! descriptors: each refused socket is open for at most [`WAIT_FOR_HEAD`]
//! plus [`LINGER`], and at most [`MAX_LINGERING`] at once (inside the
//! reserve of [`crate::limits`]); past those, the answer is written at
//! once and the socket closed.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::ApiError;

/// Seconds a refused client is told to wait: connections come and go
/// quickly (a head has `--header-timeout-ms`, an idle one
/// `--idle-timeout-ms`).
pub const CONNECTION_RETRY_AFTER_SECS: u32 = 1;

/// Refused sockets answered and closed at leisure, at most.
const MAX_LINGERING: usize = 32;

/// How long a refused socket waits for its request head, at most.
const WAIT_FOR_HEAD: Duration = Duration::from_millis(500);

/// A refused request head is read up to this much, at most.
const MAX_HEAD_READ: usize = 16 * 1024;

/// After the answer, what the client still sends is read (and dropped) up
/// to this much before the socket is closed anyway: the lingering is for a
/// client's last bytes, not for a client that never stops.
const MAX_DRAIN: usize = 64 * 1024;

/// How long a refused socket is then kept for its answer to be read.
const LINGER: Duration = Duration::from_secs(1);

/// How often the refusals are reported on stderr, at most.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Answers connections past the cap (one per accept loop), and reports
/// what the cap did.
pub(super) struct Refuser {
    flag: &'static str,
    answer: Bytes,
    max: usize,
    lingering: Arc<AtomicUsize>,
    refused: u64,
    reclaimed: u64,
    reported: Option<Instant>,
}

impl Refuser {
    pub(super) fn new(flag: &'static str, max_connections: usize) -> Self {
        let answer = ApiError::connection_limit(max_connections, CONNECTION_RETRY_AFTER_SECS);
        Refuser {
            flag,
            answer: Bytes::from(answer.to_http()),
            max: max_connections,
            lingering: Arc::new(AtomicUsize::new(0)),
            refused: 0,
            reclaimed: 0,
            reported: None,
        }
    }

    /// Counts a connection closed to make room for a new one (reported
    /// with the refusals).
    pub(super) fn reclaimed(&mut self) {
        self.reclaimed += 1;
        self.report();
    }

    /// Answers 503 on `stream` and closes it.
    pub(super) fn refuse(&mut self, stream: TcpStream) {
        self.refused += 1;
        self.report();
        if self.lingering.load(Ordering::Relaxed) < MAX_LINGERING {
            self.lingering.fetch_add(1, Ordering::Relaxed);
            let slot = Lingering(Arc::clone(&self.lingering));
            tokio::spawn(answer_and_linger(stream, self.answer.clone(), slot));
        } else {
            // Too many already lingering: answer with what fits in the
            // socket buffer right now (all of it, on a fresh socket) and
            // close.
            discard_ready(&stream);
            let _ = stream.try_write(&self.answer);
        }
    }

    /// One line on stderr when the cap is first reached, then at most one
    /// per [`REPORT_EVERY`] while it is.
    fn report(&mut self) {
        let due = match self.reported {
            None => true,
            Some(at) => at.elapsed() >= REPORT_EVERY,
        };
        if due {
            let _ = writeln!(
                std::io::stderr(),
                "taskwire-server: connection limit ({}) reached on {}: {} idle or slow connection(s) closed for new ones, {} answered 503 connection-limit",
                self.max, self.flag, self.reclaimed, self.refused
            );
            self.refused = 0;
            self.reclaimed = 0;
            self.reported = Some(Instant::now());
        }
    }
}

/// Frees a lingering slot when the socket is done.
struct Lingering(Arc<AtomicUsize>);

impl Drop for Lingering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Waits for the request head (a client answered before it has sent its
/// request may take the answer for a broken connection), writes the
/// answer, sends FIN, then reads until the client closes: a socket closed
/// with unread bytes sends RST, and a client receiving RST may discard the
/// answer before reading it.
async fn answer_and_linger(mut stream: TcpStream, answer: Bytes, _slot: Lingering) {
    let _ = tokio::time::timeout(WAIT_FOR_HEAD, read_head(&mut stream)).await;
    let _ = tokio::time::timeout(LINGER, async {
        stream.write_all(&answer).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 512];
        let mut drained = 0;
        while drained < MAX_DRAIN {
            match stream.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        std::io::Result::Ok(())
    })
    .await;
}

/// Reads until the end of a request head (`CRLF CRLF`), the end of the
/// stream, or [`MAX_HEAD_READ`] bytes.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<()> {
    let mut sink = [0u8; 512];
    let mut last_four = 0u32;
    let mut read = 0;
    while read < MAX_HEAD_READ {
        let n = stream.read(&mut sink).await?;
        if n == 0 {
            break;
        }
        read += n;
        for &b in sink.get(..n).unwrap_or_default() {
            last_four = last_four << 8 | u32::from(b);
            if last_four == u32::from_be_bytes(*b"\r\n\r\n") {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Reads and drops whatever the client has already sent (its request
/// head, usually), without waiting.
fn discard_ready(stream: &TcpStream) {
    let mut sink = [0u8; 512];
    for _ in 0..128 {
        match stream.try_read(&mut sink) {
            Ok(n) if n > 0 => continue,
            _ => break,
        }
    }
}

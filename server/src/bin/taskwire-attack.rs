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
//! `--target` aims the attack at another port than the one the normal
//! client asks (`--addr`, the API): e.g. the metrics port
//! (`--metrics-listen`), to see that a flood there leaves the API alone.
//!
//! 20,000 connections need 20,000 descriptors on both sides (`ulimit -n`)
//! and more source ports than one address has: connections are spread
//! over `--sources` loopback addresses 127.0.0.2, 127.0.0.3, …

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

// In a directory of their own: cargo takes every file in src/bin/ for a
// binary.
#[path = "taskwire-attack/attack.rs"]
mod attack;
#[path = "taskwire-attack/probe.rs"]
mod probe;
#[path = "taskwire-attack/report.rs"]
mod report;

use attack::{attack_bytes, attack_once, Tally};
use probe::{create_task, probe};
use report::{report, sample};

#[derive(Parser)]
#[command(
    name = "taskwire-attack",
    about = "Slow-client attacks on a loopback taskwire-server"
)]
struct Args {
    /// The API's address, which the normal client asks (loopback only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Where the attack connections go (loopback only; default: --addr),
    /// e.g. the server's --metrics-listen address.
    #[arg(long)]
    target: Option<SocketAddr>,
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

#[tokio::main]
async fn main() -> Res<()> {
    let args = Args::parse();
    let target = args.target.unwrap_or(args.addr);
    for (flag, addr) in [("--addr", args.addr), ("--target", target)] {
        if !addr.ip().is_loopback() {
            return Err(format!("{flag} {addr}: loopback addresses only").into());
        }
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
    let request = Arc::new(attack_bytes(&args.attack, &auth, target));
    println!(
        "{} attack connections to {target} from {} source addresses for {} s; normal client on {}",
        args.conns, args.sources, args.seconds, args.addr
    );
    let mut attackers = Vec::with_capacity(args.conns);
    for i in 0..args.conns {
        let source = Ipv4Addr::new(127, 0, 0, 2 + (i % usize::from(args.sources.max(1))) as u8);
        let (tally, request) = (Arc::clone(&tally), Arc::clone(&request));
        let (addr, trickle) = (target, Duration::from_millis(args.trickle_ms.max(1)));
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

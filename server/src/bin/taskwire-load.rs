//! `taskwire-load`: the loopback load client behind the numbers in
//! server/README.md. Three scenarios, each bounded in count and time:
//!
//! - `hold`: N concurrent held long-polls; prints the server's RSS
//!   (`--again`: then a second time on the same keep-alive connections).
//! - `fanout`: W watchers of one task; time from a callback to the last
//!   watcher receiving it, over T trials (p50/p99).
//! - `callbacks`: C connections posting signed callbacks for S seconds;
//!   durable callbacks per second (each answer comes after its commit).
//! - `slow-body`: C unauthenticated callbacks that send most of a 64 KiB
//!   body and stall; prints the server's RSS (see `load/slow_body.rs`).
//! - `fill`: N tasks × 5 callbacks, then the database's bytes per task
//!   and per table, SQLite or PostgreSQL (`fill.rs`).
//! - `soak`: steady churn of tasks, callbacks, long-polls and SSE streams
//!   for M minutes, the server's RSS once a minute (`soak.rs`).
//! - `batch`: clients each holding a long-poll on a batch: the server's
//!   RSS, the wake from one commit, a reconnect's bytes (`batch.rs`).
//! - `browser`: a page's watch-only browser token sends stalled batch
//!   bodies, or floods long-polls while another tenant long-polls
//!   (`browser.rs`).
//! - `quota`: tenant A floods creates and long-polls past its quotas
//!   while tenant B runs a steady load; B's latencies with and without
//!   the flood (`quota.rs`).
//! - `work`: the work queue: claim → start latency with idle workers
//!   waiting, tasks/s through claim, progress and succeed, and the RSS
//!   with many held claims (`work.rs`).
//!
//! Several instances (PostgreSQL): `--addr A,B` spreads `callbacks`'
//! connections over the addresses, and `fanout` holds its watchers on the
//! first address while the callback goes to the last one (commit on B,
//! watchers woken on A).
//!
//! Loopback only: every `--addr` must be a 127.0.0.0/8 address.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use taskwire_server::client::Conn;
use taskwire_server::signature::{Secret, DEV_SECRET};
use wire::{progress, resumed, start};

#[path = "load/slow_body.rs"]
mod slow_body;

// In a directory of their own: cargo takes every file in src/bin/ for a
// binary.
#[path = "taskwire-load/batch.rs"]
mod batch;
#[path = "taskwire-load/browser.rs"]
mod browser;
#[path = "taskwire-load/fill.rs"]
mod fill;
#[path = "taskwire-load/quota.rs"]
mod quota;
#[path = "taskwire-load/soak.rs"]
mod soak;
#[path = "taskwire-load/wire.rs"]
mod wire;
#[path = "taskwire-load/work.rs"]
mod work;

#[derive(Parser)]
#[command(
    name = "taskwire-load",
    about = "Loopback load client for taskwire-server"
)]
struct Args {
    /// Server address (loopback only); a comma-separated list for several
    /// instances of one deployment.
    #[arg(
        long,
        visible_alias = "target",
        default_value = "127.0.0.1:8080",
        value_delimiter = ','
    )]
    addr: Vec<String>,
    /// Bearer token.
    #[arg(long, default_value = "demo")]
    token: String,
    /// Callback secret.
    #[arg(long, default_value = DEV_SECRET, hide_default_value = true)]
    secret: String,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand)]
enum Scenario {
    /// Hold N long-polls at once and report the server's RSS.
    Hold {
        /// Held requests.
        #[arg(long, default_value_t = 10_000)]
        n: usize,
        /// Tasks they are spread over.
        #[arg(long, default_value_t = 100)]
        tasks: usize,
        /// Server pid, to read its RSS from /proc.
        #[arg(long)]
        pid: Option<u32>,
        /// After the wake, hold each connection a second time (keep-alive:
        /// the server's buffers have now been written once) and report
        /// the RSS again.
        #[arg(long)]
        again: bool,
    },
    /// Time a callback's fan-out to W watchers of one task.
    Fanout {
        /// Watchers.
        #[arg(long, default_value_t = 1_000)]
        watchers: usize,
        /// Trials.
        #[arg(long, default_value_t = 30)]
        trials: usize,
    },
    /// Durable callbacks per second.
    Callbacks {
        /// Concurrent connections.
        #[arg(long, default_value_t = 64)]
        conns: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Callbacks that change nothing (the same progress again under a
        /// new id, as frequent heartbeats are): each writes no task row,
        /// only its signed request (store/callback_replays.rs).
        #[arg(long)]
        unchanged: bool,
    },
    /// Unauthenticated callbacks that send most of their body and stall:
    /// the server's RSS while they are held.
    SlowBody(slow_body::Args),
    /// N tasks × 5 callbacks, then the database's size per task and table.
    Fill {
        /// Tasks to create.
        #[arg(long, default_value_t = 50_000)]
        tasks: u64,
        /// Concurrent connections.
        #[arg(long, default_value_t = 32)]
        conns: usize,
        /// The database to report on: the server's SQLite file
        /// (`DIR/taskwire.sqlite3`) or its `postgres://` URL (a database
        /// of its own: every table in it is counted).
        #[arg(long)]
        db: Option<String>,
    },
    /// Steady churn for M minutes; the server's RSS once a minute.
    Soak(soak::SoakArgs),
    /// Tenant A floods past its quotas; tenant B's latencies with and
    /// without the flood.
    Quota(quota::QuotaArgs),
    /// Clients following batches: RSS while held, the wake from one
    /// commit, and a reconnect's bytes.
    Batch(batch::BatchArgs),
    /// What one page's watch-only browser token can do (a `--demo`
    /// server): stalled batch bodies, or a long-poll flood while another
    /// tenant long-polls.
    Browser(browser::BrowserArgs),
    /// The work queue: claim latency with idle workers waiting, tasks/s
    /// through claim → progress → succeed, RSS with held claims.
    Work(work::WorkArgs),
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::main]
async fn main() -> Res<()> {
    let args = Args::parse();
    for addr in &args.addr {
        let ip = addr.rsplit_once(':').map_or("", |(h, _)| h);
        if !(ip.starts_with("127.") || ip == "localhost" || ip == "[::1]") {
            return Err(format!("--addr {addr}: loopback addresses only").into());
        }
    }
    let Some(first) = args.addr.first() else {
        return Err("--addr: at least one address".into());
    };
    let ctx = Arc::new(Ctx {
        addr: first.clone(),
        addrs: args.addr.clone(),
        auth: format!("Bearer {}", args.token),
        secret: Secret::parse(&args.secret)?,
    });
    match args.scenario {
        Scenario::Hold {
            n,
            tasks,
            pid,
            again,
        } => hold(ctx, n, tasks, pid, again).await,
        Scenario::Fanout { watchers, trials } => fanout(ctx, watchers, trials).await,
        Scenario::Callbacks {
            conns,
            seconds,
            unchanged,
        } => callbacks(ctx, conns, seconds, unchanged).await,
        Scenario::SlowBody(args) => {
            let task = ctx.create(&mut Conn::open(&ctx.addr).await?).await?;
            slow_body::run(&ctx.addr, &task, args, rss_kib).await
        }
        Scenario::Fill { tasks, conns, db } => fill::fill(ctx, tasks, conns, db).await,
        Scenario::Soak(args) => soak::soak(ctx, args).await,
        Scenario::Quota(args) => quota::quota(ctx, args).await,
        Scenario::Batch(args) => batch::batch(ctx, args).await,
        Scenario::Browser(args) => browser::run(&ctx.addr, args, rss_kib).await,
        Scenario::Work(args) => work::work(ctx, args).await,
    }
}

struct Ctx {
    /// Where watchers (and `hold`) connect.
    addr: String,
    /// Every instance; `fanout` commits on the last one.
    addrs: Vec<String>,
    auth: String,
    secret: Secret,
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

async fn hold(ctx: Arc<Ctx>, n: usize, tasks: usize, pid: Option<u32>, again: bool) -> Res<()> {
    let mut conn = Conn::open(&ctx.addr).await?;
    let mut ids = Vec::new();
    for _ in 0..tasks.max(1) {
        ids.push(ctx.create(&mut conn).await?);
    }
    if let Some(pid) = pid {
        println!("server RSS before: {} KiB", rss_kib(pid).unwrap_or(0));
    }
    let returned = Arc::new(AtomicU64::new(0));
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        let ctx = Arc::clone(&ctx);
        let id = ids[i % ids.len()].clone();
        let returned = Arc::clone(&returned);
        held.push(tokio::spawn(async move {
            let mut c = Conn::open(&ctx.addr).await?;
            let (mut cursor, mut woken) = (0, true);
            for _ in 0..=u64::from(again) {
                let path = format!("/v1/tasks/{id}/resume?cursor={cursor}&waitMs=30000");
                let r = c
                    .send("GET", &path, &[("authorization", &ctx.auth)], "")
                    .await?;
                returned.fetch_add(1, Ordering::Relaxed);
                let answer = resumed(&r);
                woken &= answer.mode == "delta";
                cursor = answer.task.and_then(|t| t.version).unwrap_or(cursor);
            }
            Res::Ok(woken)
        }));
        if i % 500 == 499 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let early = returned.load(Ordering::Relaxed);
    println!(
        "held long-polls: {} (returned early: {early})",
        n as u64 - early
    );
    if let Some(pid) = pid {
        println!(
            "server RSS while holding {n}: {} KiB",
            rss_kib(pid).unwrap_or(0)
        );
    }
    // Release them all with one callback per task.
    let mut t = Instant::now();
    for id in &ids {
        ctx.callback(&mut conn, id, "start", &start()).await?;
    }
    if again {
        // Every connection is held again once its first answer arrived.
        let until = Instant::now() + Duration::from_secs(30);
        while returned.load(Ordering::Relaxed) < n as u64 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let early = returned.load(Ordering::Relaxed) - n as u64;
        println!(
            "held again on the same connections: {} (returned early: {early})",
            n as u64 - early
        );
        if let Some(pid) = pid {
            println!(
                "server RSS while holding {n} again: {} KiB",
                rss_kib(pid).unwrap_or(0)
            );
        }
        t = Instant::now();
        for id in &ids {
            ctx.callback(&mut conn, id, "p1", &progress(1)).await?;
        }
    }
    let mut woken = 0;
    for h in held {
        if matches!(h.await, Ok(Ok(true))) {
            woken += 1;
        }
    }
    println!("woken with a delta: {woken}/{n} in {:?}", t.elapsed());
    Ok(())
}

async fn fanout(ctx: Arc<Ctx>, watchers: usize, trials: usize) -> Res<()> {
    // The task is created and moved through the last instance; the
    // watchers are held on the first.
    let commit_addr = ctx.addrs.last().unwrap_or(&ctx.addr).clone();
    let mut conn = Conn::open(&commit_addr).await?;
    let id = ctx.create(&mut conn).await?;
    ctx.callback(&mut conn, &id, "start", &start()).await?;
    let mut conns = Vec::with_capacity(watchers);
    for _ in 0..watchers {
        conns.push(Conn::open(&ctx.addr).await?);
    }
    let mut lasts = Vec::new();
    let mut all = Vec::new();
    for trial in 0..trials.clamp(1, 99) {
        let cursor = trial as u64 + 1;
        let mut tasks = Vec::with_capacity(watchers);
        for mut c in conns.drain(..) {
            let ctx = Arc::clone(&ctx);
            let path = format!("/v1/tasks/{id}/resume?cursor={cursor}&waitMs=30000");
            tasks.push(tokio::spawn(async move {
                let r = c
                    .send("GET", &path, &[("authorization", &ctx.auth)], "")
                    .await;
                (c, r.map(|_| Instant::now()))
            }));
        }
        // Let every request reach the server and be held.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let t0 = Instant::now();
        ctx.callback(&mut conn, &id, &format!("p{cursor}"), &progress(cursor))
            .await?;
        let mut last = Duration::ZERO;
        for t in tasks {
            let (c, at) = t.await?;
            let d = at?.saturating_duration_since(t0);
            all.push(d);
            last = last.max(d);
            conns.push(c);
        }
        lasts.push(last);
    }
    lasts.sort();
    all.sort();
    let pct = |v: &[Duration], p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    println!("watchers on {}, callbacks to {commit_addr}", ctx.addr);
    println!(
        "{watchers} watchers, {} trials: last watcher p50 {:?}, p99 {:?}, max {:?}",
        lasts.len(),
        pct(&lasts, 0.5),
        pct(&lasts, 0.99),
        lasts[lasts.len() - 1]
    );
    println!(
        "every watcher (n={}): p50 {:?}, p99 {:?}",
        all.len(),
        pct(&all, 0.5),
        pct(&all, 0.99)
    );
    Ok(())
}

async fn callbacks(ctx: Arc<Ctx>, conns: usize, seconds: u64, unchanged: bool) -> Res<()> {
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut workers = Vec::new();
    let t = Instant::now();
    for i in 0..conns {
        let ctx = Arc::clone(&ctx);
        let done = Arc::clone(&done);
        let addr = ctx.addrs[i % ctx.addrs.len()].clone();
        workers.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await?;
            while Instant::now() < until {
                let id = ctx.create(&mut conn).await?;
                ctx.callback(&mut conn, &id, "s", &start()).await?;
                done.fetch_add(1, Ordering::Relaxed);
                for p in 1..=100 {
                    if Instant::now() >= until {
                        break;
                    }
                    let event = progress(if unchanged { 1 } else { p });
                    ctx.callback(&mut conn, &id, &format!("p{p}"), &event)
                        .await?;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            Res::Ok(())
        }));
    }
    for w in workers {
        w.await??;
    }
    let n = done.load(Ordering::Relaxed);
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{n} durable callbacks in {secs:.1} s over {conns} connections to {}: {:.0}/s",
        ctx.addrs.join(", "),
        n as f64 / secs
    );
    Ok(())
}

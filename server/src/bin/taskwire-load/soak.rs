//! `soak`: steady churn for M minutes, the server's RSS once a minute.
//! The numbers behind "Soak" in server/README.md.
//!
//! Each second `--tasks-per-s` tasks are created on keep-alive
//! connections and taken through 5 callbacks `--step-ms` apart (start,
//! three progress steps, succeed). Every `--watched-every`-th task gets
//! `--watchers` long-polls, each on a fresh connection, held at version 1
//! and woken together by the next callback; every `--sse-every`-th task an
//! SSE stream (fresh connection) that follows it to its end. The defaults
//! are the churn of the issue that found the leak: 300 tasks/s, 1,500
//! callbacks/s, 400 long-polls/s, ~27 SSE opens/s.
//!
//! Each line: minutes, RSS (and its anonymous and shared parts, from
//! `/proc/PID/status`), the rates reached, errors, and jobs skipped
//! because every worker was busy (the load client fell behind). The hub's
//! slots are checked by `tests/hub_slots.rs`, not here: the demo's stats
//! are per tenant and do not count another tenant's watched tasks.
//! After each pass it waits `--idle-s` and prints the idle RSS; at the end,
//! the RSS slope over the second half of each pass.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use taskwire_server::client::{self, Conn};
use tokio::sync::mpsc;

use crate::fill::lifecycle;
use crate::{Ctx, Res};

/// The `soak` flags.
#[derive(Args, Clone, Debug)]
pub struct SoakArgs {
    /// Minutes of load per pass.
    #[arg(long, default_value_t = 30)]
    minutes: u64,
    /// Passes (each followed by an idle pause).
    #[arg(long, default_value_t = 1)]
    passes: u32,
    /// Seconds between samples (60: one line a minute).
    #[arg(long, default_value_t = 60)]
    every_s: u64,
    /// Idle seconds after each pass before the idle RSS is read.
    #[arg(long, default_value_t = 60)]
    idle_s: u64,
    /// Tasks created per second (5 callbacks each).
    #[arg(long, default_value_t = 300)]
    tasks_per_s: u64,
    /// Milliseconds between a task's callbacks.
    #[arg(long, default_value_t = 150)]
    step_ms: u64,
    /// Every N-th task is watched by `--watchers` long-polls.
    #[arg(long, default_value_t = 3)]
    watched_every: u64,
    /// Long-polls per watched task, woken together.
    #[arg(long, default_value_t = 4)]
    watchers: u64,
    /// Every N-th task is followed by an SSE stream.
    #[arg(long, default_value_t = 11)]
    sse_every: u64,
    /// Server pid, to read its RSS from /proc.
    #[arg(long)]
    pid: Option<u32>,
}

#[derive(Default)]
struct Counters {
    tasks: AtomicU64,
    callbacks: AtomicU64,
    polls: AtomicU64,
    streams: AtomicU64,
    errors: AtomicU64,
    behind: AtomicU64,
    in_flight: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Counters {
    fn error(&self, e: impl std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some(e.to_string());
    }

    fn snapshot(&self) -> [u64; 4] {
        [
            self.tasks.load(Ordering::Relaxed),
            self.callbacks.load(Ordering::Relaxed),
            self.polls.load(Ordering::Relaxed),
            self.streams.load(Ordering::Relaxed),
        ]
    }
}

/// Memory of the server process, in MB: total, anonymous, shared.
fn rss_mb(pid: Option<u32>) -> Option<(f64, f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    let kib = |key: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<f64>().ok()
    };
    Some((
        kib("VmRSS:")? / 1024.0,
        kib("RssAnon:")? / 1024.0,
        kib("RssShmem:")? / 1024.0,
    ))
}

/// Runs the soak (see the module docs).
pub async fn soak(ctx: Arc<Ctx>, args: SoakArgs) -> Res<()> {
    let mut slopes = Vec::new();
    println!(
        "{:>6} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>7} {:>7}",
        "min", "rss MB", "anon", "shmem", "tasks/s", "cb/s", "polls/s", "sse/s", "errors", "behind"
    );
    for pass in 1..=args.passes.max(1) {
        let samples = pass_once(&ctx, &args, pass).await?;
        if let Some(slope) = slope_of_second_half(&samples) {
            slopes.push((pass, slope));
        }
        tokio::time::sleep(Duration::from_secs(args.idle_s)).await;
        let idle = rss_mb(args.pid).map_or("-".into(), |m| format!("{:.1}", m.0));
        println!("pass {pass}: idle RSS after {} s: {idle} MB", args.idle_s);
    }
    for (pass, slope) in slopes {
        println!("pass {pass}: RSS slope over its second half: {slope:+.3} MB/min");
    }
    Ok(())
}

/// One pass: load for `minutes`, a line per sample; returns (minute, RSS).
async fn pass_once(ctx: &Arc<Ctx>, args: &SoakArgs, pass: u32) -> Res<Vec<(f64, f64)>> {
    let counters = Arc::new(Counters::default());
    let lifecycle_s = 4.0 * args.step_ms as f64 / 1000.0 + 0.25;
    let workers = ((args.tasks_per_s as f64 * lifecycle_s * 1.5).ceil() as usize).max(4);
    let (jobs, rx) = mpsc::channel::<u64>(workers);
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (ctx, args, counters, rx) = (
            Arc::clone(ctx),
            args.clone(),
            Arc::clone(&counters),
            Arc::clone(&rx),
        );
        handles.push(tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            loop {
                let Some(n) = rx.lock().await.recv().await else {
                    return;
                };
                let c = match conn.take() {
                    Some(c) => c,
                    None => match Conn::open(&ctx.addr).await {
                        Ok(c) => c,
                        Err(e) => {
                            counters.error(format!("connect: {e}"));
                            continue;
                        }
                    },
                };
                match one_task(&ctx, &args, &counters, c, n).await {
                    Ok(c) => conn = Some(c),
                    Err(e) => counters.error(e),
                }
            }
        }));
    }
    let start = Instant::now();
    let until = start + Duration::from_secs(args.minutes * 60);
    let offset = f64::from(pass - 1) * (args.minutes as f64 + args.idle_s as f64 / 60.0);
    let mut samples = Vec::new();
    let mut next_sample = start + Duration::from_secs(args.every_s.max(1));
    let mut last = ([0u64; 4], start);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut due = 0.0f64;
    let mut n = 0u64;
    while Instant::now() < until {
        tick.tick().await;
        due += args.tasks_per_s as f64 / 10.0;
        while due >= 1.0 {
            due -= 1.0;
            if jobs.try_send(n).is_err() {
                counters.behind.fetch_add(1, Ordering::Relaxed);
            }
            n += 1;
        }
        if Instant::now() >= next_sample {
            next_sample += Duration::from_secs(args.every_s.max(1));
            let now = Instant::now();
            let counts = counters.snapshot();
            let secs = now.duration_since(last.1).as_secs_f64().max(1e-9);
            let before = last.0;
            let rate = |i: usize| (counts[i] - before[i]) as f64 / secs;
            last = (counts, now);
            let minute = offset + now.duration_since(start).as_secs_f64() / 60.0;
            let mem = rss_mb(args.pid);
            if let Some(m) = mem {
                samples.push((minute, m.0));
            }
            let (rss, anon, shmem) = mem.map_or(("-".into(), "-".into(), "-".into()), |m| {
                (
                    format!("{:.1}", m.0),
                    format!("{:.1}", m.1),
                    format!("{:.1}", m.2),
                )
            });
            println!(
                "{minute:>6.1} {rss:>8} {anon:>8} {shmem:>8} {:>8.0} {:>8.0} {:>8.0} {:>6.1} {:>7} {:>7}",
                rate(0),
                rate(1),
                rate(2),
                rate(3),
                counters.errors.load(Ordering::Relaxed),
                counters.behind.load(Ordering::Relaxed),
            );
            let last_error = counters
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(e) = last_error {
                println!("       last error: {e}");
            }
        }
    }
    drop(jobs);
    for h in handles {
        let _ = h.await;
    }
    // Watchers and streams of the last tasks end with their task.
    let drain = Instant::now() + Duration::from_secs(15);
    while counters.in_flight.load(Ordering::Relaxed) > 0 && Instant::now() < drain {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(samples)
}

/// One task through its lifecycle on `conn` (returned for reuse), with
/// its watchers and stream.
async fn one_task(
    ctx: &Arc<Ctx>,
    args: &SoakArgs,
    counters: &Arc<Counters>,
    mut conn: Conn,
    n: u64,
) -> Res<Conn> {
    let id = ctx.create(&mut conn).await?;
    counters.tasks.fetch_add(1, Ordering::Relaxed);
    let events = lifecycle(&id);
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(args.step_ms)).await;
        }
        ctx.callback(&mut conn, &id, &format!("cb-{i}"), event)
            .await?;
        counters.callbacks.fetch_add(1, Ordering::Relaxed);
        if i == 0 {
            if n % args.watched_every.max(1) == 0 {
                for _ in 0..args.watchers {
                    spawn_poll(ctx, counters, &id);
                }
            }
            if n % args.sse_every.max(1) == 0 {
                spawn_stream(ctx, counters, &id);
            }
        }
    }
    Ok(conn)
}

/// A long-poll at version 1 on a fresh connection (woken by the task's
/// second callback).
fn spawn_poll(ctx: &Arc<Ctx>, counters: &Arc<Counters>, id: &str) {
    let (ctx, counters) = (Arc::clone(ctx), Arc::clone(counters));
    let path = format!("/v1/tasks/{id}/resume?cursor=1&waitMs=10000");
    counters.in_flight.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        match client::request(&ctx.addr, "GET", &path, &[("authorization", &ctx.auth)], "").await {
            Ok(r) if r.status == 200 => {
                counters.polls.fetch_add(1, Ordering::Relaxed);
            }
            Ok(r) => counters.error(format!("poll: {}", r.status)),
            Err(e) => counters.error(format!("poll: {e}")),
        }
        counters.in_flight.fetch_sub(1, Ordering::Relaxed);
    });
}

/// An SSE stream from version 1 to the task's end, on a fresh connection.
fn spawn_stream(ctx: &Arc<Ctx>, counters: &Arc<Counters>, id: &str) {
    let (ctx, counters) = (Arc::clone(ctx), Arc::clone(counters));
    let path = format!("/v1/tasks/{id}/events?cursor=1");
    counters.in_flight.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let read = async {
            use http_body_util::BodyExt;
            let mut conn = Conn::open(&ctx.addr).await?;
            let res = conn
                .stream("GET", &path, &[("authorization", &ctx.auth)], "")
                .await?;
            if res.status() != 200 {
                return Err(format!("sse: {}", res.status()).into());
            }
            // A task's whole stream is a few KB; 1 MiB bounds a runaway.
            let body = http_body_util::Limited::new(res.into_body(), 1 << 20);
            let body = tokio::time::timeout(Duration::from_secs(30), body.collect())
                .await
                .map_err(|_| "sse: no end after 30 s")??;
            let text = body.to_bytes();
            if !text.windows(11).any(|w| w == b"\"succeeded\"") {
                return Err("sse: ended before the task did".into());
            }
            Res::Ok(())
        };
        match read.await {
            Ok(()) => {
                counters.streams.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => counters.error(e),
        }
        counters.in_flight.fetch_sub(1, Ordering::Relaxed);
    });
}

/// Least-squares slope (MB per minute) of the second half of a pass.
fn slope_of_second_half(samples: &[(f64, f64)]) -> Option<f64> {
    let half = &samples[samples.len() / 2..];
    if half.len() < 2 {
        return None;
    }
    let n = half.len() as f64;
    let (sx, sy) = half
        .iter()
        .fold((0.0, 0.0), |(x, y), (a, b)| (x + a, y + b));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = half.iter().fold((0.0, 0.0), |(num, den), (x, y)| {
        (num + (x - mx) * (y - my), den + (x - mx) * (x - mx))
    });
    (den > 0.0).then(|| num / den)
}

//! `work`: the work queue (PROTOCOL.md §Workers) under load, the numbers
//! behind "Work queue" in server/README.md. Each phase claims a kind of
//! its own (`bench-<phase>-<pid>`), so runs on one server never take each
//! other's tasks:
//!
//! 1. **latency**: `--idle-workers` claims held (`waitMs` 30000, `max`
//!    1), each asked again once answered; `--tasks` tasks created one at
//!    a time, `--gap-ms` apart; for each, the time from the create's
//!    answer to the answer of the held claim carrying it (p50/p99).
//! 2. **throughput**: `--tput-tasks` tasks created up front in batches;
//!    `--workers` workers each claim one task at a time (`waitMs` 1000)
//!    and send 5 `progress` and a `succeed` (with `attempt`, signed)
//!    until every task is taken: tasks/s, to the last `succeed`.
//! 3. **rss**: `--held` claims held at once: the server's RSS, its CPU
//!    while they wait with nothing to take, then one batch of as many
//!    tasks and the time until every claim has its task.
//!
//! `--backlog N` first queues N tasks of a kind no worker claims.
//! Claims are signed with `--secret` for `--tenant` (`taskwire-tenant`).
//! `--pid` adds the server's RSS and CPU time from /proc (CPU in 1/100 s,
//! Linux's USER_HZ). Held claims count against `--max-watchers`, whose
//! default follows the descriptor limit: start the server under
//! `ulimit -n 20000`, as for `hold`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use taskwire_server::client::Conn;
use taskwire_server::executor_event::ExecutorEvent;
use taskwire_server::signature::callback_body;

use super::{rss_kib, wire, Ctx, Res};

/// One phase of the scenario.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Claim → start latency with idle workers waiting.
    Latency,
    /// Tasks/s through claim, 5 progress, succeed.
    Throughput,
    /// The server's RSS with many held claims.
    Rss,
}

/// The `work` flags.
#[derive(clap::Args)]
pub struct WorkArgs {
    /// Phases to run, in this order.
    #[arg(long, value_delimiter = ',', default_value = "latency,throughput,rss")]
    phases: Vec<Phase>,
    /// The tenant whose queue is claimed (`--token` creates its tasks).
    #[arg(long, default_value = "demo")]
    tenant: String,
    /// latency: held claims waiting for work.
    #[arg(long, default_value_t = 100)]
    idle_workers: usize,
    /// latency: tasks created one at a time.
    #[arg(long, default_value_t = 500)]
    tasks: usize,
    /// latency: pause after each create's answer, in ms.
    #[arg(long, default_value_t = 20)]
    gap_ms: u64,
    /// throughput: concurrent workers, one task each at a time.
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// throughput: tasks created up front.
    #[arg(long, default_value_t = 2_000)]
    tput_tasks: usize,
    /// Items per batch create (1 to 1,000).
    #[arg(long, default_value_t = 1_000)]
    batch: usize,
    /// rss: claims held at once.
    #[arg(long, default_value_t = 1_000)]
    held: usize,
    /// rss: seconds to watch the server's CPU while they wait (at most 20:
    /// the claims hold 30 s).
    #[arg(long, default_value_t = 10)]
    idle_secs: u64,
    /// Tasks of another kind queued first and never claimed (an
    /// application's own executor's backlog in the tenant's queue).
    #[arg(long, default_value_t = 0)]
    backlog: usize,
    /// Server pid, to read its RSS and CPU time from /proc.
    #[arg(long)]
    pid: Option<u32>,
}

/// A lease long enough that nothing lapses during a run.
const HOUR_MS: u64 = 3_600_000;

/// Runs the phases asked for.
pub async fn work(ctx: Arc<Ctx>, args: WorkArgs) -> Res<()> {
    let run = std::process::id();
    if args.backlog > 0 {
        let mut conn = Conn::open(&ctx.addr).await?;
        let kind = format!("bench-backlog-{run}");
        create_batches(&ctx, &mut conn, &kind, args.backlog, args.batch).await?;
        println!("backlog: {} queued tasks of kind {kind}", args.backlog);
    }
    for phase in &args.phases {
        match phase {
            Phase::Latency => latency(&ctx, &args, &format!("bench-latency-{run}")).await?,
            Phase::Throughput => throughput(&ctx, &args, &format!("bench-tput-{run}")).await?,
            Phase::Rss => rss(&ctx, &args, &format!("bench-rss-{run}")).await?,
        }
    }
    Ok(())
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_millis() as f64)
}

/// The server's CPU time (user + system) in 1/100 s.
fn cpu_ticks(pid: Option<u32>) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // After the command's parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// "server CPU 1.23 s (…)" between two readings, or nothing without `--pid`.
fn cpu_since(pid: Option<u32>, before: Option<u64>, per: &str, n: usize) -> String {
    match (before, cpu_ticks(pid)) {
        (Some(a), Some(b)) => {
            let secs = (b - a) as f64 / 100.0;
            format!(
                "; server CPU {secs:.2} s ({:.2} ms per {per})",
                secs * 1000.0 / n.max(1) as f64
            )
        }
        _ => String::new(),
    }
}

/// "p50 …, p99 …, max …" of `v`, sorted here.
fn spread(v: &mut [Duration]) -> String {
    v.sort();
    let at = |p: f64| v.get(((v.len().max(1) - 1) as f64 * p).round() as usize);
    let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(at(0.5)),
        ms(at(0.99)),
        ms(v.last())
    )
}

/// A claim's answer: the tasks taken, each with the attempt it opened.
#[derive(Deserialize)]
struct Claimed {
    tasks: Vec<ClaimedTask>,
}
#[derive(Deserialize)]
struct ClaimedTask {
    id: String,
    attempts: u64,
}
/// A callback's answer: what the worker does next.
#[derive(Deserialize)]
struct Report {
    next: String,
}

/// Claim ids: unique per process.
static CLAIM_SEQ: AtomicU64 = AtomicU64::new(0);

/// A worker: one keep-alive connection, signing its claims and reports.
struct Worker {
    ctx: Arc<Ctx>,
    conn: Conn,
    tenant: String,
}

impl Worker {
    async fn open(ctx: &Arc<Ctx>, tenant: &str) -> Res<Worker> {
        let conn = Conn::open(&ctx.addr).await?;
        let (ctx, tenant) = (Arc::clone(ctx), tenant.to_string());
        Ok(Worker { ctx, conn, tenant })
    }

    /// POSTs `body` signed under the id `id` (with `taskwire-tenant` for a
    /// claim); the answer, read as `T` when it is a 200.
    async fn send<T: for<'a> Deserialize<'a>>(
        &mut self,
        path: &str,
        id: &str,
        body: String,
    ) -> Res<T> {
        let now = (now_ms() / 1000.0) as i64;
        let signed = self.ctx.secret.headers(id, now, body.as_bytes());
        let mut hs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        if path.ends_with("claim") {
            hs.push(("taskwire-tenant", &self.tenant));
        }
        let r = self.conn.send("POST", path, &hs, body).await?;
        if r.status != 200 {
            // Held claims count against --max-watchers (503 watch-limit).
            return Err(format!("{path}: {} {}", r.status, r.text()).into());
        }
        Ok(r.read("answer").map_err(|e| format!("{path}: {e}"))?)
    }

    /// Claims at most one task of `kind`, held up to `wait_ms`.
    async fn claim(&mut self, kind: &str, wait_ms: u64, lease_ms: u64) -> Res<Vec<ClaimedTask>> {
        let body = format!(
            r#"{{"worker":"load","kinds":["{kind}"],"max":1,"waitMs":{wait_ms},"leaseMs":{lease_ms}}}"#
        );
        let n = CLAIM_SEQ.fetch_add(1, Ordering::Relaxed);
        let id = format!("clm-{}-{n}", std::process::id());
        let claimed: Claimed = self.send("/v1/work/claim", &id, body).await?;
        Ok(claimed.tasks)
    }

    /// Sends `event` (stamped now) as report `n` of its attempt; `next`.
    async fn report(&mut self, task: &str, n: u64, mut event: ExecutorEvent) -> Res<String> {
        event.at_ms = Some(now_ms());
        let id = format!("{task}-a{}-{n}", event.attempt.unwrap_or(0));
        let path = format!("/v1/tasks/{task}/callbacks");
        let report: Report = self.send(&path, &id, callback_body(task, &event)).await?;
        Ok(report.next)
    }
}

/// A new task of `kind`, as JSON.
fn new_task(kind: &str) -> String {
    format!(r#"{{"ttlMs":{HOUR_MS},"maxAttempts":1,"kind":"{kind}"}}"#)
}

/// Creates one task of `kind`; its id.
async fn create(ctx: &Ctx, conn: &mut Conn, kind: &str) -> Res<String> {
    let auth = [("authorization", ctx.auth.as_str())];
    let r = conn
        .send("POST", "/v1/tasks", &auth, new_task(kind))
        .await?;
    Ok(wire::created_id(&r).map_err(|e| format!("create: {e}"))?)
}

/// Creates `n` tasks of `kind` in batches of at most `per` items.
async fn create_batches(ctx: &Ctx, conn: &mut Conn, kind: &str, n: usize, per: usize) -> Res<()> {
    let mut left = n;
    while left > 0 {
        let take = left.min(per.clamp(1, 1_000));
        let body = format!(r#"{{"items":[{}]}}"#, vec![new_task(kind); take].join(","));
        let auth = [("authorization", ctx.auth.as_str())];
        let r = conn.send("POST", "/v1/batches", &auth, body).await?;
        let batch: wire::Batch = r
            .read("answer")
            .map_err(|_| format!("batch create: {} {}", r.status, r.text()))?;
        left -= batch.tasks.len().clamp(1, take);
    }
    Ok(())
}

/// Phase 1: see the module docs.
async fn latency(ctx: &Arc<Ctx>, a: &WorkArgs, kind: &str) -> Res<()> {
    let claimed: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut held = Vec::with_capacity(a.idle_workers);
    for _ in 0..a.idle_workers.max(1) {
        let mut worker = Worker::open(ctx, &a.tenant).await?;
        let (claimed, stop, kind) = (Arc::clone(&claimed), Arc::clone(&stop), kind.to_string());
        held.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let tasks = worker.claim(&kind, 30_000, HOUR_MS).await?;
                let at = Instant::now();
                let mut map = claimed.lock().map_err(|_| "poisoned")?;
                for t in tasks {
                    map.insert(t.id, at);
                }
            }
            Res::Ok(())
        }));
    }
    // Let every claim reach the server and be held.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut conn = Conn::open(&ctx.addr).await?;
    let cpu = cpu_ticks(a.pid);
    let t = Instant::now();
    let mut created = Vec::with_capacity(a.tasks);
    for _ in 0..a.tasks {
        let sent = Instant::now();
        let id = create(ctx, &mut conn, kind).await?;
        created.push((id, sent, Instant::now()));
        tokio::time::sleep(Duration::from_millis(a.gap_ms)).await;
    }
    let until = Instant::now() + Duration::from_secs(5);
    let count = || claimed.lock().map_or(0, |m| m.len());
    while count() < a.tasks && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_since(a.pid, cpu, "create", a.tasks);
    // Release the held claims: one task each, then they stop.
    stop.store(true, Ordering::Relaxed);
    create_batches(ctx, &mut conn, kind, held.len(), a.batch).await?;
    for h in held {
        h.await??;
    }
    let map = claimed.lock().map_err(|_| "poisoned")?;
    let (mut from_answer, mut from_sent, mut early, mut missing) = (vec![], vec![], 0, 0);
    for (id, sent, answered) in &created {
        let Some(at) = map.get(id) else {
            missing += 1;
            continue;
        };
        early += usize::from(at < answered);
        from_answer.push(at.saturating_duration_since(*answered));
        from_sent.push(at.saturating_duration_since(*sent));
    }
    println!(
        "latency: {} tasks created one at a time over {secs:.1} s, {} held claims waiting{cpu}",
        a.tasks, a.idle_workers
    );
    println!(
        "  create's answer → held claim's answer: {} ({early} claims answered before the create; \
         {missing} not claimed within 5 s)",
        spread(&mut from_answer)
    );
    println!("  create sent → claim's answer: {}", spread(&mut from_sent));
    Ok(())
}

/// Phase 2: see the module docs.
async fn throughput(ctx: &Arc<Ctx>, a: &WorkArgs, kind: &str) -> Res<()> {
    let mut conn = Conn::open(&ctx.addr).await?;
    let t = Instant::now();
    create_batches(ctx, &mut conn, kind, a.tput_tasks, a.batch).await?;
    let secs = t.elapsed().as_secs_f64();
    println!("throughput: {} tasks created in {secs:.2} s", a.tput_tasks);
    let cpu = cpu_ticks(a.pid);
    let t = Instant::now();
    let taken = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::with_capacity(a.workers);
    for _ in 0..a.workers.max(1) {
        let mut worker = Worker::open(ctx, &a.tenant).await?;
        let (kind, taken, n) = (kind.to_string(), Arc::clone(&taken), a.tput_tasks as u64);
        workers.push(tokio::spawn(async move {
            let (mut done, mut claims, mut reports, mut empty) = (0, vec![], vec![], 0);
            let mut last = Instant::now();
            // Until every task is taken; an empty answer (the claim held
            // 1 s) while some are still queued is counted, and asked again.
            while taken.load(Ordering::Relaxed) < n {
                let c = Instant::now();
                let tasks = worker.claim(&kind, 1_000, 30_000).await?;
                claims.push(c.elapsed());
                let Some(task) = tasks.into_iter().next() else {
                    empty += usize::from(taken.load(Ordering::Relaxed) < n);
                    continue;
                };
                taken.fetch_add(1, Ordering::Relaxed);
                for n in 1..=6 {
                    let mut event = if n < 6 {
                        ExecutorEvent::progress(n * 16, &format!("c{n}"))
                    } else {
                        ExecutorEvent::succeed("https://results.example.com/r", "sha256:00")
                    };
                    event.attempt = Some(task.attempts);
                    let r = Instant::now();
                    let next = worker.report(&task.id, n, event).await?;
                    reports.push(r.elapsed());
                    if n < 6 && next != "continue" {
                        return Err(format!("task {}: next {next}", task.id).into());
                    }
                }
                done += 1;
                last = Instant::now();
            }
            Res::Ok((done, claims, reports, empty, last))
        }));
    }
    let (mut done, mut claims, mut reports, mut empty, mut last) = (0, vec![], vec![], 0, t);
    for w in workers {
        let (d, c, r, e, l) = w.await??;
        (done, empty, last) = (done + d, empty + e, last.max(l));
        claims.extend(c);
        reports.extend(r);
    }
    let secs = (last - t).as_secs_f64();
    let cpu = cpu_since(a.pid, cpu, "task", done);
    println!(
        "  {done} tasks through claim → 5 progress → succeed in {secs:.2} s with {} workers: \
         {:.0} tasks/s, {:.0} requests/s{cpu}",
        a.workers,
        done as f64 / secs,
        (claims.len() + reports.len()) as f64 / secs
    );
    println!("  claims answered empty while tasks were still queued: {empty}");
    println!("  claim: {}", spread(&mut claims));
    println!("  report: {}", spread(&mut reports));
    Ok(())
}

/// Phase 3: see the module docs.
async fn rss(ctx: &Arc<Ctx>, a: &WorkArgs, kind: &str) -> Res<()> {
    let kib = |label: &str| {
        a.pid
            .map(|pid| println!("  server RSS {label}: {} KiB", rss_kib(pid).unwrap_or(0)))
    };
    println!("rss: {} held claims", a.held);
    kib("before");
    let mut held = Vec::with_capacity(a.held);
    for i in 0..a.held {
        let (ctx, tenant, kind) = (Arc::clone(ctx), a.tenant.clone(), kind.to_string());
        held.push(tokio::spawn(async move {
            let mut worker = Worker::open(&ctx, &tenant).await?;
            let tasks = worker.claim(&kind, 30_000, HOUR_MS).await?;
            Res::Ok((tasks.len(), Instant::now()))
        }));
        if i % 500 == 499 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let early = held.iter().filter(|h| h.is_finished()).count();
    println!("  held: {} (returned early: {early})", a.held - early);
    kib(&format!("while holding {}", a.held));
    let secs = a.idle_secs.clamp(1, 20);
    let cpu = cpu_ticks(a.pid);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let cpu = cpu_since(a.pid, cpu, "second", secs as usize);
    println!("  {secs} s of waiting with no work{cpu}");
    let mut conn = Conn::open(&ctx.addr).await?;
    let cpu = cpu_ticks(a.pid);
    let sent = Instant::now();
    create_batches(ctx, &mut conn, kind, a.held, a.batch).await?;
    let answered = Instant::now();
    let (mut woken, mut last) = (0, answered);
    for h in held {
        let (n, at) = h.await??;
        woken += usize::from(n > 0);
        last = last.max(at);
    }
    println!(
        "  {} tasks in batches of {} (answered in {:.1} ms) → {woken}/{} held claims \
         answered with a task, the last {:.1} ms after the batch's answer{}",
        a.held,
        a.batch.clamp(1, 1_000),
        (answered - sent).as_secs_f64() * 1000.0,
        a.held,
        (last - answered).as_secs_f64() * 1000.0,
        cpu_since(a.pid, cpu, "claim", a.held)
    );
    kib("after");
    Ok(())
}

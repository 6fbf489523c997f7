//! `work`: the work queue (PROTOCOL.md §Workers) under load, the numbers
//! behind "Work queue" in server/README.md. Each phase claims a kind of
//! its own (`bench-<phase>-<pid>`), so runs on one server never take each
//! other's tasks:
//!
//! 1. **latency**: `--idle-workers` claims held (`waitMs` 30000, `max`
//!    1), each asked again as soon as it is answered; `--tasks` tasks are
//!    created one at a time, `--gap-ms` apart. For each task, the time
//!    from the create's answer to the answer of the held claim carrying
//!    it (p50/p99).
//! 2. **throughput**: `--tput-tasks` tasks created up front in batches
//!    (`POST /v1/batches`, at most 1,000 items each); `--workers` workers
//!    each claim one task at a time (`waitMs` 0), send 5 `progress` and a
//!    `succeed` (each with its `attempt`, signed) until the queue is
//!    empty: tasks/s.
//! 3. **rss**: `--held` claims held at once: the server's RSS, its CPU
//!    while they wait with nothing to take, then one batch of as many
//!    tasks and the time until every claim has its task.
//!
//! Claims are signed with `--secret` for `--tenant` (`taskwire-tenant`).
//! `--pid` adds the server's RSS and CPU time from /proc (CPU in 1/100 s,
//! Linux's USER_HZ). Held claims count against `--max-watchers`, whose
//! default follows the descriptor limit: start the server under
//! `ulimit -n 20000`, as for `hold`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use taskwire_server::client::Conn;
use taskwire_server::executor_event::ExecutorEvent;
use taskwire_server::signature::callback_body;
use taskwire_wire::to_json;

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
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "latency,throughput,rss"
    )]
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
    /// Server pid, to read its RSS and CPU time from /proc.
    #[arg(long)]
    pid: Option<u32>,
}

/// A lease long enough that nothing lapses during a run.
const HOUR_MS: u64 = 3_600_000;

/// Runs the phases asked for.
pub async fn work(ctx: Arc<Ctx>, args: WorkArgs) -> Res<()> {
    let run = std::process::id();
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

fn pct(v: &[Duration], p: f64) -> Duration {
    v.get(((v.len().max(1) - 1) as f64 * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

/// "p50 …, p99 …, max …" of `v`, sorted here.
fn spread(v: &mut [Duration]) -> String {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms(pct(v, 0.5)),
        ms(pct(v, 0.99)),
        ms(v.last().copied().unwrap_or_default())
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClaimBody<'a> {
    worker: &'a str,
    kinds: [&'a str; 1],
    max: u64,
    wait_ms: u64,
    lease_ms: u64,
}

/// A claim's answer: the tasks taken.
#[derive(Deserialize)]
struct Claimed {
    tasks: Vec<ClaimedTask>,
}

#[derive(Deserialize)]
struct ClaimedTask {
    id: String,
    /// The attempt the claim opened.
    attempts: u64,
}

/// A callback's answer: what the worker does next.
#[derive(Deserialize)]
struct Report {
    next: String,
}

#[derive(Serialize)]
struct NewBatch<'a> {
    items: Vec<NewItem<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NewItem<'a> {
    ttl_ms: u64,
    max_attempts: u64,
    kind: &'a str,
}

/// Claim ids: unique per process.
static CLAIM_SEQ: AtomicU64 = AtomicU64::new(0);

/// A worker: one keep-alive connection, signing its claims and reports.
struct Worker {
    ctx: Arc<Ctx>,
    conn: Conn,
    tenant: String,
    name: String,
}

impl Worker {
    async fn open(ctx: &Arc<Ctx>, tenant: &str, name: String) -> Res<Worker> {
        Ok(Worker {
            conn: Conn::open(&ctx.addr).await?,
            ctx: Arc::clone(ctx),
            tenant: tenant.to_string(),
            name,
        })
    }

    /// Claims at most one task of `kind`, held up to `wait_ms`.
    async fn claim(&mut self, kind: &str, wait_ms: u64, lease_ms: u64) -> Res<Vec<ClaimedTask>> {
        let body = to_json(&ClaimBody {
            worker: &self.name,
            kinds: [kind],
            max: 1,
            wait_ms,
            lease_ms,
        });
        let n = CLAIM_SEQ.fetch_add(1, Ordering::Relaxed);
        let id = format!("clm-{}-{n}", std::process::id());
        let now = (now_ms() / 1000.0) as i64;
        let signed = self.ctx.secret.headers(&id, now, body.as_bytes());
        let mut hs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        hs.push(("taskwire-tenant", &self.tenant));
        let r = self.conn.send("POST", "/v1/work/claim", &hs, body).await?;
        if r.status != 200 {
            let hint = if r.status == 503 {
                " (held claims count against --max-watchers: raise it, or ulimit -n)"
            } else {
                ""
            };
            return Err(format!("claim: {} {}{hint}", r.status, r.text()).into());
        }
        let claimed: Claimed = r.read("answer").map_err(|e| format!("claim: {e}"))?;
        Ok(claimed.tasks)
    }

    /// Sends `event` of `attempt` for `task`, signed; the answer's `next`.
    async fn report(&mut self, task: &str, n: u64, mut event: ExecutorEvent) -> Res<String> {
        let attempt = event.attempt.unwrap_or(0);
        event.at_ms = Some(now_ms());
        let body = callback_body(task, &event);
        let id = format!("{task}-a{attempt}-{n}");
        let now = (now_ms() / 1000.0) as i64;
        let signed = self.ctx.secret.headers(&id, now, body.as_bytes());
        let hs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let path = format!("/v1/tasks/{task}/callbacks");
        let r = self.conn.send("POST", &path, &hs, body).await?;
        if r.status != 200 {
            return Err(format!("report: {} {}", r.status, r.text()).into());
        }
        let report: Report = r.read("answer").map_err(|e| format!("report: {e}"))?;
        Ok(report.next)
    }
}

/// Creates one task of `kind`; its id.
async fn create(ctx: &Ctx, conn: &mut Conn, kind: &str) -> Res<String> {
    let body = format!(r#"{{"ttlMs":{HOUR_MS},"maxAttempts":1,"kind":"{kind}"}}"#);
    let r = conn
        .send("POST", "/v1/tasks", &[("authorization", &ctx.auth)], body)
        .await?;
    Ok(wire::created_id(&r).map_err(|e| format!("create: {e}"))?)
}

/// Creates `n` tasks of `kind` in batches of at most `per` items.
async fn create_batches(ctx: &Ctx, conn: &mut Conn, kind: &str, n: usize, per: usize) -> Res<()> {
    let mut left = n;
    while left > 0 {
        let take = left.min(per.clamp(1, 1_000));
        let items = (0..take)
            .map(|_| NewItem {
                ttl_ms: HOUR_MS,
                max_attempts: 1,
                kind,
            })
            .collect();
        let auth = [("authorization", ctx.auth.as_str())];
        let r = conn
            .send("POST", "/v1/batches", &auth, to_json(&NewBatch { items }))
            .await?;
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
    for w in 0..a.idle_workers.max(1) {
        let mut worker = Worker::open(ctx, &a.tenant, format!("idle-{w}")).await?;
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
    println!(
        "  create sent → held claim's answer: {}",
        spread(&mut from_sent)
    );
    Ok(())
}

/// Phase 2: see the module docs.
async fn throughput(ctx: &Arc<Ctx>, a: &WorkArgs, kind: &str) -> Res<()> {
    let mut conn = Conn::open(&ctx.addr).await?;
    let t = Instant::now();
    create_batches(ctx, &mut conn, kind, a.tput_tasks, a.batch).await?;
    println!(
        "throughput: {} tasks created in batches of {} in {:.2} s",
        a.tput_tasks,
        a.batch.clamp(1, 1_000),
        t.elapsed().as_secs_f64()
    );
    let cpu = cpu_ticks(a.pid);
    let t = Instant::now();
    let mut workers = Vec::with_capacity(a.workers);
    for w in 0..a.workers.max(1) {
        let mut worker = Worker::open(ctx, &a.tenant, format!("worker-{w}")).await?;
        let kind = kind.to_string();
        workers.push(tokio::spawn(async move {
            let (mut done, mut claims, mut reports) = (0_usize, vec![], vec![]);
            loop {
                let c = Instant::now();
                let tasks = worker.claim(&kind, 0, 30_000).await?;
                claims.push(c.elapsed());
                let Some(task) = tasks.into_iter().next() else {
                    return Res::Ok((done, claims, reports));
                };
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
            }
        }));
    }
    let (mut done, mut claims, mut reports) = (0, vec![], vec![]);
    for w in workers {
        let (d, c, r) = w.await??;
        done += d;
        claims.extend(c);
        reports.extend(r);
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_since(a.pid, cpu, "task", done);
    println!(
        "  {done} tasks through claim → 5 progress → succeed in {secs:.2} s with {} workers: \
         {:.0} tasks/s, {:.0} requests/s{cpu}",
        a.workers,
        done as f64 / secs,
        (claims.len() + reports.len()) as f64 / secs
    );
    println!("  claim: {}", spread(&mut claims));
    println!("  report: {}", spread(&mut reports));
    Ok(())
}

/// Phase 3: see the module docs.
async fn rss(ctx: &Arc<Ctx>, a: &WorkArgs, kind: &str) -> Res<()> {
    let kib = |label: &str| {
        if let Some(pid) = a.pid {
            println!("  server RSS {label}: {} KiB", rss_kib(pid).unwrap_or(0));
        }
    };
    println!("rss: {} held claims", a.held);
    kib("before");
    let mut held = Vec::with_capacity(a.held);
    for i in 0..a.held {
        let (ctx, tenant, kind) = (Arc::clone(ctx), a.tenant.clone(), kind.to_string());
        held.push(tokio::spawn(async move {
            let mut worker = Worker::open(&ctx, &tenant, format!("held-{i}")).await?;
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
    let secs = a.idle_secs.min(20);
    let cpu = cpu_ticks(a.pid);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    if let (Some(before), Some(after)) = (cpu, cpu_ticks(a.pid)) {
        println!(
            "  server CPU while they wait, no work: {:.2} s in {secs} s ({:.0} % of one core)",
            (after - before) as f64 / 100.0,
            (after - before) as f64 / secs.max(1) as f64
        );
    }
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

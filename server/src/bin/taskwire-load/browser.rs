//! `taskwire-load browser`: what one end user can do with the browser
//! token a page holds (issue 24, N1 and F6). Runs against a `--demo`
//! server, whose token endpoint gives anyone a page's token: the scenario
//! starts the demo's long job at a tenth of its speed (it runs for
//! minutes, so long-polls on it are held) and asks for its token (every
//! right on that task, and, like any browser token, none to create).
//!
//! - `--attack batch-bodies` (N1): C connections each `POST /v1/batches`
//!   with that token, announce a 1 MiB body, send `--bytes` of it and
//!   stall. Reports what each was answered and how long after its head,
//!   and the server's peak RSS (`--pid`). A server that reads the body
//!   before the rights holds every body until its body timeout.
//! - `--attack long-polls` (F6): C long-polls on the task with the token,
//!   each on a keep-alive connection of its own and asked again from the
//!   version it was answered, for `--seconds`; meanwhile another tenant
//!   (`--probe-token`) long-polls a task of its own (`waitMs=1000`) on a
//!   fresh connection, again and again. Reports the flood's answers and
//!   every probe's status.
//!
//! Bounded: at most 20,000 connections and 120 s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use taskwire_server::client::Conn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Res;

/// What the token is used for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Attack {
    /// Stalled 1 MiB batch bodies (the token may not create).
    BatchBodies,
    /// Long-polls, as many as the flood has connections.
    LongPolls,
}

/// The scenario's flags.
#[derive(Debug, clap::Args)]
pub struct BrowserArgs {
    /// What to do with the page's token.
    #[arg(long, value_enum)]
    attack: Attack,
    /// Connections, at most 20,000.
    #[arg(long, default_value_t = 3_000)]
    conns: usize,
    /// Body bytes each batch-bodies connection sends of the 1 MiB it announces.
    #[arg(long, default_value_t = 1_000_000)]
    bytes: usize,
    /// Seconds the attack lasts, at most 120.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Another tenant's token, for the long-polls probe.
    #[arg(long, default_value = "other")]
    probe_token: String,
    /// Server pid, to read its RSS from /proc.
    #[arg(long)]
    pid: Option<u32>,
}

const ANNOUNCED: usize = 1 << 20;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Started {
    task_ids: Vec<String>,
}

/// What the flood reads of an answer: the version to ask from next.
#[derive(Deserialize)]
struct Answered {
    task: Option<Version>,
}

#[derive(Deserialize)]
struct Version {
    version: u64,
}

#[derive(Deserialize)]
struct Minted {
    token: String,
}

/// Runs the scenario against a `--demo` server at `addr`.
pub async fn run(addr: &str, args: BrowserArgs, rss_kib: fn(u32) -> Option<u64>) -> Res<()> {
    let fds = taskwire_server::limits::raise_nofile();
    if fds.soft.is_some_and(|soft| soft < args.conns as u64 + 256) {
        return Err(format!(
            "RLIMIT_NOFILE is {:?}: too few for {} connections",
            fds.soft, args.conns
        )
        .into());
    }
    let mut conn = Conn::open(addr).await?;
    let r = conn
        .send("POST", "/v1/demo/workloads/long", &[], r#"{"speed":0.1}"#)
        .await?;
    let started = r.read::<Started>("the demo's long job").map_err(|e| {
        format!(
            "start the demo's long job (is the server --demo?): {} {e}",
            r.status
        )
    })?;
    let task = started
        .task_ids
        .into_iter()
        .next()
        .ok_or("the demo started no task")?;
    let body = format!(r#"{{"taskIds":["{task}"]}}"#);
    let r = conn.send("POST", "/v1/demo/tokens", &[], body).await?;
    let token = r.read::<Minted>("the demo token")?.token;
    let conns = args.conns.min(20_000);
    let until = Instant::now() + Duration::from_secs(args.seconds.min(120));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = tokio::spawn(sample_rss(args.pid, rss_kib, Arc::clone(&peak), until));
    let before = args.pid.and_then(rss_kib).unwrap_or(0);
    println!(
        "{conns} connections, {:?}, one page's browser token",
        args.attack
    );
    let answers = match args.attack {
        Attack::BatchBodies => bodies(addr, &token, conns, args.bytes, until).await,
        Attack::LongPolls => {
            long_polls(addr, &token, &task, conns, &args.probe_token, until).await?
        }
    };
    let _ = sampler.await;
    for (answer, n) in answers {
        println!("  {n:>6} × {answer}");
    }
    println!(
        "server RSS: {} MiB before, peak {} MiB, {} MiB at the end",
        before / 1024,
        peak.load(Ordering::Relaxed) / 1024,
        args.pid.and_then(rss_kib).unwrap_or(0) / 1024
    );
    Ok(())
}

async fn sample_rss(
    pid: Option<u32>,
    rss: fn(u32) -> Option<u64>,
    peak: Arc<AtomicU64>,
    until: Instant,
) {
    while Instant::now() < until + Duration::from_secs(1) {
        if let Some(kib) = pid.and_then(rss) {
            peak.fetch_max(kib, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// N1: stalled batch bodies; the answers by status, with the slowest
/// time from the head to the answer.
async fn bodies(
    addr: &str,
    token: &str,
    conns: usize,
    bytes: usize,
    until: Instant,
) -> BTreeMap<String, usize> {
    let head: Arc<str> = format!(
        "POST /v1/batches HTTP/1.1\r\nhost: load\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {ANNOUNCED}\r\n\r\n"
    )
    .into();
    let body: Arc<[u8]> = vec![b' '; bytes.min(ANNOUNCED)].into();
    let mut tasks = Vec::with_capacity(conns);
    for i in 0..conns {
        let (addr, head, body) = (addr.to_string(), Arc::clone(&head), Arc::clone(&body));
        tasks.push(tokio::spawn(async move {
            stalled(&addr, &head, &body, until).await
        }));
        // Stay under the listener's accept backlog.
        if i % 250 == 249 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let mut by_status: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    for t in tasks {
        let (status, took) = t
            .await
            .unwrap_or_else(|e| (format!("task failed: {e}"), Duration::ZERO));
        by_status.entry(status).or_default().push(took);
    }
    by_status
        .into_iter()
        .map(|(status, mut took)| {
            took.sort_unstable();
            let p99 = took.get(took.len() * 99 / 100).copied().unwrap_or_default();
            let max = took.last().copied().unwrap_or_default();
            (
                format!("{status}, after the head: p99 {p99:?}, max {max:?}"),
                took.len(),
            )
        })
        .collect()
}

/// One stalled upload: the status it was answered (or why not) and how
/// long after its head was sent; the connection is held until `until`.
async fn stalled(addr: &str, head: &str, body: &[u8], until: Instant) -> (String, Duration) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return ("connect failed".into(), Duration::ZERO);
    };
    let t0 = Instant::now();
    if s.write_all(head.as_bytes()).await.is_err() {
        return ("reset while sending the head".into(), t0.elapsed());
    }
    let (mut read, mut write) = s.into_split();
    let body = body.to_vec();
    // The body goes out beside the read: the server may answer before it.
    let sending = tokio::spawn(async move {
        let _ = write.write_all(&body).await;
        write
    });
    let mut buf = [0u8; 64];
    let answer = match tokio::time::timeout_at(until.into(), read.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => {
            let text = String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned();
            format!("answered {}", text.split(' ').nth(1).unwrap_or("?"))
        }
        Ok(_) => "closed without an answer".into(),
        Err(_) => "no answer during the attack".into(),
    };
    let took = t0.elapsed();
    tokio::time::sleep_until(until.into()).await;
    sending.abort();
    (answer, took)
}

/// F6: the flood's long-polls and the other tenant's probe.
async fn long_polls(
    addr: &str,
    token: &str,
    task: &str,
    conns: usize,
    probe_token: &str,
    until: Instant,
) -> Res<BTreeMap<String, usize>> {
    // The other tenant's task, made before the flood starts.
    let auth = format!("Bearer {probe_token}");
    let probe = probe_task(addr, &auth).await?;
    let answers: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let mut flood = Vec::with_capacity(conns);
    for i in 0..conns {
        let (addr, answers) = (addr.to_string(), Arc::clone(&answers));
        let auth = format!("Bearer {token}");
        let task = task.to_string();
        flood.push(tokio::spawn(async move {
            let mut cursor = 0;
            // One keep-alive connection per long-poll, as a client keeps
            // it; a new one only when it fails.
            let mut conn: Option<Conn> = None;
            while Instant::now() < until {
                let path = format!("/v1/tasks/{task}/resume?cursor={cursor}&waitMs=25000");
                let c = match conn.take() {
                    Some(c) => c,
                    None => match Conn::open(&addr).await {
                        Ok(c) => c,
                        Err(_) => {
                            count(&answers, "flood: connect failed".into());
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    },
                };
                let mut c = c;
                let headers = [("authorization", auth.as_str())];
                let asked = c.send("GET", &path, &headers, "");
                let answered = tokio::time::timeout_at(until.into(), asked).await;
                let status = match answered {
                    Ok(Ok(r)) => {
                        if let Ok(Answered { task: Some(t) }) = r.read::<Answered>("answer") {
                            cursor = t.version;
                        }
                        conn = Some(c);
                        format!("flood: answered {}", r.status)
                    }
                    Ok(Err(_)) => "flood: connection failed".into(),
                    Err(_) => "flood: still held at the end".into(),
                };
                count(&answers, status);
            }
        }));
        if i % 250 == 249 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // The other tenant, once the flood is on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let path = format!("/v1/tasks/{probe}/resume?cursor=0&waitMs=1000");
    let mut probes: BTreeMap<String, usize> = BTreeMap::new();
    let mut slowest = Duration::ZERO;
    while Instant::now() + Duration::from_secs(2) < until {
        let t = Instant::now();
        let status = match Conn::open(addr).await {
            Ok(mut c) => match c.send("GET", &path, &[("authorization", &auth)], "").await {
                Ok(r) => format!("probe (another tenant): answered {}", r.status),
                Err(e) => format!("probe (another tenant): failed: {e}"),
            },
            Err(e) => format!("probe (another tenant): connect failed: {e}"),
        };
        slowest = slowest.max(t.elapsed());
        *probes.entry(status).or_default() += 1;
    }
    println!("probe: the slowest long-poll of waitMs=1000 took {slowest:?}");
    for f in flood {
        let _ = f.await;
    }
    let mut all = answers.lock().unwrap_or_else(|e| e.into_inner()).clone();
    all.extend(probes);
    Ok(all)
}

/// The probe's task, created by the other tenant (a few tries: the flood
/// may be reconnecting by the thousand as it starts).
async fn probe_task(addr: &str, auth: &str) -> Res<String> {
    let mut last = String::new();
    for _ in 0..10 {
        let body = r#"{"ttlMs":600000,"maxAttempts":1}"#;
        let created = match Conn::open(addr).await {
            Ok(mut c) => {
                c.send("POST", "/v1/tasks", &[("authorization", auth)], body)
                    .await
            }
            Err(e) => Err(e),
        };
        match created {
            Ok(r) if r.status == 201 => {
                return Ok(r.read::<taskwire_core::TaskView>("the probe's task")?.id)
            }
            Ok(r) => last = format!("{} {}", r.status, r.text()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("the probe's create failed 10 times: {last}").into())
}

fn count(answers: &Mutex<BTreeMap<String, usize>>, what: String) {
    *answers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(what)
        .or_default() += 1;
}

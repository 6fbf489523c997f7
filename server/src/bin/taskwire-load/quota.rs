//! `quota`: one tenant at its quotas must not slow another. The numbers
//! behind "Quotas" in server/README.md.
//!
//! Two runs of `--seconds` each on one server:
//! 1. **baseline**: tenant B alone, a steady load on `--b-conns`
//!    keep-alive connections, each looping create → callback `start` →
//!    get → resume, `--b-pause-ms` apart;
//! 2. **flood**: the same B load while tenant A floods: `--a-creators`
//!    connections post creates back to back, and `--a-watchers`
//!    connections ask for long-polls back to back (a refused one asks
//!    again at once, as a hostile or broken client would).
//!
//! It prints B's latencies (p50/p95/p99/max over every request) in both
//! runs, A's create latencies and its answers by status and code, and the
//! load average before and after. Start the server with quotas for A,
//! e.g. `--tenant-quota "a:create-rate=50,max-watches=20,max-open-tasks=1000"`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Args;
use taskwire_server::client::{Conn, Reply};

use crate::wire::{created_id, error_code, start};
use crate::{Ctx, Res};

/// The `quota` flags.
#[derive(Args, Clone, Debug)]
pub struct QuotaArgs {
    /// Seconds per run (baseline, then flood).
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Tenant A's bearer token (the flooding tenant).
    #[arg(long, default_value = "a")]
    token_a: String,
    /// Tenant B's bearer token (the steady tenant).
    #[arg(long, default_value = "b")]
    token_b: String,
    /// B's connections, each looping its four requests.
    #[arg(long, default_value_t = 4)]
    b_conns: usize,
    /// Pause after each of B's loops, in milliseconds.
    #[arg(long, default_value_t = 20)]
    b_pause_ms: u64,
    /// A's connections posting creates back to back.
    #[arg(long, default_value_t = 16)]
    a_creators: usize,
    /// A's connections asking for long-polls back to back.
    #[arg(long, default_value_t = 100)]
    a_watchers: usize,
}

/// Answers by status and error code, and the latencies of those timed.
#[derive(Default)]
struct Tally {
    answers: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
}

impl Tally {
    fn add(&mut self, r: &Reply, took: Duration, timed: bool) {
        let code = error_code(r).map_or(String::new(), |c| format!(" {c}"));
        *self
            .answers
            .entry(format!("{}{code}", r.status))
            .or_default() += 1;
        if timed {
            self.latencies.push(took);
        }
    }

    fn failed(&mut self, why: &str) {
        *self.answers.entry(why.to_string()).or_default() += 1;
    }

    fn merge(&mut self, other: Tally) {
        for (k, v) in other.answers {
            *self.answers.entry(k).or_default() += v;
        }
        self.latencies.extend(other.latencies);
    }

    fn summary(&mut self) -> String {
        self.latencies.sort();
        let v = &self.latencies;
        let pct = |p: f64| {
            v.get(((v.len().max(1) - 1) as f64 * p).round() as usize)
                .map_or("-".to_string(), |d| {
                    format!("{:.2} ms", d.as_secs_f64() * 1e3)
                })
        };
        let answers: Vec<String> = self
            .answers
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        format!(
            "n={} p50 {} p95 {} p99 {} max {} [{}]",
            v.len(),
            pct(0.5),
            pct(0.95),
            pct(0.99),
            pct(1.0),
            answers.join(", ")
        )
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Runs the scenario (see the module docs).
pub async fn quota(ctx: std::sync::Arc<Ctx>, args: QuotaArgs) -> Res<()> {
    println!("load average before: {}", loadavg());
    let mut baseline = run(&ctx, &args, false).await?.0;
    println!(
        "baseline, B alone, {} s: B {}",
        args.seconds,
        baseline.summary()
    );
    let (mut b, mut a_creates, mut a_watches) = run(&ctx, &args, true).await?;
    println!("flood, A + B, {} s: B {}", args.seconds, b.summary());
    println!("  A creates {}", a_creates.summary());
    println!("  A watches (refusals timed) {}", a_watches.summary());
    println!("load average after: {}", loadavg());
    Ok(())
}

async fn run(ctx: &Ctx, args: &QuotaArgs, flood: bool) -> Res<(Tally, Tally, Tally)> {
    let until = Instant::now() + Duration::from_secs(args.seconds);
    let body = r#"{"ttlMs":600000,"maxAttempts":1}"#;
    let mut bs = Vec::new();
    for _ in 0..args.b_conns {
        let (addr, auth) = (ctx.addr.clone(), format!("Bearer {}", args.token_b));
        let pause = Duration::from_millis(args.b_pause_ms);
        let secret = ctx.secret.clone();
        bs.push(tokio::spawn(async move {
            let mut t = Tally::default();
            let mut conn = Conn::open(&addr).await?;
            let h = [("authorization", auth.as_str())];
            while Instant::now() < until {
                let t0 = Instant::now();
                let r = conn.send("POST", "/v1/tasks", &h, body).await?;
                t.add(&r, t0.elapsed(), true);
                let Ok(id) = created_id(&r) else {
                    continue;
                };
                let cb = taskwire_server::signature::callback_body(&id, &start());
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)?
                    .as_secs() as i64;
                let signed = secret.headers(&format!("{id}-s"), now, cb.as_bytes());
                let hs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
                for (method, path, headers, body) in [
                    ("POST", format!("/v1/tasks/{id}/callbacks"), &hs[..], cb),
                    ("GET", format!("/v1/tasks/{id}"), &h[..], String::new()),
                    (
                        "GET",
                        format!("/v1/tasks/{id}/resume?cursor=0"),
                        &h[..],
                        String::new(),
                    ),
                ] {
                    let t0 = Instant::now();
                    let r = conn.send(method, &path, headers, body).await?;
                    t.add(&r, t0.elapsed(), true);
                }
                tokio::time::sleep(pause).await;
            }
            Res::Ok(t)
        }));
    }
    let mut creators = Vec::new();
    let mut watchers = Vec::new();
    if flood {
        let auth = format!("Bearer {}", args.token_a);
        let mut setup = Conn::open(&ctx.addr).await?;
        let r = setup
            .send("POST", "/v1/tasks", &[("authorization", &auth)], body)
            .await?;
        let watched = created_id(&r).map_err(|e| format!("A's first create: {e}"))?;
        for _ in 0..args.a_creators {
            let (addr, auth) = (ctx.addr.clone(), auth.clone());
            creators.push(tokio::spawn(async move {
                let mut t = Tally::default();
                let mut conn = Conn::open(&addr).await?;
                while Instant::now() < until {
                    let t0 = Instant::now();
                    let r = conn
                        .send("POST", "/v1/tasks", &[("authorization", &auth)], body)
                        .await?;
                    t.add(&r, t0.elapsed(), true);
                }
                Res::Ok(t)
            }));
        }
        let path = format!("/v1/tasks/{watched}/resume?cursor=0&waitMs=30000");
        for _ in 0..args.a_watchers {
            let (addr, auth, path) = (ctx.addr.clone(), auth.clone(), path.clone());
            watchers.push(tokio::spawn(async move {
                let mut t = Tally::default();
                let mut conn = Conn::open(&addr).await?;
                let h = [("authorization", auth.as_str())];
                while Instant::now() < until {
                    let t0 = Instant::now();
                    let left = until.saturating_duration_since(t0);
                    let ask = conn.send("GET", &path, &h, "");
                    match tokio::time::timeout(left, ask).await {
                        // Held to the end of the run: counted, not timed.
                        Err(_) => t.failed("held until the end"),
                        Ok(r) => {
                            let r = r?;
                            t.add(&r, t0.elapsed(), r.status == 429);
                        }
                    }
                }
                Res::Ok(t)
            }));
        }
    }
    let mut b = Tally::default();
    for h in bs {
        b.merge(h.await??);
    }
    let (mut a_creates, mut a_watches) = (Tally::default(), Tally::default());
    for h in creators {
        a_creates.merge(h.await??);
    }
    for h in watchers {
        a_watches.merge(h.await??);
    }
    Ok((b, a_creates, a_watches))
}

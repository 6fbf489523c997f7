//! `batch`: clients following batches (PROTOCOL.md §Batches).
//!
//! 1. Creates `--batches` batches of `--items` items each.
//! 2. Holds `--clients` batch long-polls, spread evenly over them, and
//!    prints the server's RSS while they are held.
//! 3. Wakes them: one callback on one item of each batch, and for every
//!    client the time from its batch's commit to its answer (p50/p99).
//! 4. A reconnect: a client of a `--reconnect-items` batch that missed
//!    `--changed` items' changes resumes with one request; prints its
//!    bytes next to the whole batch's snapshot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use taskwire_server::client::Conn;
use taskwire_wire::to_json;

use super::{rss_kib, wire, Ctx, Res};

#[derive(clap::Args)]
pub struct BatchArgs {
    /// Clients, each holding one long-poll on a batch.
    #[arg(long, default_value_t = 10_000)]
    clients: usize,
    /// Batches the clients are spread over.
    #[arg(long, default_value_t = 200)]
    batches: usize,
    /// Items per batch.
    #[arg(long, default_value_t = 50)]
    items: usize,
    /// Server pid, to read its RSS from /proc.
    #[arg(long)]
    pid: Option<u32>,
    /// Items of the reconnect's batch.
    #[arg(long, default_value_t = 500)]
    reconnect_items: usize,
    /// Items that change while the reconnecting client is away.
    #[arg(long, default_value_t = 10)]
    changed: usize,
}

/// `POST /v1/batches`: `{"items":[{"ttlMs","maxAttempts","input":{"i"}}]}`.
#[derive(Serialize)]
struct NewBatch {
    items: Vec<NewItem>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NewItem {
    ttl_ms: u64,
    max_attempts: u64,
    input: ItemInput,
}

#[derive(Serialize)]
struct ItemInput {
    i: usize,
}

impl Ctx {
    /// Creates a batch of `n` items; its id and item ids.
    async fn create_batch(&self, conn: &mut Conn, n: usize) -> Res<(String, Vec<String>)> {
        let items = (0..n)
            .map(|i| NewItem {
                ttl_ms: 3_600_000,
                max_attempts: 1,
                input: ItemInput { i },
            })
            .collect();
        let r = conn
            .send(
                "POST",
                "/v1/batches",
                &[("authorization", &self.auth)],
                to_json(&NewBatch { items }),
            )
            .await?;
        let batch: wire::Batch = r
            .read("answer")
            .map_err(|_| format!("batch create: {} {}", r.status, r.text()))?;
        let tasks = batch.tasks.into_iter().map(|t| t.id).collect();
        Ok((batch.batch_id, tasks))
    }
}

pub async fn batch(ctx: Arc<Ctx>, args: BatchArgs) -> Res<()> {
    let mut conn = Conn::open(&ctx.addr).await?;
    let n = args.batches.max(1);
    let mut batches = Vec::with_capacity(n);
    let t = Instant::now();
    for _ in 0..n {
        batches.push(ctx.create_batch(&mut conn, args.items.max(1)).await?);
    }
    println!(
        "created {n} batches of {} items in {:.1} s",
        args.items,
        t.elapsed().as_secs_f64()
    );
    if let Some(pid) = args.pid {
        println!("server RSS before: {} KiB", rss_kib(pid).unwrap_or(0));
    }
    let mut held = Vec::with_capacity(args.clients);
    for i in 0..args.clients {
        let ctx = Arc::clone(&ctx);
        let b = i % n;
        let path = format!("/v1/batches/{}/resume?cursor=1&waitMs=30000", batches[b].0);
        held.push((
            b,
            tokio::spawn(async move {
                let mut c = Conn::open(&ctx.addr).await?;
                let r = c
                    .send("GET", &path, &[("authorization", &ctx.auth)], "")
                    .await?;
                let answered = Instant::now();
                Res::Ok((wire::resumed(&r).mode == "delta", answered))
            }),
        ));
        if i % 500 == 499 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let early = held.iter().filter(|(_, h)| h.is_finished()).count();
    println!(
        "held batch long-polls: {} (returned early: {early})",
        args.clients - early
    );
    if let Some(pid) = args.pid {
        println!(
            "server RSS while holding {}: {} KiB",
            args.clients,
            rss_kib(pid).unwrap_or(0)
        );
    }
    // One commit per batch; each client timed from its batch's commit.
    let mut committed = Vec::with_capacity(n);
    for (_, tasks) in &batches {
        let task = tasks.first().ok_or("a batch without items")?;
        let before = Instant::now();
        ctx.callback(&mut conn, task, "start", &wire::start())
            .await?;
        committed.push(before);
    }
    let mut waits = Vec::with_capacity(held.len());
    let mut woken = 0;
    for (b, h) in held {
        if let Ok(Ok((delta, at))) = h.await {
            woken += usize::from(delta);
            waits.push(at.saturating_duration_since(committed[b]));
        }
    }
    waits.sort();
    let pct = |p: f64| {
        waits
            .get(((waits.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "woken with a delta: {woken}/{}; from their batch's commit: p50 {:?}, p99 {:?}, max {:?}",
        args.clients,
        pct(0.5),
        pct(0.99),
        waits.last().copied().unwrap_or_default()
    );
    reconnect(&ctx, &mut conn, &args).await
}

/// Step 4: the bytes of one resume after `changed` items moved, next to
/// the whole batch's snapshot.
async fn reconnect(ctx: &Ctx, conn: &mut Conn, args: &BatchArgs) -> Res<()> {
    let (id, tasks) = ctx.create_batch(conn, args.reconnect_items.max(1)).await?;
    let auth = [("authorization", ctx.auth.as_str())];
    let snapshot = conn
        .send(
            "GET",
            &format!("/v1/batches/{id}/resume?cursor=0"),
            &auth,
            "",
        )
        .await?;
    for task in tasks.iter().take(args.changed) {
        ctx.callback(conn, task, "start", &wire::start()).await?;
        ctx.callback(conn, task, "p1", &wire::progress(1)).await?;
    }
    let delta = conn
        .send(
            "GET",
            &format!("/v1/batches/{id}/resume?cursor=1"),
            &auth,
            "",
        )
        .await?;
    println!(
        "reconnect of a {}-item batch after {} items changed (2 versions each): \
         1 request, {} body bytes ({} tasks in it); the whole batch's snapshot is {} bytes",
        tasks.len(),
        args.changed,
        delta.body.len(),
        wire::resumed(&delta).tasks.len(),
        snapshot.body.len()
    );
    Ok(())
}

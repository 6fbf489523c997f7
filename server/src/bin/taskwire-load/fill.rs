//! `fill`: N tasks × 5 callbacks (start, three progress steps, succeed),
//! then the size of the database per table and per task, SQLite or
//! PostgreSQL: the numbers behind "Storage per task" in server/README.md
//! (`bench/storage.sh` runs both).
//!
//! The events look like a real executor's (epoch-millisecond times, a
//! worker name, a `resultRef` URL and a SHA-256 `resultHash`), since the
//! bytes per task are what is measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rusqlite::{Connection, OpenFlags};
use taskwire_server::client::Conn;
use taskwire_server::executor_event::ExecutorEvent;

use crate::{Ctx, Res};

/// Creates `tasks` tasks over `conns` connections, each through its 5
/// callbacks; then reports on `db` (the server's `taskwire.sqlite3`).
pub async fn fill(ctx: Arc<Ctx>, tasks: u64, conns: usize, db: Option<String>) -> Res<()> {
    let next = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..conns.max(1) {
        let ctx = Arc::clone(&ctx);
        let next = Arc::clone(&next);
        workers.push(tokio::spawn(async move {
            let mut conn = Conn::open(&ctx.addr).await?;
            while next.fetch_add(1, Ordering::Relaxed) < tasks {
                let id = ctx.create(&mut conn).await?;
                for (i, event) in lifecycle(&id).iter().enumerate() {
                    ctx.callback(&mut conn, &id, &format!("cb-{i}"), event)
                        .await?;
                }
            }
            Res::Ok(())
        }));
    }
    for w in workers {
        w.await??;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{tasks} tasks × 5 callbacks in {secs:.1} s ({:.0} callbacks/s)",
        (tasks * 5) as f64 / secs
    );
    match db {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            report_postgres(&url, tasks).await?
        }
        Some(path) => report(&path, tasks)?,
        None => {}
    }
    Ok(())
}

/// The five events of one task, timed now.
pub fn lifecycle(id: &str) -> [ExecutorEvent; 5] {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let hash: String = id
        .bytes()
        .cycle()
        .take(32)
        .map(|b| format!("{b:02x}"))
        .collect();
    let at = |ms: u64| (now + ms) as f64;
    [
        ExecutorEvent::start("worker-7").at(at(0)),
        ExecutorEvent::progress(25, "chunk-1").at(at(1)),
        ExecutorEvent::progress(50, "chunk-2").at(at(2)),
        ExecutorEvent::progress(75, "chunk-3").at(at(3)),
        ExecutorEvent::succeed(
            &format!("https://results.example.com/{id}.json"),
            &format!("sha256:{hash}"),
        )
        .at(at(4)),
    ]
}

/// Prints the database's size: in all, per task, and per table (SQLite's
/// `dbstat` table, which counts the pages each table and index uses,
/// committed WAL content included).
fn report(path: &str, tasks: u64) -> Res<()> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("--db {path}: {e}"))?;
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    let total = pages * page_size;
    let per_task = |bytes: i64| bytes as f64 / tasks.max(1) as f64;
    println!(
        "{path}: {pages} pages × {page_size} B = {:.1} MB, {:.0} B per task",
        total as f64 / 1e6,
        per_task(total)
    );
    let mut stmt = conn
        .prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    println!(
        "{:<28} {:>10} {:>8} {:>10}",
        "table or index", "MB", "share", "B/task"
    );
    for row in rows {
        let (name, bytes) = row?;
        println!(
            "{name:<28} {:>10.2} {:>7.1}% {:>10.0}",
            bytes as f64 / 1e6,
            100.0 * bytes as f64 / total.max(1) as f64,
            per_task(bytes)
        );
    }
    Ok(())
}

/// Prints a PostgreSQL database's size: every table of the `public`
/// schema with its TOAST, free-space and visibility maps
/// (`pg_total_relation_size`), in all and per task, then each table and
/// index on its own (`pg_relation_size` of every fork). The catalogs are
/// left out: they are the same few MB in any database.
async fn report_postgres(url: &str, tasks: u64) -> Res<()> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("--db {url}: {e}"))?;
    tokio::spawn(conn);
    let per_task = |bytes: i64| bytes as f64 / tasks.max(1) as f64;
    let total: i64 = client
        .query_one(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind = 'r'",
            &[],
        )
        .await?
        .get(0);
    println!(
        "{url}: tables {:.1} MB, {:.0} B per task",
        total as f64 / 1e6,
        per_task(total)
    );
    let rows = client
        .query(
            "SELECT c.relname::text,
                    (pg_relation_size(c.oid, 'main') + pg_relation_size(c.oid, 'fsm')
                     + pg_relation_size(c.oid, 'vm')
                     + coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0))::bigint
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')
             ORDER BY 2 DESC",
            &[],
        )
        .await?;
    println!(
        "{:<28} {:>10} {:>8} {:>10}",
        "table or index", "MB", "share", "B/task"
    );
    for row in rows {
        let (name, bytes): (String, i64) = (row.get(0), row.get(1));
        println!(
            "{name:<28} {:>10.2} {:>7.1}% {:>10.0}",
            bytes as f64 / 1e6,
            100.0 * bytes as f64 / total.max(1) as f64,
            per_task(bytes)
        );
    }
    Ok(())
}

//! `taskwire-load slow-body`: C connections each post a callback that
//! declares a 65,536-byte body, send `--bytes` of it and stall, all held
//! open at once; prints the server's RSS before, while they are held, at
//! the end of the hold and 10 s after they were closed, and how each one
//! was answered.
//!
//! `--attack` picks the headers: `unsigned` (none of the signature
//! headers: refused before the body), `forged-unknown-task` (well-formed
//! headers, a wrong signature, a task id that does not exist: the body is
//! read and dropped), `forged-known-task` (the same for a task that
//! exists: the body is kept until its signature can be checked, at most
//! for the body timeout). Bounded: at most 20,000 connections, 60 s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::Res;

/// What the attacking requests' headers carry.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Attack {
    /// No signature headers at all.
    Unsigned,
    /// Well-formed signature headers (fresh timestamp), wrong signature,
    /// unknown task id.
    ForgedUnknownTask,
    /// The same, for a task that exists.
    ForgedKnownTask,
}

/// The scenario's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Connections, at most 20,000.
    #[arg(long, default_value_t = 5_000)]
    conns: usize,
    /// Body bytes each one sends of the 65,536 it declares.
    #[arg(long, default_value_t = 65_000)]
    bytes: usize,
    /// What the headers carry.
    #[arg(long, value_enum, default_value = "unsigned")]
    attack: Attack,
    /// Seconds to hold the connections open, at most 60 (longer than the
    /// server's body time limit, 10 s, to see it answer).
    #[arg(long, default_value_t = 20)]
    hold: u64,
    /// Server pid, to read its RSS from /proc.
    #[arg(long)]
    pid: Option<u32>,
}

const DECLARED: usize = 65_536;

/// Runs the scenario against `addr`; `task` is a task that exists.
pub async fn run(addr: &str, task: &str, args: Args, rss_kib: fn(u32) -> Option<u64>) -> Res<()> {
    let conns = args.conns.min(20_000);
    let bytes = args.bytes.min(DECLARED);
    let hold = Duration::from_secs(args.hold.min(60));
    let rss = || args.pid.and_then(rss_kib).unwrap_or(0);
    let head = Arc::new(request_head(task, args.attack));
    let body: Arc<[u8]> = vec![b' '; bytes].into();
    println!(
        "{conns} connections × {bytes} of {DECLARED} body bytes, {:?}, held {} s",
        args.attack,
        hold.as_secs()
    );
    println!("server RSS before: {} KiB", rss());
    let deadline = Instant::now() + hold;
    let sent = Arc::new(AtomicUsize::new(0));
    let mut held = Vec::with_capacity(conns);
    for i in 0..conns {
        let (addr, head, body, sent) = (addr.to_string(), head.clone(), body.clone(), sent.clone());
        held.push(tokio::spawn(async move {
            one(&addr, &head, &body, &sent, deadline).await
        }));
        // Stay under the listener's accept backlog.
        if i % 250 == 249 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Every connection has sent what it will send (or was cut off).
    while sent.load(Ordering::Relaxed) < conns && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!(
        "server RSS while held (1 s after the last send): {} KiB",
        rss()
    );
    let mut answers: BTreeMap<String, usize> = BTreeMap::new();
    for h in held {
        let answer = h.await.unwrap_or_else(|e| format!("task failed: {e}"));
        *answers.entry(answer).or_default() += 1;
    }
    println!("server RSS at the end of the hold: {} KiB", rss());
    tokio::time::sleep(Duration::from_secs(10)).await;
    println!("server RSS 10 s after they were closed: {} KiB", rss());
    for (answer, n) in answers {
        println!("  {n:>6} × {answer}");
    }
    Ok(())
}

/// The request head (everything before the body).
fn request_head(task: &str, attack: Attack) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (path_task, forged) = match attack {
        Attack::Unsigned => (task.to_string(), false),
        Attack::ForgedUnknownTask => (format!("{task}-unknown"), true),
        Attack::ForgedKnownTask => (task.to_string(), true),
    };
    let mut head = format!(
        "POST /v1/tasks/{path_task}/callbacks HTTP/1.1\r\nhost: load\r\n\
         content-type: application/json\r\ncontent-length: {DECLARED}\r\n"
    );
    if forged {
        let tag = STANDARD.encode([0u8; 32]);
        head.push_str(&format!(
            "webhook-id: slow-body\r\nwebhook-timestamp: {now}\r\nwebhook-signature: v1,{tag}\r\n"
        ));
    }
    head.push_str("\r\n");
    head
}

/// One connection: sends the head and `body`, then waits for an answer
/// until `deadline` and holds the connection until then.
async fn one(addr: &str, head: &str, body: &[u8], sent: &AtomicUsize, deadline: Instant) -> String {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        sent.fetch_add(1, Ordering::Relaxed);
        return "connect failed".into();
    };
    let wrote = tokio::time::timeout_at(deadline, async {
        s.write_all(head.as_bytes()).await?;
        s.write_all(body).await
    })
    .await;
    sent.fetch_add(1, Ordering::Relaxed);
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    let answer = match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => {
            let status = String::from_utf8_lossy(buf.get(..n).unwrap_or(&[]))
                .split(' ')
                .nth(1)
                .unwrap_or("?")
                .to_string();
            // Whole seconds after the last byte sent: 0 for the headers'
            // verdict, the time limit for a 408.
            format!("answered {status} after {} s", t0.elapsed().as_secs())
        }
        Ok(Ok(_)) => "closed by the server, no answer".into(),
        // The server answered and closed while this one was still sending
        // (401 at the headers): the kernel resets, the answer is lost.
        Ok(Err(_)) => "reset by the server (answered while the body was sent)".into(),
        Err(_) if matches!(wrote, Ok(Ok(()))) => "no answer during the hold".into(),
        Err(_) => "still sending at the end of the hold".into(),
    };
    tokio::time::sleep_until(deadline).await;
    answer
}

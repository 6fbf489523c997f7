//! Progress while the attack runs (the server's RSS and descriptors from
//! /proc) and the summary at its end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::attack::Tally;
use crate::probe::Probes;

/// Prints progress every 5 s; returns the peak RSS (KiB) and descriptors.
pub async fn sample(pid: Option<u32>, tally: Arc<Tally>, until: Instant) -> (u64, u64) {
    let (mut peak_rss, mut peak_fds) = (0, 0);
    let started = Instant::now();
    let mut n = 0u64;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        n += 1;
        let rss = pid.and_then(rss_kib).unwrap_or(0);
        let fds = pid.and_then(open_fds).unwrap_or(0);
        peak_rss = peak_rss.max(rss);
        peak_fds = peak_fds.max(fds);
        if n % 5 == 0 {
            println!(
                "t={:>3}s attack open {:>6} (opened {}), server RSS {} MiB, fds {}",
                started.elapsed().as_secs(),
                tally.open.load(Ordering::Relaxed),
                tally.opened.load(Ordering::Relaxed),
                rss / 1024,
                fds
            );
        }
    }
    (peak_rss, peak_fds)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn open_fds(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

fn pct<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    let i = ((sorted.len() as f64 - 1.0) * p).round().max(0.0) as usize;
    sorted.get(i).copied().unwrap_or_default()
}

pub fn report(tally: &Tally, probes: &Probes, peak_rss: u64, peak_fds: u64) {
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    println!(
        "attack: peak {} open at once, {} opened, {} connect errors",
        n(&tally.peak_open),
        n(&tally.opened),
        n(&tally.connect_errors)
    );
    let mut held = tally.held_ms.lock().map(|h| h.clone()).unwrap_or_default();
    held.sort_unstable();
    println!(
        "  closed by the server: {} silently, {} with 503, {} with 408, {} other; held p50 {} ms, p99 {} ms, max {} ms",
        n(&tally.closed_silently),
        n(&tally.answered_503),
        n(&tally.answered_408),
        n(&tally.answered_other),
        pct(&held, 0.5),
        pct(&held, 0.99),
        held.last().copied().unwrap_or(0)
    );
    let firsts = &probes.first_tries;
    if firsts.is_empty() {
        return report_server(peak_rss, peak_fds);
    }
    let count = |s: u16| firsts.iter().filter(|x| **x == s).count();
    println!(
        "normal client: {} asks; first try {} answered 200, {} 503, {} no answer in 5 s",
        firsts.len(),
        count(200),
        count(503),
        count(0)
    );
    let mut answered = probes.answered.clone();
    answered.sort_unstable();
    println!(
        "  answered 200 (Retry-After honoured): {}/{}, p50 {:?}, p99 {:?}, max {:?}; longest without a 200 {:?}",
        answered.len(),
        firsts.len(),
        pct(&answered, 0.5),
        pct(&answered, 0.99),
        answered.last().copied().unwrap_or_default(),
        probes.longest_without_200
    );
    report_server(peak_rss, peak_fds);
}

fn report_server(peak_rss: u64, peak_fds: u64) {
    if peak_rss > 0 {
        println!(
            "server: peak RSS {} MiB, peak open descriptors {peak_fds}",
            peak_rss / 1024
        );
    }
}

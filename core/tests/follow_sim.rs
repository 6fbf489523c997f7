//! `Follow` in a simulated world, in virtual time (y-crdt's style): a
//! server on the core `Book`, a network that drops, delays, duplicates,
//! reorders and replays answers and cuts SSE streams, a runtime whose
//! clock jumps and whose network comes and goes (see `sim/`). Each seed is
//! one world; every run must:
//! - converge: end `done` with exactly the server's task;
//! - never show the page a version (or an attempt's progress) going back;
//! - make no request storm: requests per simulated minute stay within a
//!   bound derived from the backoff;
//! - reconnect within one backoff step of an `online` event;
//! - say nothing after it ended, and send nothing after `stop()`;
//! - and the page's hand-written JSON writers must write every event and
//!   mirror exactly as serde's do.
//!
//! `FOLLOW_SEEDS=n` sets how many seeds run (default 3,000, a few seconds
//! natively); a failure prints its seed, and `FOLLOW_SEED=n` reruns that
//! one alone.

mod sim;

use sim::World;
use taskwire_core::follow::{FailCode, FollowConfig};
use taskwire_core::TaskView;

/// Runs one seed; the first broken property, if any.
fn check(seed: u64) -> Result<World, String> {
    let mut world = World::new(seed);
    // Long enough for the slowest legitimate recovery: the server's
    // timeline, outages, and a Retry-After date read on a skewed clock.
    world.run(6.0 * 3_600_000.0);
    let seen = &world.seen;
    let stopped = seen.stopped_at.is_some();
    match (&seen.done, &seen.fail) {
        (Some(Some(task)), None) => {
            let truth = world.server.view();
            if !stopped && !world.server.timeline.is_empty() {
                return Err("done before the server's timeline ended".into());
            }
            if !stopped && *task != truth {
                return Err(format!("done with {task:?}, the server has {truth:?}"));
            }
        }
        (None, Some(fail)) if stopped && fail.code == FailCode::Stopped => {}
        other => return Err(format!("ended with {other:?} (stopped: {stopped})")),
    }
    if seen.statuses.last().map(String::as_str) != Some("closed") {
        return Err(format!("last status {:?}", seen.statuses.last()));
    }
    if seen.after_end > 0 {
        return Err(format!("{} events after the end", seen.after_end));
    }
    if let Some(at) = seen.stopped_at {
        if let Some(late) = seen.requests.iter().find(|&&r| r > at) {
            return Err(format!("a request at {late} after stop() at {at}"));
        }
    }
    if let Some(mismatch) = &seen.writer_mismatch {
        return Err(mismatch.clone());
    }
    never_back(&seen.updates)?;
    no_storm(&world.config, &seen.requests, &seen.triggers)?;
    reconnects_at_once(&world.config, &seen.requests, &seen.online_events)?;
    Ok(world)
}

fn never_back(updates: &[TaskView]) -> Result<(), String> {
    for pair in updates.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.version <= a.version {
            return Err(format!("update version {} -> {}", a.version, b.version));
        }
        if b.attempts < a.attempts {
            return Err(format!("attempts {} -> {}", a.attempts, b.attempts));
        }
        let running = |t: &TaskView| t.state == taskwire_core::State::Running;
        if a.attempts == b.attempts && running(a) && running(b) && b.progress < a.progress {
            return Err(format!(
                "progress {} -> {} in attempt {}",
                a.progress, b.progress, a.attempts
            ));
        }
    }
    Ok(())
}

/// Requests per simulated minute. Every request is either the answer to
/// something that happened (a version on the server, a network or
/// visibility event, a replayed answer that looks fresh: each may start
/// one ramp of quick retries, up to the first delay whose ceiling is
/// `maxMs`), a long-poll held `waitMs`, or a retry after a full-jitter
/// delay under `maxMs`: at most 16 in a minute at the ceiling (the chance
/// of more, 2^16/16!, is 3·10^-9 per minute).
fn no_storm(config: &FollowConfig, requests: &[f64], triggers: &[f64]) -> Result<(), String> {
    let b = config.backoff;
    let ramp = (b.max_ms / b.initial_ms.max(1.0)).log2().ceil().max(0.0) as usize + 1;
    let minute = |t: f64| (t / 60_000.0) as usize;
    let last = requests.last().copied().unwrap_or(0.0);
    let mut sent = vec![0usize; minute(last) + 1];
    for &r in requests {
        sent[minute(r)] += 1;
    }
    let mut caused = vec![0usize; sent.len()];
    for &t in triggers {
        if let Some(c) = caused.get_mut(minute(t)) {
            *c += 1;
        }
    }
    let held = 60_000 / config.wait_ms.max(1) as usize + 1;
    let at_ceiling = (16.0 * 60_000.0 / b.max_ms) as usize + 1;
    for (m, (&n, &c)) in sent.iter().zip(&caused).enumerate() {
        // A trigger near the end of the previous minute may spill over.
        let before = if m > 0 { caused[m - 1] } else { 0 };
        let limit = (c + before + 1) * (ramp + 3) + held + at_ceiling;
        if n > limit {
            return Err(format!(
                "{n} requests in minute {m} (limit {limit}: {c} triggers, ramp {ramp})"
            ));
        }
    }
    Ok(())
}

/// After an `online` event, the next request starts within one backoff
/// step (it starts at once, in fact).
fn reconnects_at_once(
    config: &FollowConfig,
    requests: &[f64],
    online: &[f64],
) -> Result<(), String> {
    let step = config.backoff.ceiling(1);
    for &at in online {
        match requests.iter().find(|&&r| r >= at) {
            Some(&r) if r - at <= step => {}
            next => {
                return Err(format!(
                    "online at {at}: next request {next:?}, over one step ({step} ms)"
                ))
            }
        }
    }
    Ok(())
}

#[test]
fn seeded_worlds_converge_never_regress_and_never_storm() {
    let seeds: Vec<u64> = match std::env::var("FOLLOW_SEED") {
        Ok(one) => vec![one.trim().parse().expect("FOLLOW_SEED is a number")],
        Err(_) => {
            let n = std::env::var("FOLLOW_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(3_000);
            (1..=n).collect()
        }
    };
    let mut failures = Vec::new();
    let (mut requests, mut fallbacks, mut snapshots) = (0, 0, 0);
    for &seed in &seeds {
        match check(seed) {
            Ok(world) => {
                requests += world.seen.requests.len();
                if world.follow.transport() == taskwire_core::follow::Transport::LongPoll
                    && world.config.transport == taskwire_core::follow::Transport::Sse
                {
                    fallbacks += 1;
                }
                snapshots += world.seen.snapshots;
            }
            Err(e) => failures.push(format!("seed {seed}: {e}\n  rerun: FOLLOW_SEED={seed} cargo test -p taskwire-core --test follow_sim")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} seeds failed:\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n")
    );
    if seeds.len() >= 500 {
        // The worlds really exercised what they claim to.
        assert!(fallbacks > 0, "no SSE run ever fell back to long-poll");
        assert!(snapshots > 0, "no run ever asked for a snapshot");
        assert!(
            requests > seeds.len() * 5,
            "{requests} requests in {} seeds",
            seeds.len()
        );
    }
}

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
//! - send one request at a time (never two in flight);
//! - and the page's hand-written JSON writers must write every event and
//!   mirror exactly as serde's do.
//!
//! The same worlds follow a batch (`sim/batch_server.rs`: 2 to 8 tasks
//! whose events interleave, several per commit), where every task must
//! converge and never go back, the batch cursor never go back, the
//! aggregate end equal to the server's, every request resume from the
//! batch cursor held, and only holding at least what the server had at
//! that cursor (an answer that lost an entry never lets the cursor pass).
//!
//! `FOLLOW_SEEDS=n` sets how many seeds run (default 3,000, a few seconds
//! natively); a failure prints its seed, and `FOLLOW_SEED=n` reruns that
//! one alone. For batches: `BATCH_SEEDS=n` (default 2,000) and
//! `BATCH_SEED=n`.

mod sim;

use std::collections::BTreeMap;

use sim::batch_server::BatchServer;
use sim::{Served, World};
use taskwire_core::follow::{BatchProgress, FailCode, FollowConfig};
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
            if !stopped && world.server.steps_left() > 0 {
                return Err("done before the server's timeline ended".into());
            }
            if !stopped && *task != truth {
                return Err(format!("done with {task:?}, the server has {truth:?}"));
            }
        }
        (None, Some(fail)) if stopped && fail.code == FailCode::Stopped => {}
        other => return Err(format!("ended with {other:?} (stopped: {stopped})")),
    }
    never_back(&seen.updates)?;
    every_follow(&world)?;
    Ok(world)
}

/// Runs one batch seed; the first broken property, if any.
fn check_batch(seed: u64) -> Result<World<BatchServer>, String> {
    let mut world = World::batch(seed);
    world.run(6.0 * 3_600_000.0);
    let seen = &world.seen;
    let stopped = seen.stopped_at.is_some();
    match (&seen.done, &seen.fail) {
        (Some(None), None) if !stopped => {
            if world.server.steps_left() > 0 {
                return Err("done before the server's timeline ended".into());
            }
            let truth = world.server.views();
            let mirror = world.follow.batch_mirror().ok_or("no batch mirror")?;
            let known: Vec<TaskView> = mirror
                .tasks()
                .iter()
                .filter_map(|m| m.task().cloned())
                .collect();
            if known != truth {
                return Err(format!("done with {known:?}, the server has {truth:?}"));
            }
            // What the page holds: the last update of each task (or the
            // view it started from).
            let mut page: BTreeMap<&str, &TaskView> = BTreeMap::new();
            for task in &seen.updates {
                page.insert(&task.id, task);
            }
            for task in &truth {
                if page.get(task.id.as_str()).is_some_and(|t| *t != task) {
                    return Err(format!(
                        "the page's last update of {} differs from {task:?}",
                        task.id
                    ));
                }
            }
            let aggregate = BatchProgress::of(truth.iter());
            if seen.progress.last() != Some(&aggregate) {
                return Err(format!(
                    "last progress {:?}, the server's {aggregate:?}",
                    seen.progress.last()
                ));
            }
        }
        (Some(None), None) => {}
        (None, Some(fail)) if stopped && fail.code == FailCode::Stopped => {}
        other => return Err(format!("ended with {other:?} (stopped: {stopped})")),
    }
    let mut by_task: BTreeMap<&str, Vec<TaskView>> = BTreeMap::new();
    for task in &seen.updates {
        by_task.entry(&task.id).or_default().push(task.clone());
    }
    for (id, updates) in &by_task {
        never_back(updates).map_err(|e| format!("task {id}: {e}"))?;
    }
    for pair in seen.progress.windows(2) {
        if pair[1].terminal < pair[0].terminal {
            return Err(format!(
                "terminal {} -> {}",
                pair[0].terminal, pair[1].terminal
            ));
        }
    }
    if seen.inconsistent > 0 {
        return Err(format!(
            "{} requests resumed from behind the server's state at their cursor",
            seen.inconsistent
        ));
    }
    if seen.cursor_back > 0 {
        return Err(format!(
            "the batch cursor went back {} times",
            seen.cursor_back
        ));
    }
    if seen.wrong_cursor > 0 {
        return Err(format!(
            "{} requests did not resume from the batch cursor held",
            seen.wrong_cursor
        ));
    }
    every_follow(&world)?;
    Ok(world)
}

/// The properties of every follow, of a task or a batch.
fn every_follow<S: Served>(world: &World<S>) -> Result<(), String> {
    let seen = &world.seen;
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
    if seen.overlapping > 0 {
        return Err(format!(
            "{} requests sent while another was in flight",
            seen.overlapping
        ));
    }
    no_storm(&world.config, &seen.requests, &seen.triggers)?;
    reconnects_at_once(&world.config, &seen.requests, &seen.online_events)
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

/// The seeds to run: `{one}=n` alone, else `1..={many}` (default `n`).
fn seeds(one: &str, many: &str, default: u64) -> Vec<u64> {
    match std::env::var(one) {
        Ok(seed) => vec![seed.trim().parse().expect("a seed is a number")],
        Err(_) => {
            let n = std::env::var(many)
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(default);
            (1..=n).collect()
        }
    }
}

/// What the worlds exercised, summed.
#[derive(Default)]
struct Tally {
    requests: usize,
    fallbacks: usize,
    snapshots: usize,
}

impl Tally {
    fn add<S: Served>(&mut self, world: &World<S>) {
        use taskwire_core::follow::Transport;
        self.requests += world.seen.requests.len();
        if world.follow.transport() == Transport::LongPoll
            && world.config.transport == Transport::Sse
        {
            self.fallbacks += 1;
        }
        self.snapshots += world.seen.snapshots;
    }

    /// Over enough seeds, the worlds really exercised what they claim to.
    fn assert_exercised(&self, seeds: usize) {
        if seeds < 500 {
            return;
        }
        assert!(self.fallbacks > 0, "no SSE run ever fell back to long-poll");
        assert!(self.snapshots > 0, "no run ever asked for a snapshot");
        assert!(
            self.requests > seeds * 5,
            "{} requests in {seeds} seeds",
            self.requests
        );
    }
}

fn report(failures: &[String], seeds: usize) {
    assert!(
        failures.is_empty(),
        "{} of {seeds} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn seeded_worlds_converge_never_regress_and_never_storm() {
    let seeds = seeds("FOLLOW_SEED", "FOLLOW_SEEDS", 3_000);
    let (mut failures, mut tally) = (Vec::new(), Tally::default());
    for &seed in &seeds {
        match check(seed) {
            Ok(world) => tally.add(&world),
            Err(e) => failures.push(format!("seed {seed}: {e}\n  rerun: FOLLOW_SEED={seed} cargo test -p taskwire-core --test follow_sim seeded_worlds")),
        }
    }
    report(&failures, seeds.len());
    tally.assert_exercised(seeds.len());
}

#[test]
fn seeded_batch_worlds_converge_per_task_and_hold_one_request() {
    let seeds = seeds("BATCH_SEED", "BATCH_SEEDS", 2_000);
    let (mut failures, mut tally) = (Vec::new(), Tally::default());
    for &seed in &seeds {
        match check_batch(seed) {
            Ok(world) => tally.add(&world),
            Err(e) => failures.push(format!("seed {seed}: {e}\n  rerun: BATCH_SEED={seed} cargo test -p taskwire-core --test follow_sim seeded_batch")),
        }
    }
    report(&failures, seeds.len());
    tally.assert_exercised(seeds.len());
}

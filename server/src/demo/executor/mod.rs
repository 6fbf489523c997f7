//! The demo's executor: plays a task's plan as an outside executor would,
//! posting **signed callbacks over real HTTP** to this server's own
//! callback endpoint ([`post`]), and behaves as PROTOCOL.md §Lifecycle
//! asks of one:
//!
//! - every event names its `attempt`, and each `start` opens the next
//!   with the demo's lease ([`lease_ms`]); while it waits between steps
//!   its worker sends a `heartbeat` every third of the lease;
//! - when an answer says `cancelRequested` it acknowledges (`ack_cancel`)
//!   and stops, unless its next step is past the point of no return: then
//!   it answers `cannot_cancel` and goes on ([`Step::cancellable`]);
//! - after a `hold` it waits for the person's decision (it polls the
//!   store, as a worker polls its queue) and goes on with the next plan;
//! - when the page kills its worker ([`Control`]), that worker goes
//!   silent: the lease lapses, the task is `unknown`, then re-queued, and
//!   a replacement worker opens the next attempt and finishes the plan.
//!   The killed worker comes back as a zombie with a late `succeed`,
//!   which the server fences off (`stale-attempt`); a note says so.
//!
//! A plan's callback ids are made the task's own (a tenant's callback id
//! is refused on its other tasks). Each answer is counted in the tenant's
//! `stats`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use taskwire_core::{EventKind, State};
use tokio::sync::watch;
use tokio::time::Instant;

mod send;
mod waits;

use super::limits::Slot;
use super::plans::{Step, LONG_CANNOT_CANCEL};
use super::workers::Control;
use crate::executor_event::ExecutorEvent;
use crate::routes::now_ms;
use crate::stats::Stats;
use crate::AppState;

/// The demo's lease in demo milliseconds (divided by `speed`, at least
/// [`MIN_LEASE_MS`], at most the server's `--lease-ms`): short, so that a
/// killed worker is noticed within seconds.
const LEASE_MS: f64 = 5_000.0;
/// The shortest lease, in real milliseconds: a loaded machine must not
/// make a live worker lapse.
const MIN_LEASE_MS: f64 = 1_500.0;
/// The `unknownGraceMs` of demo tasks in demo milliseconds (divided by
/// `speed`, at least [`MIN_GRACE_MS`]).
const GRACE_MS: f64 = 4_000.0;
const MIN_GRACE_MS: f64 = 1_000.0;
/// How long an executor waits for a decision, or for its task to be
/// re-queued after a kill, before it gives up (its demo slot is freed;
/// the task itself still expires at its TTL).
const WAIT_LIMIT: Duration = Duration::from_secs(600);

/// The lease a demo `start` asks for, in real milliseconds.
pub fn lease_ms(speed: f64, server_lease_ms: u64) -> u64 {
    let scaled = (LEASE_MS / speed).max(MIN_LEASE_MS) as u64;
    scaled.min(server_lease_ms).max(1)
}

/// The grace period of a demo task, in real milliseconds.
pub fn grace_ms(speed: f64) -> f64 {
    (GRACE_MS / speed).max(MIN_GRACE_MS).round()
}

/// One task to play.
pub struct Job {
    /// The tenant the callbacks are signed for.
    pub tenant: String,
    /// The task id.
    pub task: String,
    /// What to send, and when.
    pub plan: Vec<Step>,
    /// Demo time runs this many times faster.
    pub speed: f64,
    /// The task's place among the demo's running tasks, held to the end.
    pub slot: Slot,
}

/// Starts the executor of `job` (it ends by itself: every wait is bounded).
pub fn spawn(state: &AppState, job: Job) {
    let state = state.clone();
    tokio::spawn(async move {
        let _slot = job.slot;
        play(&state, job.tenant, job.task, job.plan, job.speed).await;
    });
}

/// Plays `plan` on `task` to its end, in the caller's own task: a batch's
/// workers play their items one after another with it.
pub async fn play(state: &AppState, tenant: String, task: String, plan: Vec<Step>, speed: f64) {
    let (control, _registration) = state.demo.workers.register(&tenant, &task);
    let kills = control.kills();
    let lease = lease_ms(speed, state.config.lease_ms);
    let mut executor = Executor {
        stats: state.demo.stats(&tenant),
        state: state.clone(),
        tenant,
        task,
        speed,
        control,
        kills,
        lease_ms: lease,
        beat_every: Duration::from_millis((lease / 3).max(1)),
        attempt: 0,
        worker: String::new(),
        holding: false,
        refused_cancel: false,
        beats: 0,
        last_sent: Instant::now(),
        sent: HashMap::new(),
    };
    executor.run(plan).await;
}

struct Executor {
    state: AppState,
    stats: Arc<Stats>,
    tenant: String,
    task: String,
    speed: f64,
    control: Arc<Control>,
    /// The page's kills of this task's workers.
    kills: watch::Receiver<u64>,
    lease_ms: u64,
    beat_every: Duration,
    /// Attempts opened so far: the next `start` opens `attempt + 1`.
    attempt: u64,
    /// The worker of the current attempt.
    worker: String,
    /// Whether the current attempt holds the task (it heartbeats, and
    /// the page may kill it).
    holding: bool,
    /// `cannot_cancel` was sent for the current cancel request.
    refused_cancel: bool,
    beats: u64,
    last_sent: Instant,
    /// Events already sent, by callback id: a redelivery resends the very
    /// same body under the same id.
    sent: HashMap<String, ExecutorEvent>,
}

/// How playing a stretch of plan ended.
enum Flow {
    /// Every step was sent.
    Finished,
    /// Cancelled (acknowledged, or cancelled at once).
    Stopped,
    /// The draft is held for a decision.
    Held(u32),
    /// The page killed the worker; these steps were never sent.
    Killed(VecDeque<Step>),
}

/// What waiting for the next step ended with.
enum Waited {
    Due,
    Stopped,
    Killed,
}

/// The parts of a callback answer the executor acts on.
struct Answer {
    reason: String,
    /// The task's state after the callback (`None`: not a state name).
    state: Option<State>,
    cancel_requested: bool,
}

impl Executor {
    async fn run(&mut self, plan: Vec<Step>) {
        let mut next = plan;
        loop {
            next = match self.play(next.into()).await {
                Flow::Finished | Flow::Stopped => return,
                Flow::Held(draft) => match self.await_decision(draft).await {
                    Some(plan) => plan,
                    None => return,
                },
                Flow::Killed(rest) => match self.await_requeue(rest).await {
                    Some(plan) => plan,
                    None => return,
                },
            };
        }
    }

    /// Sends `steps` at their times (from now), heartbeating in between.
    async fn play(&mut self, mut steps: VecDeque<Step>) -> Flow {
        let t0 = Instant::now();
        while let Some(next) = steps.front() {
            let at = t0 + self.scaled(next.at as f64);
            match self.wait_until(at, next.cancellable).await {
                Waited::Due => {}
                Waited::Stopped => return Flow::Stopped,
                Waited::Killed => return Flow::Killed(steps),
            }
            let Some(step) = steps.pop_front() else { break };
            let event = self.stamp(&step);
            let Some(answer) = self.post(&step.callback_id, &event).await else {
                continue;
            };
            self.track(&event, &answer);
            let next_cancellable = steps.front().map_or(true, |s| s.cancellable);
            if self.after(&answer, next_cancellable).await {
                return Flow::Stopped;
            }
            if event.kind == EventKind::Hold && answer.state == Some(State::WaitingApproval) {
                return Flow::Held(draft_of(&event));
            }
        }
        Flow::Finished
    }

    /// Waits until `at`; while the worker holds the task it heartbeats
    /// every third of the lease, and a kill ends the wait.
    async fn wait_until(&mut self, at: Instant, cancellable: bool) -> Waited {
        loop {
            let beat_at = self.last_sent + self.beat_every;
            if !self.holding {
                tokio::time::sleep_until(at).await;
                return Waited::Due;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(at.min(beat_at)) => {}
                _ = self.kills.changed() => return Waited::Killed,
            }
            if beat_at >= at {
                return Waited::Due;
            }
            self.beats += 1;
            let beat = self.own(EventKind::Heartbeat);
            let id = format!("hb-{}", self.beats);
            if let Some(answer) = self.post(&id, &beat).await {
                self.track(&beat, &answer);
                if self.after(&answer, cancellable).await {
                    return Waited::Stopped;
                }
            }
        }
    }

    /// The event of `step` as sent: a redelivery is the very same body;
    /// a new event is stamped with the time and (unless it names its own,
    /// as a zombie's does) the current attempt, a `start` opening the next.
    fn stamp(&mut self, step: &Step) -> ExecutorEvent {
        if let Some(event) = self.sent.get(&step.callback_id) {
            return event.clone();
        }
        let mut event = step.event.clone();
        if event.kind == EventKind::Start {
            self.attempt += 1;
            event.lease_ms = Some(self.lease_ms);
        }
        event.at_ms = Some(now_ms());
        event.attempt = event.attempt.or(Some(self.attempt));
        self.sent.insert(step.callback_id.clone(), event.clone());
        event
    }

    /// An event of the current attempt, now (a heartbeat, a cancel's
    /// answer).
    fn own(&self, kind: EventKind) -> ExecutorEvent {
        ExecutorEvent {
            attempt: Some(self.attempt),
            ..ExecutorEvent::new(kind).at(now_ms())
        }
    }

    /// Keeps `holding` in step with what the server made of the event.
    fn track(&mut self, event: &ExecutorEvent, answer: &Answer) {
        let own = event.attempt == Some(self.attempt);
        let live = answer.state.is_some_and(|s| !s.is_terminal());
        match event.kind {
            // A new start only: a redelivered one (`already-running`)
            // must not take a kill meant for this worker as seen.
            EventKind::Start if own && answer.reason == "started" => {
                self.worker = event.worker.as_deref().unwrap_or("worker").to_string();
                self.holding = true;
                self.refused_cancel = false;
                // A kill meant for an earlier worker is not this one's.
                self.kills.borrow_and_update();
                self.control.hold(self.attempt, &self.worker);
            }
            EventKind::Succeed | EventKind::Fail | EventKind::Hold | EventKind::AckCancel
                if own =>
            {
                self.release()
            }
            _ if !live => self.release(),
            _ => {}
        }
        if answer.reason == "stale-attempt" {
            let worker = event.worker.as_deref().unwrap_or("an old worker");
            let text = format!(
                "zombie {worker} (attempt {}) came back late with {}: fenced off \
                 (stale-attempt); attempt {} goes on",
                event.attempt.unwrap_or(0),
                event.kind.as_str(),
                self.attempt
            );
            self.note("fenced", text);
        }
    }

    fn release(&mut self) {
        self.holding = false;
        self.control.release();
    }

    /// Acts on a cancel: true when the executor stops.
    async fn after(&mut self, answer: &Answer, next_cancellable: bool) -> bool {
        if answer.state == Some(State::Cancelled) {
            self.release();
            return true;
        }
        if !answer.cancel_requested {
            return false;
        }
        if next_cancellable {
            let ack = self.own(EventKind::AckCancel);
            self.post("ack-cancel", &ack).await;
            self.release();
            return true;
        }
        if !self.refused_cancel {
            self.refused_cancel = true;
            let refusal = ExecutorEvent {
                reason: Some(LONG_CANNOT_CANCEL.to_string()),
                ..self.own(EventKind::CannotCancel)
            };
            let id = format!("cannot-cancel-{}", self.attempt);
            self.post(&id, &refusal).await;
            self.note(
                "cannot-cancel",
                format!("{} cannot stop: {LONG_CANNOT_CANCEL}", self.worker),
            );
        }
        false
    }

    fn scaled(&self, demo_ms: f64) -> Duration {
        Duration::from_secs_f64(demo_ms / self.speed / 1000.0)
    }

    fn note(&self, kind: &str, text: String) {
        self.state
            .demo
            .workers
            .note(&self.tenant, &self.task, kind, text);
    }
}

/// The draft number a hold names (`…/v<n>`).
fn draft_of(hold: &ExecutorEvent) -> u32 {
    hold.artifact_ref
        .as_deref()
        .and_then(|r| r.rsplit("/v").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_scale_with_speed_within_bounds() {
        assert_eq!(lease_ms(1.0, 30_000), 5_000);
        assert_eq!(lease_ms(100.0, 30_000), 1_500, "never below the floor");
        assert_eq!(lease_ms(1.0, 600), 600, "never above --lease-ms");
        assert_eq!(grace_ms(2.0), 2_000.0);
        assert_eq!(grace_ms(1000.0), 1_000.0);
    }

    #[test]
    fn a_hold_names_its_draft() {
        let mut hold = ExecutorEvent::new(EventKind::Hold);
        assert_eq!(draft_of(&hold), 1);
        hold.artifact_ref = Some("blob://drafts/doc-1/v3".into());
        assert_eq!(draft_of(&hold), 3);
    }
}

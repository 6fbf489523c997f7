//! The claim loop, each job's life, and the shutdown.
//!
//! # Driving it
//!
//! 1. Wait for a free slot (of `concurrency`), then claim as many tasks
//!    as there are free slots, held up to `waitMs` while there is none.
//!    The claim answer's `nowMs` sets the worker's clock.
//! 2. Each claimed task becomes a job in its own tokio task, with a
//!    heartbeat every third of the lease beside it. Every answer's `next`
//!    can fire the job's signal ([`crate::report`]).
//! 3. When the handler returns, one last report, decided by
//!    [`last_word`]: `succeed`, `fail`, `ack_cancel`, or nothing.
//! 4. A shutdown stops claiming (a claim already held is awaited within
//!    the grace, and what it brings is handed back at once), waits for
//!    the jobs up to the grace, then fires the rest's signals and reports
//!    each `fail`, retryable, `"worker shut down"`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskwire_core::NonBlank;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::claim::{claim, ClaimError, RunError};
use crate::error::ConfigError;
use crate::error::{ErrorClass, JobError};
use crate::http::backoff;
use crate::job::{Done, Ending, Job};
use crate::report::{Kind, Reporter, StopReason};
use crate::worker::{Handler, Worker};

/// What a job whose shutdown grace ran out is reported as.
const SHUT_DOWN: &str = "worker shut down";

/// The running jobs' reporters, by task id: what a shutdown reports for.
type Running = Arc<Mutex<HashMap<String, Arc<Reporter>>>>;

impl Worker {
    /// Claims and runs jobs until [`Worker::shutdown`]. A claim that fails
    /// for a while (the server down or restarting, a 5xx, a 429) is
    /// written to stderr and tried again with backoff: a worker outlives a
    /// server restart. A claim refused for a reason no retry fixes (a
    /// wrong secret or tenant: 401; a server without the claim route:
    /// 404) ends the run with [`RunError::Refused`], after the running
    /// jobs were handed back as in a shutdown with no grace.
    pub async fn run(&self) -> Result<(), RunError> {
        let inner = &self.inner;
        if inner
            .handlers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            return Err(RunError::Config(ConfigError::new(
                "handlers",
                "register one with handle(kind, handler) before run()",
            )));
        }
        {
            let mut running = inner.running.lock().unwrap_or_else(|e| e.into_inner());
            if *running {
                return Err(RunError::AlreadyRunning);
            }
            *running = true;
        }
        let mut refused = None;
        let slots = Arc::new(Semaphore::new(inner.concurrency));
        let running: Running = Arc::default();
        let mut jobs = JoinSet::new();
        let mut stop = inner.stop.subscribe();
        let mut failures: u32 = 0;
        // The end of the shutdown's grace, counted from when it was asked.
        let deadline = loop {
            if let Some(grace) = *stop.borrow_and_update() {
                break Instant::now() + grace;
            }
            while jobs.try_join_next().is_some() {}
            // 1. At least one free slot, then every other free one.
            let first = tokio::select! {
                p = Arc::clone(&slots).acquire_owned() => p.ok(),
                _ = stop.changed() => continue,
            };
            let mut permits: Vec<OwnedSemaphorePermit> = first.into_iter().collect();
            while let Ok(p) = Arc::clone(&slots).try_acquire_owned() {
                permits.push(p);
            }
            let kinds: Vec<String> = inner
                .handlers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .keys()
                .cloned()
                .collect();
            let claim = claim(inner, &kinds, permits.len());
            tokio::pin!(claim);
            let (answer, stopped) = tokio::select! {
                a = &mut claim => (a, None),
                _ = stop.changed() => {
                    // Stopping: the held claim may already have claimed
                    // tasks; let it answer within the grace and hand them
                    // back, rather than leave them to lapse.
                    let deadline = Instant::now() + (*stop.borrow()).unwrap_or_default();
                    let late = tokio::time::timeout_at(deadline, &mut claim).await;
                    (late.unwrap_or(Ok(Vec::new())), Some(deadline))
                }
            };
            match answer {
                Ok(tasks) => {
                    failures = 0;
                    for (task, lease_end) in tasks {
                        let reporter = Arc::new(Reporter::new(
                            Arc::clone(&inner.transport),
                            task.view.id.clone(),
                            task.view.attempts,
                            inner.lease,
                            lease_end,
                        ));
                        if stopped.is_some() {
                            let _ = reporter.fail(SHUT_DOWN, true).await;
                            continue;
                        }
                        let handler = inner
                            .handlers
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get(&task.kind)
                            .cloned();
                        let permit = permits.pop();
                        let job = Job::new(task, Arc::clone(&reporter));
                        let running = Arc::clone(&running);
                        running
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(job.id().to_string(), Arc::clone(&reporter));
                        jobs.spawn(async move {
                            live(job.clone(), handler).await;
                            running
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .remove(job.id());
                            drop(permit);
                        });
                    }
                }
                Err(ClaimError::Refused(e)) => {
                    refused = Some(e);
                    break Instant::now();
                }
                Err(ClaimError::Again(e, retry_after)) => {
                    eprintln!("taskwire-worker {}: claim: {e}", inner.name);
                    let wait =
                        backoff(failures.saturating_add(3)).max(retry_after.unwrap_or_default());
                    failures = failures.saturating_add(1);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = stop.changed() => {}
                    }
                }
            }
            if let Some(deadline) = stopped {
                break deadline;
            }
        };
        wind_down(&mut jobs, &running, deadline).await;
        *inner.running.lock().unwrap_or_else(|e| e.into_inner()) = false;
        inner.finished.notify_waiters();
        refused.map_or(Ok(()), Err)
    }
}

/// A job's life: heartbeats beside the handler, then its last word.
async fn live(job: Job, handler: Option<Handler>) {
    let reporter = Arc::clone(job.reporter());
    let Some(handler) = handler else {
        // The handler was removed between the claim and now: hand the
        // task back for another worker.
        let _ = reporter
            .fail(&format!("no handler for kind {:?}", job.kind()), true)
            .await;
        return;
    };
    // Both children are aborted when this job is dropped: a worker whose
    // `run()` future is dropped (its task aborted, its runtime shut down)
    // dies as a killed process does, and must not keep a lease alive
    // with heartbeats for a handler nobody runs.
    let beat = AbortOnDrop({
        let reporter = Arc::clone(&reporter);
        tokio::spawn(async move {
            let period = reporter.lease() / 3;
            let mut next = Instant::now() + period;
            while !reporter.ended() {
                tokio::time::sleep_until(next).await;
                next = Instant::now() + period;
                if let Err(e) = reporter.heartbeat().await {
                    if !reporter.ended() {
                        eprintln!("taskwire-worker: {} heartbeat: {e}", reporter.task_id);
                    }
                }
            }
        })
    });
    // The handler in a task of its own, so that a panic is a failure of
    // this job and not of the worker.
    let mut handler = AbortOnDrop(tokio::spawn(handler(job.clone())));
    let outcome = match (&mut handler.0).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => Err(JobError::fatal(format!(
            "handler panicked: {}",
            panic_text(e)
        ))),
        Err(_) => Err(JobError::cancelled()),
    };
    drop(beat);
    last_word(&reporter, outcome).await;
}

/// A spawned task that is aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn panic_text(e: tokio::task::JoinError) -> String {
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// The report a finished handler's outcome calls for:
///
/// | signal fired | outcome | report |
/// |---|---|---|
/// | `stop`, `lease-lost` | any | nothing: the attempt is over |
/// | `shutdown` | any but a result | `fail`, retryable, `"worker shut down"` (also sent by the shutdown itself at the grace's end, whatever the handler does) |
/// | `cancel` | `Err` | `ack_cancel` |
/// | any / none | a result | `succeed` (after a cancel the server keeps it for compensation and ends the task `cancelled`) |
/// | none | `Err` | `fail`, retryable by its class |
/// | any | held | nothing more: `hold` was the last word |
pub(crate) async fn last_word(reporter: &Reporter, outcome: Result<Done, JobError>) {
    if reporter.ended() {
        return;
    }
    let why = reporter.signal.why();
    if matches!(why, Some(StopReason::Stop | StopReason::LeaseLost)) {
        return;
    }
    // The whole text before the end: a follower never sees a closed
    // stream short of what the job wrote.
    reporter.flush_outputs().await;
    let sent = match (outcome, why) {
        (Ok(Done(Ending::Held)), _) => return,
        (Ok(Done(ending)), _) => {
            let sent = reporter
                .report(Kind::Last, |at_ms, attempt| {
                    last_event(&ending, at_ms, attempt)
                })
                .await;
            match sent {
                Err(crate::report::ReportError::Invalid(m)) => {
                    // A blank result from the handler: a bug, final.
                    reporter
                        .fail(&format!("the handler's result: {m}"), false)
                        .await
                }
                other => other.map(|reply| reply.next),
            }
        }
        (Err(_), Some(StopReason::Shutdown)) => reporter.fail(SHUT_DOWN, true).await,
        (Err(_), Some(StopReason::Cancel)) => reporter.ack_cancel().await,
        (Err(e), _) => match e.class() {
            ErrorClass::Retryable => reporter.fail(e.message(), true).await,
            ErrorClass::Final => reporter.fail(e.message(), false).await,
            // Cancelled with no signal fired: the handler gave up on its
            // own, which no other attempt would change.
            ErrorClass::Cancelled => reporter.fail("the job cancelled itself", false).await,
        },
    };
    if let Err(e) = sent {
        eprintln!("taskwire-worker: {} last report: {e}", reporter.task_id);
    }
}

/// Waits for the jobs up to `deadline`; then fires the rest's signals
/// and reports each `fail`, retryable, so another worker takes it.
async fn wind_down(jobs: &mut JoinSet<()>, running: &Running, deadline: Instant) {
    while !jobs.is_empty() {
        match tokio::time::timeout_at(deadline, jobs.join_next()).await {
            Ok(_) => {}
            Err(_) => break,
        }
    }
    let left: Vec<Arc<Reporter>> = running
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    for reporter in &left {
        reporter.signal.fire(StopReason::Shutdown);
    }
    for reporter in left {
        if let Err(e) = reporter.fail(SHUT_DOWN, true).await {
            if !matches!(e, crate::report::ReportError::Ended) {
                eprintln!("taskwire-worker: {} shutdown report: {e}", reporter.task_id);
            }
        }
    }
    // Their handlers saw the signal; whatever they return now is not
    // reported (the attempt's last word was said). Give them a moment to
    // unwind, then drop them.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while jobs.join_next().await.is_some() {}
    })
    .await;
    jobs.abort_all();
}

/// The last report of a job that ended well (not held).
fn last_event(
    ending: &Ending,
    at_ms: taskwire_core::Millis,
    attempt: u64,
) -> Result<taskwire_core::Event, taskwire_core::Error> {
    let pair = |r: &str, h: &str, names: [&str; 2]| -> Result<_, taskwire_core::Error> {
        Ok((NonBlank::new(r, names[0])?, NonBlank::new(h, names[1])?))
    };
    Ok(match ending {
        Ending::Result {
            result_ref,
            result_hash,
        } => {
            let (result_ref, result_hash) = pair(result_ref, result_hash, RESULT)?;
            taskwire_core::Event::Succeed {
                at_ms,
                result_ref,
                result_hash,
                attempt: Some(attempt),
            }
        }
        Ending::Exhausted { partial } => taskwire_core::Event::Exhaust {
            at_ms,
            partial: match partial {
                Some((r, h)) => {
                    let (output_ref, output_hash) = pair(r, h, RESULT)?;
                    Some(taskwire_core::steps::Checkpoint {
                        output_ref,
                        output_hash,
                    })
                }
                None => None,
            },
            attempt: Some(attempt),
        },
        // Held returns before any last report is made.
        Ending::Held => {
            return Err(taskwire_core::Error::invalid(
                "a held job sends no last report",
            ))
        }
    })
}

const RESULT: [&str; 2] = ["resultRef", "resultHash"];

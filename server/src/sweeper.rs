//! The sweeper: tasks expire at their TTL even when no executor ever
//! calls back, and a lapsed lease, a grace period or an execution
//! deadline moves its task on time. Each tick asks the store to move what
//! is due (core's `TaskView::expire_step`, then `sweep_step`); the store
//! publishes the changes, so watchers wake as for any other commit.
//!
//! Each due row is handled on its own: one the store cannot expire (it
//! does not parse, or disagrees with itself) is quarantined and reported
//! once, and the others expire on time (`store::quarantine`). A storage
//! error stops the tick; the next one retries.
//!
//! Ticking an indexed query (`tasks_due`, live rows only) is cheap and
//! works unchanged for a multi-instance PostgreSQL store, where an
//! in-memory deadline heap would not see other instances' tasks.

use std::time::Duration;

use crate::clock::now_ms;
use crate::store::StoreError;
use crate::AppState;

/// Expiries per store call, so one tick never holds the writer long.
const BATCH: u32 = 256;

/// The sweeps each tick runs, in order: the TTL first (an expiry ends
/// the task, so a lease that ran out at the same time has nothing left to
/// do), then the lifecycle (`lapse`, `abandon`, `timeout`; core's
/// `sweep_step`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sweep {
    Ttl,
    Lifecycle,
}

impl Sweep {
    /// The `sweep` label of `/metrics`' moved-tasks counter.
    fn label(self) -> &'static str {
        match self {
            Sweep::Ttl => "ttl",
            Sweep::Lifecycle => "lifecycle",
        }
    }
}

/// Runs forever (the server aborts it at shutdown).
pub async fn run(state: AppState, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A store error is reported when it starts and when it ends, not on
    // every tick. A storage outage (a full disk) is not reported here at
    // all: the store logs it once for every writer (store/outage.rs).
    let mut failing: Option<String> = None;
    // The same for the delete of used callback requests, on its own: a
    // delete that fails while the sweeps succeed must not report an end
    // and a start again on every tick.
    let mut forgetting: Option<String> = None;
    loop {
        tick.tick().await;
        state.hub.metrics.sweeper_ran();
        'sweeps: for sweep in [Sweep::Ttl, Sweep::Lifecycle] {
            loop {
                let swept = match sweep {
                    Sweep::Ttl => state.store.expire_due(now_ms(), BATCH).await,
                    Sweep::Lifecycle => state.store.lifecycle_due(now_ms(), BATCH).await,
                };
                match swept {
                    Ok(swept) => {
                        if failing.take().is_some() {
                            eprintln!("taskwire-server: sweeper: the store answers again");
                        }
                        state.stats.swept(swept.expired);
                        state.hub.metrics.swept(sweep.label(), swept.expired);
                        state.stats.quarantined("sweeper", &swept.quarantined);
                        if swept.looked_at < BATCH as usize {
                            break;
                        }
                    }
                    Err(StoreError::Unavailable(_)) => break 'sweeps,
                    Err(e) => {
                        report(&mut failing, e.to_string());
                        break 'sweeps;
                    }
                }
            }
        }
        // Signed callback requests remembered as used, once their
        // timestamp can no longer be accepted (store/callback_replays.rs).
        match state.store.forget_used_callbacks(now_ms()).await {
            Ok(_) => {
                if forgetting.take().is_some() {
                    eprintln!(
                        "taskwire-server: sweeper: used callback requests are forgotten again"
                    );
                }
            }
            // A storage outage: the store logs it once (store/outage.rs).
            Err(StoreError::Unavailable(_)) => {}
            Err(e) => report(&mut forgetting, e.to_string()),
        }
    }
}

/// Reports a store error when it starts, not on every tick while it lasts.
fn report(failing: &mut Option<String>, e: String) {
    if failing.as_ref() != Some(&e) {
        eprintln!("taskwire-server: sweeper: {e} (retrying every tick)");
    }
    *failing = Some(e);
}

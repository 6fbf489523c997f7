//! The TTL sweeper: tasks expire at their TTL even when no executor ever
//! calls back. Each tick asks the store to expire what is due (core's
//! `TaskView::expire_step`, one notification each); the store publishes
//! the changes, so watchers wake as for any other commit.
//!
//! Ticking an indexed query (`tasks_due`, live rows only) is cheap and
//! works unchanged for a multi-instance PostgreSQL store, where an
//! in-memory deadline heap would not see other instances' tasks.

use std::time::Duration;

use crate::routes::now_ms;
use crate::AppState;

/// Expiries per store call, so one tick never holds the writer long.
const BATCH: u32 = 256;

/// Runs forever (the server aborts it at shutdown).
pub async fn run(state: AppState, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        loop {
            match state.store.expire_due(now_ms(), BATCH).await {
                Ok(n) => {
                    state.stats.swept(n);
                    if n < BATCH as usize {
                        break;
                    }
                }
                Err(e) => {
                    eprintln!("taskwire-server: sweeper: {e:?}");
                    break;
                }
            }
        }
    }
}

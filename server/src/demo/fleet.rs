//! The demo's workers: per tenant, [`MEMBERS`] workers of the
//! `taskwire-worker` library claim the demo's kinds from this server's
//! work queue over loopback HTTP (through the tenant's [`Link`]), exactly
//! as a tenant's own workers would, with the tenant's callback secret.
//!
//! The page's "kill the worker" kills one of them as a process dies: its
//! `run()` is aborted, and every job it held dies with it, heartbeats
//! included. A fresh worker is started in its place at once, and the
//! killed worker's tasks are taken over by whichever worker claims them
//! when the server re-queues them (their lease lapses, `unknown`, then
//! the grace period).
//!
//! The fleet also reads the tenant's notifications feed, as an
//! application's backend would, to learn which demo tasks ended while no
//! worker held them (rejected, cancelled while held or queued, expired in
//! the queue): the demo is then done with them ([`super::scripts`]).
//!
//! Started on a tenant's first workload, and stopped with the server.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use taskwire_worker::Worker;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::link::Link;
use super::play::{self, Ctx};
use super::scripts::Scripts;
use crate::error::ApiError;
use crate::AppState;

/// Workers per tenant: one to kill, one to take over.
pub const MEMBERS: usize = 2;
/// Jobs each worker runs at once (a batch's items wait `queued` beyond).
pub const CONCURRENCY: usize = 16;
/// The lease of each attempt (at most the server's `--lease-ms`):
/// short, so that a killed worker is noticed within seconds; heartbeats
/// go every second.
pub const LEASE_MS: u64 = 3_000;
/// The `unknownGraceMs` of demo tasks in demo milliseconds (divided by
/// `speed`, at least [`MIN_GRACE_MS`]): a killed worker's task is
/// re-queued seconds after its lease lapses.
const GRACE_MS: f64 = 4_000.0;
const MIN_GRACE_MS: f64 = 1_000.0;

/// The grace period of a demo task played at `speed`, in real
/// milliseconds.
pub fn grace_ms(speed: f64) -> f64 {
    (GRACE_MS / speed).max(MIN_GRACE_MS).round()
}

/// How long a claim waits for work.
const WAIT_MS: u64 = 10_000;
/// The kinds the demo's workloads make.
pub const KINDS: [&str; 4] = ["summary", "long", "moderation", "report"];

/// Every tenant's workers.
#[derive(Default)]
pub struct Fleets {
    tenants: Mutex<HashMap<String, Fleet>>,
}

impl std::fmt::Debug for Fleets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fleets(…)")
    }
}

struct Fleet {
    ctx: Arc<Ctx>,
    members: Vec<Member>,
    /// Workers started so far: the next one's number.
    started: u64,
    /// Reads the notifications feed (aborted when the fleet is dropped).
    reaper: JoinHandle<()>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.reaper.abort();
    }
}

/// How often the reaper reads the notifications feed.
const REAP_EVERY: Duration = Duration::from_millis(250);
/// Notifications read at once.
const REAP_PAGE: u32 = 1_000;

/// Forgets the scripts of `tenant`'s tasks as the feed reports them
/// finished.
async fn reap(state: AppState, tenant: String, scripts: Arc<Scripts>) {
    let mut after = 0;
    loop {
        match state
            .store
            .notifications(tenant.clone(), after, REAP_PAGE)
            .await
        {
            Ok(rows) => {
                for row in &rows {
                    scripts.remove(&row.notification.task_id);
                }
                after = rows.last().map_or(after, |r| r.seq);
                if rows.len() == REAP_PAGE as usize {
                    continue;
                }
            }
            Err(e) => eprintln!("taskwire-server: demo workers: notifications: {e}"),
        }
        tokio::time::sleep(REAP_EVERY).await;
    }
}

struct Member {
    name: String,
    run: JoinHandle<()>,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.run.abort();
    }
}

impl Fleets {
    /// Starts `tenant`'s workers unless they run.
    pub async fn ensure(&self, state: &AppState, tenant: &str) -> Result<(), ApiError> {
        let mut tenants = self.tenants.lock().await;
        if tenants.contains_key(tenant) {
            return Ok(());
        }
        let link = Link::start(state.addr, state.demo.stats(tenant))
            .await
            .map_err(|e| ApiError::internal(format!("demo link: {e}")))?;
        let ctx = Arc::new(Ctx {
            scripts: Arc::clone(&state.demo.scripts),
            workers: Arc::clone(&state.demo.workers),
            link,
        });
        let reaper = tokio::spawn(reap(
            state.clone(),
            tenant.to_string(),
            Arc::clone(&state.demo.scripts),
        ));
        let mut fleet = Fleet {
            ctx,
            members: Vec::with_capacity(MEMBERS),
            started: 0,
            reaper,
        };
        for _ in 0..MEMBERS {
            fleet.start_member(state, tenant)?;
        }
        tenants.insert(tenant.to_string(), fleet);
        Ok(())
    }

    /// Kills `tenant`'s worker `name` as its process would die, and starts
    /// another in its place. Returns the new worker's name; `None` when
    /// no such worker runs (killed already).
    pub async fn kill(
        &self,
        state: &AppState,
        tenant: &str,
        name: &str,
    ) -> Result<Option<String>, ApiError> {
        let mut tenants = self.tenants.lock().await;
        let Some(fleet) = tenants.get_mut(tenant) else {
            return Ok(None);
        };
        let Some(at) = fleet.members.iter().position(|m| m.name == name) else {
            return Ok(None);
        };
        // Dropping it aborts its run, and with it every job it held.
        drop(fleet.members.remove(at));
        fleet.start_member(state, tenant).map(Some)
    }

    /// Stops every worker (the server is stopping).
    pub async fn stop(&self) {
        self.tenants.lock().await.clear();
    }
}

impl Fleet {
    /// Starts one more worker; its name.
    fn start_member(&mut self, state: &AppState, tenant: &str) -> Result<String, ApiError> {
        self.started += 1;
        let name = format!("demo-worker-{}", self.started);
        let secret = state
            .keyring
            .secrets_of(tenant)
            .first()
            .ok_or_else(|| {
                ApiError::internal(format!(
                    "demo workers: tenant {tenant} has no callback secret"
                ))
            })?
            .to_whsec();
        let lease = LEASE_MS.min(state.config.lease_ms).max(1_000);
        let worker = Worker::builder(format!("http://{}", self.ctx.link.addr), tenant, secret)
            .name(&name)
            .concurrency(CONCURRENCY)
            .lease_ms(lease)
            .wait_ms(WAIT_MS)
            .build()
            .map_err(|e| ApiError::internal(format!("demo worker: {e}")))?;
        for kind in KINDS {
            let (ctx, me) = (Arc::clone(&self.ctx), name.clone());
            worker
                .handle(kind, move |job| {
                    play::run(Arc::clone(&ctx), me.clone(), job)
                })
                .map_err(|e| ApiError::internal(format!("demo worker: {e}")))?;
        }
        let run = tokio::spawn({
            let (worker, name) = (worker.clone(), name.clone());
            async move {
                if let Err(e) = worker.run().await {
                    eprintln!("taskwire-server: demo {name}: {e}");
                }
            }
        });
        self.members.push(Member {
            name: name.clone(),
            run,
        });
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_scales_with_speed_within_bounds() {
        assert_eq!(grace_ms(2.0), 2_000.0);
        assert_eq!(grace_ms(1000.0), 1_000.0);
    }
}

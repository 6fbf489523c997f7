//! The moderation batch (the seed's second workload, 「500 条内容逐条分类」):
//! one batch of up to 500 items (PROTOCOL.md §Batches), created through
//! the store's batch create, and played by a pool of [`WORKERS`] moderation
//! workers that take the items in order, one at a time each, as a real
//! worker pool drains its queue (items wait `queued` until a worker is
//! free).
//!
//! Items 1 to 3 are the seed's three scenarios, unchanged: a quota
//! failure then a retried success, invalid input, and a task that expires
//! before its late success. The others are ordinary moderation calls, a
//! few of which are retried or refused, so the grid shows every state.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use taskwire_wire::to_json;

use super::executor;
use super::plans::{self, Step, EXPIRING_TTL_MS};
use crate::error::ApiError;
use crate::routes::tasks::{count_open_task_refusal, new_task_view, LifecycleOptions};
use crate::store::batches::new_batch_id;
use crate::store::{BatchCreated, NewBatch, NewTask};
use crate::AppState;
use taskwire_wire::exact::RawJson;

/// Items of the page's batch (and the most a demo batch may have).
pub const MAX_ITEMS: usize = 500;
/// Workers that play one batch: its share of the tenant's running demo
/// tasks (`limits::TENANT_RUNNING`).
pub const WORKERS: usize = 16;
/// The seed's scenarios, items 1 to 3.
pub const SEED_SCENARIOS: [&str; 3] = ["quota-then-success", "invalid-input", "expires"];

/// One item: its scenario, TTL (ms) and plan.
struct Item {
    scenario: &'static str,
    ttl_ms: f64,
    plan: Vec<Step>,
}

/// Item `index` (from 0) of a batch played at `speed`.
fn item(index: usize, speed: f64) -> Item {
    let seed = |scenario, ttl_ms, plan| Item {
        scenario,
        ttl_ms,
        plan,
    };
    match index {
        0 => seed(SEED_SCENARIOS[0], 3_600_000.0, plans::quota_plan()),
        1 => seed(SEED_SCENARIOS[1], 3_600_000.0, plans::invalid_plan()),
        2 => seed(
            SEED_SCENARIOS[2],
            EXPIRING_TTL_MS as f64 / speed,
            plans::expiring_plan(),
        ),
        i if i % 25 == 7 => seed("retried", 3_600_000.0, plans::moderation_retried(i)),
        i if i % 40 == 13 => seed("refused", 3_600_000.0, plans::moderation_refused(i)),
        i => seed("classified", 3_600_000.0, plans::moderation_item(i)),
    }
}

/// An item's input: `{"item","scenario","workload"}` (name order, as its
/// tasks have always stored it).
#[derive(Serialize)]
struct ItemInput {
    item: usize,
    scenario: &'static str,
    workload: &'static str,
}

/// How long each worker runs (real time): the items go, in order, to the
/// worker that is free first, as the pool plays them (what a refused
/// start's `Retry-After` is estimated from).
fn worker_runs(items: &[Item], speed: f64) -> Vec<Duration> {
    let mut ends = vec![0u64; WORKERS.min(items.len()).max(1)];
    for it in items {
        if let Some(first_free) = ends.iter_mut().min() {
            *first_free += plans::duration(&it.plan);
        }
    }
    ends.iter()
        .map(|ms| Duration::from_secs_f64(*ms as f64 / speed / 1000.0))
        .collect()
}

/// What the workload answers: the batch and its items.
pub struct Started {
    /// The batch as created (cursor 1, every item queued).
    pub batch: BatchCreated,
    /// The seed's scenarios among the items (the first three).
    pub scenarios: Vec<&'static str>,
}

/// Creates the tenant's batch of `count` items and starts its workers.
pub async fn start(
    state: &AppState,
    tenant: String,
    speed: f64,
    count: usize,
) -> Result<Started, ApiError> {
    let items: Vec<Item> = (0..count).map(|i| item(i, speed)).collect();
    // Admitted as WORKERS running tasks, each for as long as its items.
    let slots = state.demo.admit(&tenant, &worker_runs(&items, speed))?;
    let lifecycle = LifecycleOptions {
        unknown_grace_ms: Some(executor::grace_ms(speed)),
        ..Default::default()
    };
    let mut tasks = Vec::with_capacity(count);
    for (i, it) in items.iter().enumerate() {
        let kind = Some("moderation".to_string());
        let field = format!("items[{i}]");
        let view = new_task_view(state, &field, (it.ttl_ms, 3), lifecycle, &kind)?;
        let input = to_json(&ItemInput {
            item: i + 1,
            scenario: it.scenario,
            workload: "batch",
        });
        tasks.push(NewTask {
            tenant: tenant.clone(),
            view,
            kind,
            input: Some(
                RawJson::parse(input)
                    .map_err(|e| ApiError::internal(format!("demo input: {e}")))?,
            ),
            idempotency: None,
            open_task_limit: None,
        });
    }
    let batch = state
        .store
        .create_batch(NewBatch {
            id: new_batch_id().map_err(ApiError::internal)?,
            tenant: tenant.clone(),
            tasks,
            idempotency: None,
            open_task_limit: state.quotas.max_open_tasks(&tenant),
            created_at_ms: crate::routes::now_ms(),
        })
        .await
        .inspect_err(|e| count_open_task_refusal(state, e))?;
    for task in &batch.tasks {
        state
            .hub
            .work
            .offer(&task.tenant, task.kind.as_deref().unwrap_or(""));
    }
    state.demo.made.batch(&batch.id);
    for task in &batch.tasks {
        state.demo.made.task(&task.view.id);
    }
    let queue: VecDeque<(String, Vec<Step>)> = batch
        .tasks
        .iter()
        .zip(items)
        .map(|(task, it)| (task.view.id.clone(), it.plan))
        .collect();
    let queue = Arc::new(Mutex::new(queue));
    for slot in slots {
        let (state, tenant, queue) = (state.clone(), tenant.clone(), Arc::clone(&queue));
        tokio::spawn(async move {
            let _slot = slot;
            loop {
                // The lock is never held across an await.
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some((task, plan)) = next else { break };
                executor::play(&state, tenant.clone(), task, plan, speed).await;
            }
        });
    }
    let scenarios = SEED_SCENARIOS.iter().take(count).copied().collect();
    Ok(Started { batch, scenarios })
}

//! The moderation batch (the seed's second workload, 「500 条内容逐条分类」):
//! one batch of up to 500 items (PROTOCOL.md §Batches), created through
//! the store's batch create, and run by the tenant's demo workers, which
//! claim the items from the work queue in order, as many at once as they
//! have free slots (items wait `queued` until a worker is free).
//!
//! Items 1 to 3 are the seed's three scenarios: a quota failure then a
//! retried success, invalid input, and a task that expires before its
//! late success. The others are ordinary moderation calls, a few of which
//! are retried or refused, so the grid shows every state
//! ([`plans::item_plan`]).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use taskwire_wire::to_json;

use super::fleet;
use super::plans::{self, Workload, EXPIRING_TTL_MS, SEED_SCENARIOS};
use super::scripts::Script;
use crate::error::ApiError;
use crate::routes::tasks::{count_open_task_refusal, new_task_view, LifecycleOptions};
use crate::store::batches::new_batch_id;
use crate::store::{BatchCreated, NewBatch, NewTask};
use crate::AppState;
use taskwire_wire::exact::RawJson;

/// Items of the page's batch (and the most a demo batch may have).
pub const MAX_ITEMS: usize = 500;
/// The items of one batch in play at once: its share of the tenant's
/// running demo tasks (`limits::TENANT_RUNNING`), counted as that many
/// places in the demo's limits.
pub const WORKERS: usize = 16;

/// Item `index` (from 0) of a batch played at `speed`: its scenario and
/// TTL (ms).
fn item(index: usize, speed: f64) -> (&'static str, f64) {
    let scenario = plans::scenario(index);
    let ttl_ms = if scenario == SEED_SCENARIOS[2] {
        EXPIRING_TTL_MS as f64 / speed
    } else {
        3_600_000.0
    };
    (scenario, ttl_ms)
}

/// An item's input: `{"item","scenario","workload"}` (name order, as its
/// tasks have always stored it).
#[derive(Serialize)]
struct ItemInput {
    item: usize,
    scenario: &'static str,
    workload: &'static str,
}

/// How long each of the batch's places is held (real time): the items'
/// plans, in order, shared among [`WORKERS`] places (what a refused
/// start's `Retry-After` is estimated from).
fn place_runs(count: usize, speed: f64) -> Vec<Duration> {
    let mut ends = vec![0u64; WORKERS.min(count).max(1)];
    for index in 0..count {
        if let Some(first_free) = ends.iter_mut().min() {
            *first_free += Workload::Item(index).longest();
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
    // Admitted as WORKERS running tasks, each for as long as its items.
    let slots = Arc::new(state.demo.admit(&tenant, &place_runs(count, speed))?);
    state.demo.fleets.ensure(state, &tenant).await?;
    let lifecycle = LifecycleOptions {
        unknown_grace_ms: Some(fleet::grace_ms(speed)),
        ..Default::default()
    };
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let (scenario, ttl_ms) = item(i, speed);
        let kind = Some("moderation".to_string());
        let field = format!("items[{i}]");
        let view = new_task_view(state, &field, (ttl_ms, 3), lifecycle.clone(), &kind)?;
        let input = to_json(&ItemInput {
            item: i + 1,
            scenario,
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
    // The scripts first: a held claim may take an item the moment it is
    // stored.
    let ids: Vec<String> = tasks.iter().map(|t| t.view.id.clone()).collect();
    for (index, id) in ids.iter().enumerate() {
        let script = Script::new(
            &state.demo.workers,
            (&tenant, id),
            Workload::Item(index),
            speed,
            Arc::clone(&slots),
        );
        state.demo.scripts.insert(id, script);
    }
    let created = state
        .store
        .create_batch(NewBatch {
            id: new_batch_id().map_err(ApiError::internal)?,
            tenant: tenant.clone(),
            tasks,
            idempotency: None,
            open_task_limit: state.quotas.max_open_tasks(&tenant),
            created_at_ms: crate::clock::now_ms(),
        })
        .await
        .inspect_err(|e| count_open_task_refusal(state, e));
    let batch = match created {
        Ok(batch) => batch,
        Err(e) => {
            for id in &ids {
                state.demo.scripts.remove(id);
            }
            return Err(e.into());
        }
    };
    for task in &batch.tasks {
        state
            .hub
            .work
            .offer(&task.tenant, task.kind.as_deref().unwrap_or(""));
    }
    state.demo.made.batch(&batch.id);
    for id in &ids {
        state.demo.made.task(id);
    }
    let scenarios = SEED_SCENARIOS.iter().take(count).copied().collect();
    Ok(Started { batch, scenarios })
}

//! The work queue on SQLite (store/work.rs has the rules): a claim runs
//! in the writer's transaction, so exactly one claim sees each queued
//! task; the queue is the partial index on `tasks.queued_at_ms`.

use std::collections::BTreeMap;

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use super::jobs::write_judged;
use super::read::load_own_task;
use crate::hub::Change;
use crate::store::rows::to_i64;
use crate::store::work::{judge_claim, Budget, Claim, Claimed, QueueDepth, Spending};
use crate::store::StoreError;

/// Claims up to `claim.max` tasks (see [`crate::store::Store::claim`]).
pub(super) fn claim(
    tx: &Connection,
    claim: Claim,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<Claimed, StoreError> {
    if let Some((id, signed)) = &claim.signed {
        let fresh = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO callback_replays (tenant, callback_id, signed_at, body_sha256)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![claim.replay_scope(), id, signed.at, &signed.body_sha256[..]])?;
        if fresh == 0 {
            return Err(StoreError::ClaimReplayed(id.clone()));
        }
    }
    let mut spending = Spending::new(budgets(tx, &claim)?);
    let mut claimed = Claimed {
        retry_at_ms: spending.retry_at_ms(),
        ..Claimed::default()
    };
    loop {
        let open = spending.open_kinds(&claim);
        let wanted = claim.max - claimed.tasks.len() as u64;
        if open.is_empty() || wanted == 0 {
            break;
        }
        let candidates = candidates(tx, &claim, &open, wanted)?;
        for (tenant, id, kind) in &candidates {
            if claimed.tasks.len() as u64 == claim.max {
                break;
            }
            if !spending.may_start(kind) {
                continue;
            }
            let Some(mut record) = load_own_task(tx, tenant, id)? else {
                continue;
            };
            let Some(judged) = judge_claim(&mut record, &claim)? else {
                continue;
            };
            write_judged(tx, &record, &judged, claim.now_ms, changes, outbox)?;
            spending.started(kind);
            claimed.tasks.push(record);
        }
        if !spending.look_again(candidates.len(), wanted) {
            break;
        }
    }
    record_rates(tx, &claim, spending.starts())?;
    Ok(claimed)
}

/// Each limited kind's budget for this claim.
fn budgets(tx: &Connection, claim: &Claim) -> Result<BTreeMap<String, Budget>, StoreError> {
    let mut out = BTreeMap::new();
    for kind in &claim.kinds {
        let Some(limit) = claim.limits.of(kind) else {
            continue;
        };
        let running: i64 = match limit.max_running {
            Some(_) => tx
                .prepare_cached(
                    "SELECT count(*) FROM tasks
                     WHERE coalesce(kind, '') = ?1 AND live = 1 AND lease IS NOT NULL",
                )?
                .query_row([kind], |r| r.get(0))?,
            None => 0,
        };
        let tat = rate_tat(tx, kind)?;
        out.insert(
            kind.clone(),
            limit.budget(running.max(0) as u64, tat, claim.now_ms),
        );
    }
    Ok(out)
}

fn rate_tat(tx: &Connection, kind: &str) -> Result<Option<f64>, StoreError> {
    Ok(tx
        .prepare_cached("SELECT tat_ms FROM work_rates WHERE kind = ?1")?
        .query_row([kind], |r| r.get(0))
        .optional()?)
}

/// Moves each rate-limited kind's bucket by the starts this claim made.
fn record_rates(
    tx: &Connection,
    claim: &Claim,
    started: &BTreeMap<String, u64>,
) -> Result<(), StoreError> {
    for (kind, n) in started {
        let Some(limit) = claim.limits.of(kind) else {
            continue;
        };
        let Some(tat) = limit.tat_after(rate_tat(tx, kind)?, claim.now_ms, *n) else {
            continue;
        };
        tx.prepare_cached(
            "INSERT INTO work_rates (kind, tat_ms) VALUES (?1, ?2)
             ON CONFLICT (kind) DO UPDATE SET tat_ms = excluded.tat_ms",
        )?
        .execute(params![kind, tat])?;
    }
    Ok(())
}

/// Up to `limit` queued tasks of `tenants` with a kind in `kinds`:
/// `(tenant, id, kind)`, each tenant's first before anyone's second, then
/// oldest in the queue first.
fn candidates(
    tx: &Connection,
    claim: &Claim,
    kinds: &[String],
    limit: u64,
) -> Result<Vec<(String, String, String)>, StoreError> {
    let tenants = &claim.tenants;
    let marks = |n: usize, from: usize| {
        (from..from + n)
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    // A worker that names its workflow versions passes over the tasks
    // planned for others (core's `runs_workflow` decides; this keeps them
    // from filling the claim's window).
    let versions = (!claim.workflow_versions.is_empty())
        .then(|| taskwire_wire::to_json(&claim.workflow_versions));
    let workflow = match versions {
        Some(_) => format!(
            " AND coalesce(json_extract(view, '$.workflowVersion') IN
                   (SELECT value FROM json_each(?{})), 1)",
            tenants.len() + kinds.len() + 1
        ),
        None => String::new(),
    };
    // One tenant: straight down the queue index of its kinds. Several:
    // each tenant's first before anyone's second (a window).
    let sql = if tenants.len() == 1 {
        format!(
            "SELECT tenant, id, coalesce(kind, '') FROM tasks
             WHERE queued_at_ms IS NOT NULL AND tenant = ?1 AND coalesce(kind, '') IN ({}){workflow}
             ORDER BY queued_at_ms, id LIMIT {}",
            marks(kinds.len(), 2),
            to_i64(limit),
        )
    } else {
        format!(
            "SELECT tenant, id, kind FROM (
                 SELECT tenant, id, coalesce(kind, '') AS kind, queued_at_ms,
                        row_number() OVER (PARTITION BY tenant ORDER BY queued_at_ms, id) AS turn
                 FROM tasks
                 WHERE queued_at_ms IS NOT NULL AND tenant IN ({})
                       AND coalesce(kind, '') IN ({}){workflow})
             ORDER BY turn, queued_at_ms, id LIMIT {}",
            marks(tenants.len(), 1),
            marks(kinds.len(), tenants.len() + 1),
            to_i64(limit),
        )
    };
    let values = tenants
        .iter()
        .map(String::as_str)
        .chain(kinds.iter().map(String::as_str))
        .chain(versions.as_deref());
    let rows = tx
        .prepare(&sql)?
        .query_map(params_from_iter(values), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The queue per kind (`/metrics`).
pub(super) fn queue_depth(conn: &Connection, now_ms: f64) -> Result<Vec<QueueDepth>, StoreError> {
    let rows = conn
        .prepare_cached(
            "SELECT coalesce(kind, ''), count(*), min(queued_at_ms) FROM tasks
             WHERE queued_at_ms IS NOT NULL GROUP BY coalesce(kind, '')",
        )?
        .query_map([], |r| {
            let oldest: f64 = r.get(2)?;
            Ok(QueueDepth {
                kind: r.get(0)?,
                queued: r.get::<_, i64>(1)?.max(0) as u64,
                oldest_age_secs: ((now_ms - oldest) / 1000.0).max(0.0),
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

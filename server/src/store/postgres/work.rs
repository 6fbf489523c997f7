//! The work queue on PostgreSQL (store/work.rs has the rules). A claim is
//! a job of the writer's transaction like a callback: the candidates are
//! read in queue order, then each row is locked `FOR UPDATE SKIP LOCKED`
//! and taken only if still queued, so two instances never take one task;
//! a row another instance holds is skipped, not waited for. A kind with
//! limits is serialized across instances by an advisory lock (taken
//! sorted, after every other lock of the batch: claims sort last in the
//! lock order) and its rate bucket's row.

use std::collections::BTreeMap;

use deadpool_postgres::Transaction;

use super::batch::Batch;
use super::read::record;
use super::writer::{lock_id, Sql};
use crate::store::rows::to_i64;
use crate::store::work::{judge_claim, Budget, Claim, Claimed, QueueDepth, Spending};
use crate::store::StoreError;

/// Claims up to `claim.max` tasks (see [`crate::store::Store::claim`]).
pub(super) async fn claim(tx: &Transaction<'_>, b: &mut Batch, claim: &Claim) -> Sql<Claimed> {
    if let Some((id, signed)) = &claim.signed {
        let stmt = tx
            .prepare_cached(
                "INSERT INTO callback_replays (tenant, callback_id, signed_at, body_sha256)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .await?;
        let digest: &[u8] = &signed.body_sha256;
        let scope = claim.replay_scope();
        if tx
            .execute(&stmt, &[&scope, id, &signed.at, &digest])
            .await?
            == 0
        {
            return Ok(Err(StoreError::ClaimReplayed(id.clone())));
        }
    }
    let mut spending = Spending::new(budgets(tx, claim).await?);
    let mut claimed = Claimed {
        retry_at_ms: spending.retry_at_ms(),
        ..Claimed::default()
    };
    loop {
        let open = spending.open_kinds(claim);
        let wanted = claim.max - claimed.tasks.len() as u64;
        if open.is_empty() || wanted == 0 {
            break;
        }
        // Rows this transaction already holds (an earlier job of the
        // batch may have claimed or changed them, unflushed) are judged
        // from its copy, never offered again as candidates.
        let held: Vec<String> = b.tasks.keys().cloned().collect();
        let candidates = candidates(tx, claim, &open, &held, wanted).await?;
        for (id, kind) in &candidates {
            if claimed.tasks.len() as u64 == claim.max {
                break;
            }
            if !spending.may_start(kind) {
                continue;
            }
            let Some(mut rec) = lock_queued(tx, b, id).await? else {
                continue;
            };
            let judged = match judge_claim(&mut rec, claim) {
                Ok(Some(judged)) => judged,
                Ok(None) => continue,
                Err(e) => return Ok(Err(e)),
            };
            b.tasks.insert(id.clone(), rec.clone());
            b.judged(&rec, &judged, claim.now_ms);
            spending.started(kind);
            claimed.tasks.push(rec);
        }
        if !spending.look_again(candidates.len(), wanted) {
            break;
        }
    }
    record_rates(tx, claim, spending.starts()).await?;
    Ok(Ok(claimed))
}

/// The row of task `id`, locked, if it is still queued and no other
/// transaction holds it (this one's own copy when it holds it already).
async fn lock_queued(
    tx: &Transaction<'_>,
    b: &Batch,
    id: &str,
) -> Result<Option<crate::store::TaskRecord>, tokio_postgres::Error> {
    if let Some(rec) = b.tasks.get(id) {
        return Ok(Some(rec.clone()));
    }
    let stmt = tx
        .prepare_cached(
            "SELECT tenant, view, kind, input, lease, batch_id FROM tasks
             WHERE id = $1 AND queued_at_ms IS NOT NULL FOR UPDATE SKIP LOCKED",
        )
        .await?;
    let row = tx.query_opt(&stmt, &[&id]).await?;
    // A row that does not parse is the sweeper's to quarantine: skipped.
    Ok(row.and_then(|r| record(&r, 0).ok()))
}

/// Each limited kind's budget, under its advisory lock (sorted).
async fn budgets(
    tx: &Transaction<'_>,
    claim: &Claim,
) -> Result<BTreeMap<String, Budget>, tokio_postgres::Error> {
    let mut out = BTreeMap::new();
    let mut limited: Vec<&String> = claim
        .kinds
        .iter()
        .filter(|k| claim.limits.of(k).is_some())
        .collect();
    limited.sort_by_key(|k| lock_id(&["kind", k]));
    for kind in limited {
        let Some(limit) = claim.limits.of(kind) else {
            continue;
        };
        let lock = tx
            .prepare_cached("SELECT pg_advisory_xact_lock($1)")
            .await?;
        tx.execute(&lock, &[&lock_id(&["kind", kind])]).await?;
        let count = tx
            .prepare_cached(
                "SELECT count(*) FROM tasks
                 WHERE coalesce(kind, '') = $1 AND live AND lease IS NOT NULL",
            )
            .await?;
        let running: i64 = match limit.max_running {
            Some(_) => tx.query_one(&count, &[kind]).await?.get(0),
            None => 0,
        };
        let tat = rate_tat(tx, kind).await?;
        out.insert(
            kind.clone(),
            limit.budget(running.max(0) as u64, tat, claim.now_ms),
        );
    }
    Ok(out)
}

async fn rate_tat(tx: &Transaction<'_>, kind: &str) -> Result<Option<f64>, tokio_postgres::Error> {
    let stmt = tx
        .prepare_cached("SELECT tat_ms FROM work_rates WHERE kind = $1")
        .await?;
    Ok(tx.query_opt(&stmt, &[&kind]).await?.map(|r| r.get(0)))
}

async fn record_rates(
    tx: &Transaction<'_>,
    claim: &Claim,
    started: &BTreeMap<String, u64>,
) -> Result<(), tokio_postgres::Error> {
    for (kind, n) in started {
        let Some(limit) = claim.limits.of(kind) else {
            continue;
        };
        let Some(tat) = limit.tat_after(rate_tat(tx, kind).await?, claim.now_ms, *n) else {
            continue;
        };
        let stmt = tx
            .prepare_cached(
                "INSERT INTO work_rates (kind, tat_ms) VALUES ($1, $2)
                 ON CONFLICT (kind) DO UPDATE SET tat_ms = excluded.tat_ms",
            )
            .await?;
        tx.execute(&stmt, &[kind, &tat]).await?;
    }
    Ok(())
}

/// Up to `limit` candidates `(id, kind)`, oldest in the queue first. For
/// one tenant the rows are locked here (`FOR UPDATE SKIP LOCKED`: what
/// another claim holds is passed over, so concurrent claims take
/// different tasks instead of all skipping the same ones). For several,
/// each tenant's first comes before anyone's second (a window, which
/// cannot lock): [`lock_queued`] locks each one then.
async fn candidates(
    tx: &Transaction<'_>,
    claim: &Claim,
    kinds: &[String],
    held: &[String],
    limit: u64,
) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let tenants = &claim.tenants;
    // A worker that names its workflow versions passes over the tasks
    // planned for others (core's `runs_workflow` decides; this keeps them
    // from filling the claim's window). `$5` is empty for any version.
    let sql = if tenants.len() == 1 {
        "SELECT id, coalesce(kind, '') FROM tasks
         WHERE queued_at_ms IS NOT NULL AND tenant = ANY($1) AND coalesce(kind, '') = ANY($2)
               AND NOT (id = ANY($3))
               AND (cardinality($5::text[]) = 0
                    OR coalesce((view::jsonb ->> 'workflowVersion') = ANY($5), true))
         ORDER BY queued_at_ms, id LIMIT $4 FOR UPDATE SKIP LOCKED"
    } else {
        "SELECT id, kind FROM (
             SELECT id, coalesce(kind, '') AS kind, queued_at_ms,
                    row_number() OVER (PARTITION BY tenant ORDER BY queued_at_ms, id) AS turn
             FROM tasks
             WHERE queued_at_ms IS NOT NULL AND tenant = ANY($1)
                   AND coalesce(kind, '') = ANY($2) AND NOT (id = ANY($3))
                   AND (cardinality($5::text[]) = 0
                        OR coalesce((view::jsonb ->> 'workflowVersion') = ANY($5), true))) q
         ORDER BY turn, queued_at_ms, id LIMIT $4"
    };
    let stmt = tx.prepare_cached(sql).await?;
    let rows = tx
        .query(
            &stmt,
            &[
                tenants,
                &kinds,
                &held,
                &to_i64(limit),
                &claim.workflow_versions,
            ],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The queue per kind (`/metrics`).
pub(super) async fn queue_depth(
    client: &deadpool_postgres::Object,
    now_ms: f64,
) -> Result<Vec<QueueDepth>, StoreError> {
    let rows = client
        .query(
            "SELECT coalesce(kind, ''), count(*), min(queued_at_ms) FROM tasks
             WHERE queued_at_ms IS NOT NULL GROUP BY coalesce(kind, '')",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let oldest: f64 = r.get(2);
            QueueDepth {
                kind: r.get(0),
                queued: r.get::<_, i64>(1).max(0) as u64,
                oldest_age_secs: ((now_ms - oldest) / 1000.0).max(0.0),
            }
        })
        .collect())
}

//! The PostgreSQL store's sweeps, one row at a time (see
//! [`crate::store::quarantine`]), safe with several instances sweeping at
//! once: due rows are taken `FOR UPDATE SKIP LOCKED`, so each row is
//! handled by one instance, and a quarantine row is inserted `ON CONFLICT
//! DO NOTHING`, so each bad row is reported by the one that set it aside.
//!
//! **Task sweeps** parse and check every due row first; the good ones are
//! written together in set-based statements ([`Batch::flush`]), as the
//! writer does. Only when that write breaks a constraint (stored rows that
//! disagree, e.g. a history entry already at the version the view expects
//! to write) is the sweep run again row by row, each in a savepoint, so
//! that the offending row is found and quarantined.

use deadpool_postgres::{GenericClient, Transaction};
use taskwire_core::Notification;
use tokio_postgres::Row;

use super::batch::{hub_publish, Batch};
use super::PostgresStore;
use crate::store::lifecycle::Judged;
use crate::store::quarantine::not_quarantined;
use crate::store::rows::{state_column, to_i64};
use crate::store::sweep::{step_due_row, DueRow, TaskSweep};
use crate::store::{
    OutboxEntry, PendingWebhooks, Quarantined, StoreError, Swept, TaskRecord, WebhookClaim,
};

/// A due row that parsed and that core's step moved.
struct Moved {
    record: TaskRecord,
    judged: Judged,
}

/// Runs `sweep` over up to `limit` due rows that no other transaction
/// holds; commits, then publishes the changes.
pub(super) async fn sweep_tasks(
    store: &PostgresStore,
    sweep: &TaskSweep,
    now_ms: f64,
    limit: u32,
) -> Result<Swept, StoreError> {
    let swept = match sweep_once(store, sweep, now_ms, limit, false).await {
        Err(StoreError::Corrupt(_)) => sweep_once(store, sweep, now_ms, limit, true).await,
        other => other,
    };
    // An empty sweep commits nothing: it says nothing about an outage.
    match &swept {
        Ok(s) if s.expired > 0 || !s.quarantined.is_empty() => store.hub.outage.wrote(),
        Ok(_) => {}
        Err(e) => store.hub.outage.refused(1, e),
    }
    swept
}

async fn sweep_once(
    store: &PostgresStore,
    sweep: &TaskSweep,
    now_ms: f64,
    limit: u32,
    row_by_row: bool,
) -> Result<Swept, StoreError> {
    let mut client = store.conn().await?;
    let mut tx = client.transaction().await?;
    // Rows another instance's sweeper (or a callback) holds are skipped:
    // they are someone else's, and FOR UPDATE re-checks `live` on the
    // latest version of the rows it does take.
    let sql = format!(
        "SELECT id, tenant, view, lease, batch_id FROM tasks WHERE live AND {due} <= $1 AND {}
         ORDER BY {due} LIMIT $2 FOR UPDATE SKIP LOCKED",
        not_quarantined("tasks", "tasks.id"),
        due = sweep.due_by,
    );
    let stmt = tx.prepare_cached(&sql).await?;
    let rows = tx.query(&stmt, &[&now_ms, &i64::from(limit)]).await?;
    let mut swept = Swept {
        looked_at: rows.len(),
        ..Swept::default()
    };
    let mut bad: Vec<(String, String)> = Vec::new();
    let mut moved = Vec::new();
    for row in &rows {
        let id: String = row.try_get(0)?;
        match due_row(sweep, &id, row, now_ms) {
            Ok(m) => moved.push(m),
            Err(error) => bad.push((id, format!("{} sweep: {error}", sweep.name))),
        }
    }
    let mut batches = Vec::new();
    if row_by_row {
        for m in moved {
            let id = m.record.view.id.clone();
            let sp = tx.savepoint("sweep_row").await?;
            let mut batch = batch_of(vec![m], now_ms);
            match batch
                .flush(&sp, &store.hub.work.instance)
                .await
                .map_err(StoreError::from)
            {
                Ok(()) => {
                    sp.commit().await?;
                    batches.push(batch);
                }
                Err(StoreError::Corrupt(error)) => {
                    sp.rollback().await?;
                    bad.push((id, format!("{} sweep: {error}", sweep.name)));
                }
                Err(e) => return Err(e),
            }
        }
    } else if !moved.is_empty() {
        let mut batch = batch_of(moved, now_ms);
        // A broken constraint comes back as Corrupt: sweep_tasks runs the
        // sweep again row by row.
        batch.flush(&tx, &store.hub.work.instance).await?;
        batches.push(batch);
    }
    swept.expired = batches.iter().map(|b| b.changed.len()).sum();
    swept.quarantined = quarantine(&tx, "tasks", bad, now_ms).await?;
    if swept.expired == 0 && swept.quarantined.is_empty() {
        tx.rollback().await?;
        return Ok(swept);
    }
    commit(tx).await?;
    for batch in &batches {
        hub_publish(&store.hub, batch);
    }
    Ok(swept)
}

async fn commit(tx: Transaction<'_>) -> Result<(), StoreError> {
    Ok(tx.commit().await?)
}

/// Reads one due row and judges it ([`step_due_row`]); the error names
/// the field when the row is bad.
fn due_row(sweep: &TaskSweep, id: &str, row: &Row, now_ms: f64) -> Result<Moved, String> {
    let tenant: String = row.try_get(1).map_err(|e| format!("tasks.tenant: {e}"))?;
    let view: String = row.try_get(2).map_err(|e| format!("tasks.view: {e}"))?;
    let lease: Option<String> = row.try_get(3).map_err(|e| format!("tasks.lease: {e}"))?;
    let batch: Option<String> = row.try_get(4).map_err(|e| format!("tasks.batch_id: {e}"))?;
    let due = DueRow {
        id,
        tenant: &tenant,
        view: &view,
        lease: lease.as_deref(),
    };
    // Only the view, lease and due time are written back: `kind` and
    // `input` stay as stored, unread.
    let (mut record, judged) = step_due_row(sweep, due, now_ms)?;
    // The flush raises the cursor of the batch the task is an item of.
    record.batch = batch;
    Ok(Moved { record, judged })
}

fn batch_of(moved: Vec<Moved>, now_ms: f64) -> Batch {
    let mut batch = Batch::default();
    for Moved { record, judged } in moved {
        batch.tasks.insert(record.view.id.clone(), record.clone());
        // As core's Book::expire_due: the notification is at "now".
        batch.judged(&record, &judged, now_ms);
    }
    batch
}

/// Sets rows aside (`key`, error); returns those this call set aside (a
/// row another instance quarantined first is its to report).
async fn quarantine(
    client: &impl GenericClient,
    table: &'static str,
    rows: Vec<(String, String)>,
    now_ms: f64,
) -> Result<Vec<Quarantined>, StoreError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let stmt = client
        .prepare_cached(
            "INSERT INTO quarantine (source, row_key, error, at_ms)
             SELECT $1, k, e, $4 FROM unnest($2::text[], $3::text[]) AS u(k, e)
             ON CONFLICT DO NOTHING RETURNING row_key",
        )
        .await?;
    let keys: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let errors: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    let inserted = client
        .query(&stmt, &[&table, &keys, &errors, &now_ms])
        .await?;
    let inserted: Vec<String> = inserted
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    Ok(rows
        .into_iter()
        .filter(|(key, _)| inserted.contains(key))
        .map(|(key, error)| Quarantined { table, key, error })
        .collect())
}

/// Claims the due outbox rows of the claim's tenants (a lease on
/// `next_attempt_ms`, so that the instances never post the same row at
/// once); a claimed row that does not parse is quarantined instead.
pub(super) async fn pending_webhooks(
    store: &PostgresStore,
    claim: WebhookClaim,
) -> Result<PendingWebhooks, StoreError> {
    let client = store.conn().await?;
    let sql = format!(
        "UPDATE outbox SET next_attempt_ms = $1 + $3 WHERE seq IN (
             SELECT o.seq FROM outbox o WHERE NOT o.sent AND o.next_attempt_ms <= $1
               AND (o.tenant = ANY($4::text[])) = $5 AND NOT (o.seq = ANY($6::bigint[]))
               AND {}
             ORDER BY o.seq LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING seq, key, task_id, state, at_ms, tenant, attempts",
        not_quarantined("outbox", "o.seq::text")
    );
    let stmt = client.prepare_cached(&sql).await?;
    let (tenants, only) = claim.scope.parts();
    let in_flight: Vec<i64> = claim.in_flight.iter().map(|s| to_i64(*s)).collect();
    let rows = client
        .query(
            &stmt,
            &[
                &claim.now_ms,
                &i64::from(claim.limit),
                &claim.lease_ms,
                &tenants,
                &only,
                &in_flight,
            ],
        )
        .await?;
    let mut out = PendingWebhooks::default();
    let mut bad = Vec::new();
    for row in &rows {
        let seq: i64 = row.try_get(0)?;
        match outbox_row(row) {
            Ok(entry) => out.rows.push(entry),
            Err(e) => bad.push((seq.to_string(), format!("notify: {e}"))),
        }
    }
    out.rows.sort_by_key(|e| e.seq);
    out.quarantined = quarantine(&client, "outbox", bad, claim.now_ms).await?;
    Ok(out)
}

/// Records a webhook attempt: sent, or when to try again.
pub(super) async fn record_attempt(
    store: &PostgresStore,
    seq: u64,
    sent: bool,
    next_attempt_ms: f64,
) -> Result<(), StoreError> {
    let recorded = update_attempt(store, seq, sent, next_attempt_ms).await;
    match &recorded {
        Ok(()) => store.hub.outage.wrote(),
        Err(e) => store.hub.outage.refused(1, e),
    }
    recorded
}

async fn update_attempt(
    store: &PostgresStore,
    seq: u64,
    sent: bool,
    next_attempt_ms: f64,
) -> Result<(), StoreError> {
    let client = store.conn().await?;
    let stmt = client
        .prepare_cached(
            "UPDATE outbox SET sent = $2, attempts = attempts + 1, next_attempt_ms = $3
             WHERE seq = $1",
        )
        .await?;
    client
        .execute(&stmt, &[&to_i64(seq), &sent, &next_attempt_ms])
        .await?;
    Ok(())
}

/// Reads `seq, key, task_id, state, at_ms, tenant, attempts`.
pub(super) fn outbox_row(r: &Row) -> Result<OutboxEntry, StoreError> {
    let seq: i64 = r.try_get(0)?;
    let state: String = r.try_get(3)?;
    let attempts: i32 = r.try_get(6)?;
    let state = state_column(&state, "outbox.state")?;
    Ok(OutboxEntry {
        seq: u64::try_from(seq).map_err(|_| StoreError::Corrupt("outbox.seq < 0".into()))?,
        key: r.try_get(1)?,
        notification: Notification {
            task_id: r.try_get(2)?,
            state,
            at_ms: r.try_get(4)?,
        },
        tenant: r.try_get(5)?,
        attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
    })
}

/// Deletes the used callback requests too old to be accepted again
/// (`callback_replays.rs`). Every instance's sweeper runs it: the same
/// rows, harmlessly.
pub(super) async fn forget_used_callbacks(
    store: &PostgresStore,
    now_ms: f64,
) -> Result<(), StoreError> {
    let before = crate::store::callback_replays::forget_before(now_ms);
    let conn = store.conn().await?;
    let stmt = conn
        .prepare_cached(crate::store::callback_replays::POSTGRES_FORGET)
        .await?;
    conn.execute(&stmt, &[&before]).await?;
    Ok(())
}

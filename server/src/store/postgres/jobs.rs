//! The writer's other jobs, each in the batch's transaction: a create
//! (idempotent under its key), a person's request, a delivery.

use deadpool_postgres::Transaction;
use taskwire_core::{Delivery, Receipt};
use taskwire_wire::from_json;

use super::batch::Batch;
use super::read::{load_own, record};
use super::writer::{lock_id, Sql};
use crate::store::decide::{
    check_key, delivery_input, judge_delivery, receipt_to_store, replayed, KeyCheck,
};
use crate::store::lifecycle::judge_event;
use crate::store::rows::corrupt;
use crate::store::{Acted, Action, CallbackAnswer, Created, NewTask, StoreError, TaskRecord};

/// A create: an idempotent replay is answered first (never refused by a
/// quota), then the tenant's open-task quota is checked, then the rows are
/// gathered for the flush. A refusal gathers nothing.
pub(super) async fn create(tx: &Transaction<'_>, b: &mut Batch, task: &NewTask) -> Sql<Created> {
    if let Some(idem) = &task.idempotency {
        let (key, request) = (&idem.key, &idem.request);
        let ik = (task.tenant.clone(), key.clone());
        let seen = key_row(tx, b, &task.tenant, key).await?;
        match check_key(idem, seen) {
            Err(e) => return Ok(Err(e)),
            Ok(KeyCheck::Replay(task_id)) => {
                let record = match b.tasks.get(&task_id) {
                    Some(r) => Some(r.clone()),
                    None => match load_own(tx, &task.tenant, &task_id).await? {
                        Ok(r) => r,
                        Err(e) => return Ok(Err(e)),
                    },
                };
                return Ok(replayed(&task_id, record));
            }
            Ok(KeyCheck::Create) => {}
        }
        if let Some(max) = task.open_task_limit {
            if let Err(e) = check_open_tasks(tx, b, &task.tenant, max, 1).await? {
                return Ok(Err(e));
            }
        }
        b.idempotency
            .insert(ik, (request.clone(), task.view.id.clone()));
    } else if let Some(max) = task.open_task_limit {
        if let Err(e) = check_open_tasks(tx, b, &task.tenant, max, 1).await? {
            return Ok(Err(e));
        }
    }
    let record = TaskRecord {
        tenant: task.tenant.clone(),
        view: task.view.clone(),
        kind: task.kind.clone(),
        input: task.input.clone(),
        lease: None,
        batch: None,
    };
    b.tasks.insert(task.view.id.clone(), record.clone());
    b.created.push(task.view.id.clone());
    Ok(Ok(Created {
        record,
        created: true,
    }))
}

/// What an idempotency key of `tenant` names: `(request, id)` as this
/// transaction holds it or as committed, read under the key's advisory
/// lock (taken first, so two creates under one key take turns on every
/// instance). The id is a task's, or a batch's.
pub(super) async fn key_row(
    tx: &Transaction<'_>,
    b: &Batch,
    tenant: &str,
    key: &str,
) -> Result<Option<(String, String)>, tokio_postgres::Error> {
    if let Some(v) = b.idempotency.get(&(tenant.to_string(), key.to_string())) {
        return Ok(Some(v.clone()));
    }
    let lock = tx
        .prepare_cached("SELECT pg_advisory_xact_lock($1)")
        .await?;
    let select = tx
        .prepare_cached("SELECT request, task_id FROM idempotency WHERE tenant = $1 AND key = $2")
        .await?;
    let id = lock_id(&["idem", tenant, key]);
    let (_, row) = futures_util::future::try_join(
        tx.execute(&lock, &[&id]),
        tx.query_opt(&select, &[&tenant, &key]),
    )
    .await?;
    match row {
        Some(r) => Ok(Some((r.try_get(0)?, r.try_get(1)?))),
        None => Ok(None),
    }
}

/// The advisory lock of a tenant's open-task count. Every transaction
/// that creates for a tenant with a quota takes it before any other lock
/// ([`super::writer`]'s `run_batch`), so creates of one tenant on every
/// writer and instance take turns counting, and no lock order can cycle.
pub(super) fn open_tasks_lock(tenant: &str) -> i64 {
    lock_id(&["open-tasks", tenant])
}

/// Refuses `n` creates at once (a batch's items, or one task) when they
/// would take `tenant` past `max` open tasks: those
/// committed (counted once per transaction, under [`open_tasks_lock`], so
/// READ COMMITTED sees every create committed before the lock was
/// granted; the partial index `tasks_open` and the `LIMIT` keep it to
/// O(min(open, max))) plus those this transaction created and still open.
/// A task it ended still counts until the commit: at worst a create is
/// refused a transaction early, never let past the quota.
pub(super) async fn check_open_tasks(
    tx: &Transaction<'_>,
    b: &mut Batch,
    tenant: &str,
    max: u64,
    n: u64,
) -> Sql<()> {
    let committed = match b.open_tasks.get(tenant) {
        Some(n) => *n,
        None => {
            let stmt = tx
                .prepare_cached(
                    "SELECT count(*) FROM (SELECT 1 FROM tasks WHERE tenant = $1 AND live
                     LIMIT $2) AS open",
                )
                .await?;
            let limit = i64::try_from(max).unwrap_or(i64::MAX);
            let n: i64 = tx.query_one(&stmt, &[&tenant, &limit]).await?.try_get(0)?;
            let n = u64::try_from(n).unwrap_or(0);
            b.open_tasks.insert(tenant.to_string(), n);
            n
        }
    };
    let created_here = b
        .created
        .iter()
        .filter_map(|id| b.tasks.get(id))
        .filter(|r| r.tenant == tenant && !r.view.state.is_terminal())
        .count() as u64;
    if committed.saturating_add(created_here).saturating_add(n) > max {
        return Ok(Err(StoreError::OpenTaskQuota {
            tenant: tenant.to_string(),
            max,
            wanted: n,
        }));
    }
    Ok(Ok(()))
}

/// A person's request (`cancel`, `decide`) on the tenant's task: the row
/// locked (or already held by this transaction), judged, recorded.
pub(super) async fn act(tx: &Transaction<'_>, b: &mut Batch, action: &Action) -> Sql<Acted> {
    let mut record = match b.tasks.get(&action.task_id) {
        Some(rec) if rec.tenant == action.tenant => rec.clone(),
        Some(_) => return Ok(Err(StoreError::NotFound(action.task_id.clone()))),
        None => {
            let lock = tx
                .prepare_cached(
                    "SELECT tenant, view, kind, input, lease, batch_id FROM tasks
                     WHERE id = $1 AND tenant = $2 FOR UPDATE",
                )
                .await?;
            let Some(row) = tx
                .query_opt(&lock, &[&action.task_id, &action.tenant])
                .await?
            else {
                return Ok(Err(StoreError::NotFound(action.task_id.clone())));
            };
            let rec = match record(&row, 0) {
                Ok(r) => r,
                Err(e) => return Ok(Err(e)),
            };
            b.tasks.insert(action.task_id.clone(), rec.clone());
            rec
        }
    };
    let judged = judge_event(&mut record, &action.event, None);
    b.judged(&record, &judged, action.event.at_ms().get());
    Ok(Ok(Acted {
        answer: CallbackAnswer::new(judged.outcome, false, &record.view, None),
        task: record.view,
    }))
}

pub(super) async fn deliver(
    tx: &Transaction<'_>,
    b: &mut Batch,
    tenant: &str,
    id: &str,
    key: &str,
    now_ms: f64,
) -> Sql<Delivery> {
    let (checked, now) = match delivery_input(key, now_ms) {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    let dk = (tenant.to_string(), key.to_string());
    let existing = match b.deliveries.get(&dk) {
        Some(r) => Some(r.clone()),
        None => {
            let lock = tx
                .prepare_cached("SELECT pg_advisory_xact_lock($1)")
                .await?;
            let select = tx
                .prepare_cached("SELECT receipt FROM deliveries WHERE tenant = $1 AND key = $2")
                .await?;
            let lid = lock_id(&["delivery", tenant, key]);
            let (_, row) = futures_util::future::try_join(
                tx.execute(&lock, &[&lid]),
                tx.query_opt(&select, &[&tenant, &key]),
            )
            .await?;
            match row.map(|r| r.try_get::<_, String>(0)).transpose()? {
                Some(text) => match from_json::<Receipt>(&text, "deliveries.receipt") {
                    Ok(r) => Some(r),
                    Err(e) => return Ok(Err(corrupt(e))),
                },
                None => None,
            }
        }
    };
    // A succeeded task never changes again: no lock needed to read it.
    let task = match b.tasks.get(id) {
        Some(r) => Some(r.clone()).filter(|r| r.tenant == tenant),
        None => match load_own(tx, tenant, id).await? {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        },
    };
    let task = task.map(|r| r.view);
    let delivery = match judge_delivery(existing.as_ref(), id, task.as_ref(), &checked, now) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    if let Some(receipt) = receipt_to_store(&delivery) {
        b.deliveries.insert(dk, receipt.clone());
    }
    Ok(Ok(delivery))
}

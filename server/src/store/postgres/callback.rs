//! An executor's callback in the writer's transaction: the batch's task
//! rows locked and their callback ids (and the signed requests used
//! before, `callback_replays.rs`) read up front ([`prefetch`]), then each
//! callback judged on what this transaction holds.

use deadpool_postgres::Transaction;

use super::batch::Batch;
use super::read::record;
use super::writer::{Job, Op, Sql};
use crate::store::callback_ref::remembered_event;
use crate::store::decide::{judge_callback, CallbackStep};
use crate::store::{callback_ids, Callback, CallbackAnswer, SignedRequest, StoreError};

/// A signed request as `Batch::used` and `Batch::used_rows` hold it:
/// (tenant, callback id, `webhook-timestamp`, SHA-256 of the body).
pub(super) type UsedKey = (String, String, i64, [u8; 32]);

fn used_key(cb: &Callback) -> UsedKey {
    let SignedRequest { at, body_sha256 } = cb.signed;
    (cb.tenant.clone(), cb.callback_id.clone(), at, body_sha256)
}

/// The batch's signed requests remembered as used, read by exact keys.
const USED: &str = "
SELECT r.tenant, r.callback_id, r.signed_at, r.body_sha256
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[])
     AS k(tenant, callback_id, signed_at, body_sha256)
JOIN callback_replays r ON r.tenant = k.tenant AND r.callback_id = k.callback_id
     AND r.signed_at = k.signed_at AND r.body_sha256 = k.body_sha256";

/// Locks the rows of every task the batch's callbacks are about, in id
/// order (one statement), then reads their callback ids (a second
/// statement, pipelined: a fresh READ COMMITTED snapshot taken once the
/// locks are held, so it sees what the previous holders committed), and
/// the signed requests used before, likewise (a request names its task:
/// the row lock serializes every judgement of it, on every instance).
pub(super) async fn prefetch(
    tx: &Transaction<'_>,
    b: &mut Batch,
    jobs: &[Job],
) -> Result<(), tokio_postgres::Error> {
    let mut ids: Vec<&str> = Vec::new();
    let mut keys: (Vec<&str>, Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new(), Vec::new());
    let mut owner_keys: (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let mut used_keys: (Vec<i64>, Vec<&[u8]>) = (Vec::new(), Vec::new());
    for job in jobs {
        if let Op::Callback(cb) = &job.op {
            if !b.tasks.contains_key(&cb.task_id) {
                ids.push(&cb.task_id);
            }
            keys.0.push(&cb.task_id);
            keys.1.push(&cb.callback_id);
            keys.2.push(&cb.tenant);
            owner_keys.0.push(&cb.tenant);
            owner_keys.1.push(&cb.callback_id);
            used_keys.0.push(cb.signed.at);
            used_keys.1.push(&cb.signed.body_sha256);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    let lock = tx
        .prepare_cached(
            "SELECT id, tenant, view, kind, input, lease, batch_id FROM tasks
             WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE",
        )
        .await?;
    // Exact pairs: planned per execution (force_custom_plan), the array's
    // length is known and this is a nested loop over the primary key.
    let seen = tx
        .prepare_cached(
            "SELECT c.task_id, c.callback_id, coalesce(c.event, h.event)
             FROM unnest($1::text[], $2::text[], $3::text[]) AS k(task_id, callback_id, tenant)
             JOIN callbacks c ON c.key IN (taskwire_callback_key(1, k.tenant, k.callback_id),
                                           taskwire_callback_key(2, k.task_id, k.callback_id))
                  AND c.task_id = k.task_id AND c.callback_id = k.callback_id
             LEFT JOIN history h ON h.task_id = c.task_id AND h.version = c.version",
        )
        .await?;
    let owners = tx.prepare_cached(callback_ids::POSTGRES_OWNERS).await?;
    let used = tx.prepare_cached(USED).await?;
    let (rows, seen_rows, owner_rows, used_rows) = futures_util::future::try_join4(
        tx.query(&lock, &[&ids]),
        tx.query(&seen, &[&keys.0, &keys.1, &keys.2]),
        tx.query(&owners, &[&owner_keys.0, &owner_keys.1]),
        tx.query(
            &used,
            &[&owner_keys.0, &owner_keys.1, &used_keys.0, &used_keys.1],
        ),
    )
    .await?;
    for row in &used_rows {
        let digest: Vec<u8> = row.try_get(3)?;
        // Rows are matched by exact key: a digest is always 32 bytes.
        if let Ok(digest) = <[u8; 32]>::try_from(digest) {
            b.used
                .insert((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?, digest));
        }
    }
    for row in &owner_rows {
        b.claimed.insert((row.try_get(0)?, row.try_get(1)?));
    }
    for row in &rows {
        let id: String = row.try_get(0)?;
        match record(row, 1) {
            Ok(rec) => {
                b.tasks.insert(id, rec);
            }
            Err(e) => {
                b.broken.insert(id, e);
            }
        }
    }
    b.prefetched.extend(ids.iter().map(|id| id.to_string()));
    for row in &seen_rows {
        let task: String = row.try_get(0)?;
        let callback: String = row.try_get(1)?;
        let text: Option<String> = row.try_get(2)?;
        match remembered_event(text, &task, &callback) {
            Ok(event) => {
                b.callbacks.insert((task, callback), event);
            }
            Err(e) => {
                b.broken.insert(task, e);
            }
        }
    }
    Ok(())
}

/// The event a remembered callback id first carried (see callback_ref.rs).
/// Found by either key of the callback (callback_ids.rs).
const SEEN_CALLBACK: &str = "SELECT coalesce(c.event, h.event) FROM callbacks c
     LEFT JOIN history h ON h.task_id = c.task_id AND h.version = c.version
     WHERE c.key IN (taskwire_callback_key(1, $3, $2), taskwire_callback_key(2, $1, $2))
       AND c.task_id = $1 AND c.callback_id = $2";

pub(super) async fn callback(
    tx: &Transaction<'_>,
    b: &mut Batch,
    cb: &Callback,
) -> Sql<CallbackAnswer> {
    let key = (cb.task_id.clone(), cb.callback_id.clone());
    if let Some(e) = b.broken.get(&cb.task_id) {
        return Ok(Err(e.clone()));
    }
    if b.tasks
        .get(&cb.task_id)
        .is_some_and(|r| r.tenant != cb.tenant)
    {
        return Ok(Err(StoreError::NotFound(cb.task_id.clone())));
    }
    let prefetched = b.prefetched.contains(&cb.task_id);
    let (record, seen) = match b.tasks.get(&cb.task_id) {
        // Already locked (or created) by this transaction.
        Some(rec) => {
            let rec = rec.clone();
            let seen = match b.callbacks.get(&key) {
                Some(event) => Some(event.clone()),
                // Prefetched: its callback ids were read with it.
                None if prefetched => None,
                None => {
                    let stmt = tx.prepare_cached(SEEN_CALLBACK).await?;
                    let row = tx
                        .query_opt(&stmt, &[&cb.task_id, &cb.callback_id, &cb.tenant])
                        .await?;
                    match row.map(|r| r.try_get::<_, Option<String>>(0)).transpose()? {
                        Some(text) => match remembered_event(text, &cb.task_id, &cb.callback_id) {
                            Ok(e) => Some(e),
                            Err(e) => return Ok(Err(e)),
                        },
                        None => None,
                    }
                }
            };
            (rec, seen)
        }
        None if prefetched => return Ok(Err(StoreError::NotFound(cb.task_id.clone()))),
        None => {
            // The row lock serializes every writer of this task, on every
            // instance: whoever comes second reads the first one's commit.
            // The callback id is read by a second statement, pipelined
            // after the lock: under READ COMMITTED it takes a fresh
            // snapshot once the lock is held (a join inside the locking
            // statement would see the callbacks table as it was before
            // the wait).
            let lock = tx
                .prepare_cached(
                    "SELECT tenant, view, kind, input, lease, batch_id FROM tasks WHERE id = $1 FOR UPDATE",
                )
                .await?;
            let seen_stmt = tx.prepare_cached(SEEN_CALLBACK).await?;
            let (row, seen_row) = futures_util::future::try_join(
                tx.query_opt(&lock, &[&cb.task_id]),
                tx.query_opt(&seen_stmt, &[&cb.task_id, &cb.callback_id, &cb.tenant]),
            )
            .await?;
            let Some(row) = row else {
                return Ok(Err(StoreError::NotFound(cb.task_id.clone())));
            };
            let rec = match record(&row, 0) {
                Ok(r) if r.tenant == cb.tenant => r,
                Ok(_) => return Ok(Err(StoreError::NotFound(cb.task_id.clone()))),
                Err(e) => return Ok(Err(e)),
            };
            let seen = match seen_row
                .map(|r| r.try_get::<_, Option<String>>(0))
                .transpose()?
            {
                Some(text) => match remembered_event(text, &cb.task_id, &cb.callback_id) {
                    Ok(e) => Some(e),
                    Err(e) => return Ok(Err(e)),
                },
                None => None,
            };
            b.tasks.insert(cb.task_id.clone(), rec.clone());
            (rec, seen)
        }
    };
    // Every callback of the batch had its (tenant, id) prefetched, and
    // ids remembered since are added below. A row another transaction
    // commits meanwhile makes the INSERT fail: the batch runs again.
    let owner_key = (cb.tenant.clone(), cb.callback_id.clone());
    let mut record = record;
    // Every callback's signed request was prefetched too, and those
    // remembered since are added below.
    let used_key = used_key(cb);
    let used = || Ok(b.used.contains(&used_key));
    let owned_elsewhere = || Ok(b.claimed.contains(&owner_key));
    let step = match judge_callback(&mut record, cb, seen.as_ref(), used, owned_elsewhere) {
        Ok(CallbackStep::Answered(answer)) => return Ok(Ok(answer)),
        Ok(CallbackStep::Judged(step)) => step,
        Err(e) => return Ok(Err(e)),
    };
    if let Some(row) = step.remember {
        b.callbacks.insert(key, cb.event.clone());
        b.claimed.insert(owner_key);
        b.callback_rows.push((
            cb.task_id.clone(),
            cb.callback_id.clone(),
            row,
            cb.tenant.clone(),
        ));
    }
    if step.remember_request && b.used.insert(used_key.clone()) {
        b.used_rows.push(used_key);
    }
    b.judged(&record, &step.judged, cb.event.at_ms().get());
    Ok(Ok(step.answer))
}

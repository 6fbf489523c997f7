//! The writer's jobs on one task: create, an executor's callback, a
//! person's request, and the one function that writes what core judged
//! ([`write_judged`]). Each runs inside the writer's transaction, in a
//! savepoint of its own.

use rusqlite::{params, Connection, OptionalExtension};
use taskwire_core::{notification_key, Delivery, Receipt};
use taskwire_wire::{from_json, to_json};

use super::read::{check_open_tasks, load_own_task, load_task, replay};
use crate::hub::{BatchMark, Change};
use crate::store::callback_ref::remembered_event;
use crate::store::decide::{
    delivery_input, judge_callback, judge_delivery, receipt_to_store, CallbackStep,
};
use crate::store::lifecycle::{due_column, judge_event, lease_column, Judged};
use crate::store::rows::{corrupt, to_i64};
use crate::store::{
    callback_ids, Acted, Action, Callback, CallbackAnswer, Created, NewTask, RawJson, StoreError,
    TaskRecord,
};

/// A create: an idempotent replay is answered first (never refused by a
/// quota), then the tenant's open-task quota is checked, then the rows go
/// in. A refusal writes nothing.
pub(super) fn create(tx: &Connection, task: NewTask) -> Result<Created, StoreError> {
    if let Some(idem) = &task.idempotency {
        if let Some(replay) = replay(tx, &task.tenant, idem)? {
            return Ok(replay);
        }
    }
    if let Some(max) = task.open_task_limit {
        check_open_tasks(tx, &task.tenant, max)?;
    }
    if let Some(idem) = &task.idempotency {
        tx.prepare_cached(
            "INSERT INTO idempotency (tenant, key, request, task_id) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![task.tenant, idem.key, idem.request, task.view.id])?;
    }
    let record = TaskRecord {
        tenant: task.tenant,
        view: task.view,
        kind: task.kind,
        input: task.input,
        lease: None,
        batch: None,
    };
    insert_task(tx, &record, None)?;
    Ok(Created {
        record,
        created: true,
    })
}

/// Inserts a new task's row; an item of a batch also gets the batch, its
/// place in it and the batch's first cursor (1).
pub(super) fn insert_task(
    tx: &Connection,
    record: &TaskRecord,
    item: Option<(&str, usize)>,
) -> Result<(), StoreError> {
    let input = record.input.as_ref().map(RawJson::as_str);
    let (batch_id, batch_index, batch_seq) = match item {
        Some((id, index)) => (Some(id), Some(to_i64(index as u64)), Some(1i64)),
        None => (None, None, None),
    };
    tx.prepare_cached(
        "INSERT INTO tasks (id, tenant, view, version, live, expires_at_ms, kind, input, due_at_ms,
                            batch_id, batch_index, batch_seq, queued_at_ms)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11, unixepoch('subsec') * 1000.0)",
    )?
    .execute(params![
        record.view.id,
        record.tenant,
        to_json(&record.view),
        to_i64(record.view.version),
        record.view.expires_at_ms,
        record.kind,
        input,
        due_column(record),
        batch_id,
        batch_index,
        batch_seq
    ])?;
    Ok(())
}

/// An executor's callback: the facts (the task, its callback id, the
/// signed request used before, the id's owner) read in the writer's
/// transaction, judged by `judge_callback`, and what it says written.
pub(super) fn callback(
    tx: &Connection,
    cb: Callback,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<CallbackAnswer, StoreError> {
    let mut record = load_task(tx, &cb.task_id)?
        .filter(|r| r.tenant == cb.tenant)
        .ok_or_else(|| StoreError::NotFound(cb.task_id.clone()))?;
    let key = callback_ids::tenant_key(&cb.tenant, &cb.callback_id);
    let legacy = callback_ids::task_key(&cb.task_id, &cb.callback_id);
    let seen: Option<Option<String>> = tx
        .prepare_cached(callback_ids::SQLITE_SEEN)?
        .query_row(
            params![&key[..], &legacy[..], cb.task_id, cb.callback_id],
            |r| r.get(0),
        )
        .optional()?;
    let seen = seen
        .map(|text| remembered_event(text, &cb.task_id, &cb.callback_id))
        .transpose()?;
    let signed = (
        &cb.tenant,
        &cb.callback_id,
        cb.signed.at,
        &cb.signed.body_sha256[..],
    );
    let used = || {
        Ok(tx
            .prepare_cached(
                "SELECT 1 FROM callback_replays
                 WHERE tenant = ?1 AND callback_id = ?2 AND signed_at = ?3 AND body_sha256 = ?4",
            )?
            .query_row(params![signed.0, signed.1, signed.2, signed.3], |_| Ok(()))
            .optional()?
            .is_some())
    };
    let owned_elsewhere = || callback_ids::sqlite_owned(tx, &key);
    let step = match judge_callback(&mut record, &cb, seen.as_ref(), used, owned_elsewhere)? {
        CallbackStep::Answered(answer) => return Ok(answer),
        CallbackStep::Judged(step) => step,
    };
    if step.remember_request {
        tx.prepare_cached(
            "INSERT OR IGNORE INTO callback_replays (tenant, callback_id, signed_at, body_sha256)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![signed.0, signed.1, signed.2, signed.3])?;
    }
    if let Some(row) = step.remember {
        tx.prepare_cached(callback_ids::SQLITE_INSERT)?
            .execute(params![
                &key[..],
                cb.task_id,
                cb.callback_id,
                row.version,
                row.event,
                cb.tenant
            ])?;
    }
    let at_ms = cb.event.at_ms().get();
    write_judged(tx, &record, &step.judged, at_ms, changes, outbox)?;
    Ok(step.answer)
}

/// A person's request (`cancel`, `decide`) on the tenant's task. No
/// callback id: core judges a repeat as a duplicate by itself.
pub(super) fn act(
    tx: &Connection,
    action: Action,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<Acted, StoreError> {
    let mut record = load_own_task(tx, &action.tenant, &action.task_id)?
        .ok_or_else(|| StoreError::NotFound(action.task_id.clone()))?;
    let judged = judge_event(&mut record, &action.event, None);
    let at_ms = action.event.at_ms().get();
    write_judged(tx, &record, &judged, at_ms, changes, outbox)?;
    Ok(Acted {
        answer: CallbackAnswer::new(judged.outcome, false, &record.view, None),
        task: record.view,
    })
}

/// Writes what core judged for one task: the row (view, version, live,
/// lease, due time) when anything moved; each history entry; for a
/// terminal change its outbox row at `at_ms` (the UNIQUE key makes a
/// second one impossible). The changes go to the hub after the commit.
pub(super) fn write_judged(
    tx: &Connection,
    record: &TaskRecord,
    judged: &Judged,
    at_ms: f64,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<(), StoreError> {
    if !judged.write {
        return Ok(());
    }
    let view = &record.view;
    // Only a change a client can see moves the batch cursor.
    let batch = if judged.appended.is_empty() {
        None
    } else {
        raise_batch_cursor(tx, &view.id)?
    };
    let batch_seq = batch.as_ref().map(|b| to_i64(b.seq));
    tx.prepare_cached(
        "UPDATE tasks SET view = ?2, version = ?3, live = ?4, lease = ?5, due_at_ms = ?6,
                          batch_seq = coalesce(?7, batch_seq),
                          queued_at_ms = CASE WHEN ?8 THEN coalesce(queued_at_ms,
                                                                    unixepoch('subsec') * 1000.0) END
         WHERE id = ?1",
    )?
    .execute(params![
        view.id,
        to_json(view),
        to_i64(view.version),
        !view.state.is_terminal(),
        lease_column(record),
        due_column(record),
        batch_seq,
        view.state == taskwire_core::State::Queued
    ])?;
    for appended in &judged.appended {
        let entry = &appended.entry;
        tx.prepare_cached(
            "INSERT INTO history (task_id, version, event, batch_seq) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![
            view.id,
            to_i64(entry.version),
            to_json(&entry.event),
            batch_seq
        ])?;
        if appended.notify {
            let after = &appended.view;
            tx.prepare_cached(
                "INSERT INTO outbox (tenant, key, task_id, state, at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                record.tenant,
                notification_key(&after.id, after.state, after.version),
                after.id,
                after.state.as_str(),
                appended.notify_at.unwrap_or(at_ms)
            ])?;
            *outbox = true;
        }
        changes.push(Change {
            view: appended.view.clone(),
            entry: entry.clone(),
            batch: batch.clone(),
        });
    }
    Ok(())
}

/// Raises the cursor of the batch task `id` is an item of, in this
/// write's transaction; `None` for a task in no batch (one primary-key
/// lookup that matches nothing).
fn raise_batch_cursor(tx: &Connection, id: &str) -> Result<Option<BatchMark>, StoreError> {
    let raised: Option<(String, i64)> = tx
        .prepare_cached(
            "UPDATE batches SET seq = seq + 1
             WHERE id = (SELECT batch_id FROM tasks WHERE id = ?1)
             RETURNING id, seq",
        )?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(raised.map(|(id, seq)| BatchMark {
        id,
        seq: u64::try_from(seq).unwrap_or(0),
    }))
}

pub(super) fn deliver(
    tx: &Connection,
    tenant: &str,
    id: &str,
    key: &str,
    now_ms: f64,
) -> Result<Delivery, StoreError> {
    let (key, now) = delivery_input(key, now_ms)?;
    let existing: Option<String> = tx
        .prepare_cached("SELECT receipt FROM deliveries WHERE tenant = ?1 AND key = ?2")?
        .query_row(params![tenant, key.as_str()], |r| r.get(0))
        .optional()?;
    let existing = existing
        .map(|text| from_json::<Receipt>(&text, "deliveries.receipt"))
        .transpose()
        .map_err(corrupt)?;
    let task = load_own_task(tx, tenant, id)?.map(|r| r.view);
    let delivery = judge_delivery(existing.as_ref(), id, task.as_ref(), &key, now)?;
    if let Some(receipt) = receipt_to_store(&delivery) {
        tx.prepare_cached("INSERT INTO deliveries (tenant, key, receipt) VALUES (?1, ?2, ?3)")?
            .execute(params![tenant, key.as_str(), to_json(receipt)])?;
    }
    Ok(delivery)
}

//! The writer's jobs on one task: create, an executor's callback, a
//! person's request, and the one function that writes what core judged
//! ([`write_judged`]). Each runs inside the writer's transaction, in a
//! savepoint of its own.

use rusqlite::{params, Connection, OptionalExtension};
use taskwire_core::wire::{from_json, to_json};
use taskwire_core::{
    check_callback, check_delivery_input, decide_delivery, notification_key, Delivery,
    DeliveryReason, Reason, Receipt,
};

use super::read::{load_own_task, load_task};
use super::{corrupt, to_i64};
use crate::store::callback_ref::{remembered_event, CallbackRef};
use crate::store::lifecycle::{due_column, judge_event, lease_column, Judged};
use crate::store::{
    callback_ids, Acted, Action, Callback, CallbackAnswer, Change, Created, NewTask, RawJson,
    StoreError, TaskRecord,
};

pub(super) fn create(tx: &Connection, task: NewTask) -> Result<Created, StoreError> {
    if let Some(idem) = &task.idempotency {
        let seen: Option<(String, String)> = tx
            .prepare_cached(
                "SELECT request, task_id FROM idempotency WHERE tenant = ?1 AND key = ?2",
            )?
            .query_row(params![task.tenant, idem.key], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        if let Some((seen_request, task_id)) = seen {
            if !idem.same_as(&seen_request) {
                return Err(StoreError::IdempotencyKeyReused(idem.key.clone()));
            }
            let record = load_own_task(tx, &task.tenant, &task_id)?.ok_or_else(|| {
                StoreError::Internal(format!("idempotency row points at missing task {task_id}"))
            })?;
            return Ok(Created {
                record,
                created: false,
            });
        }
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
    };
    let input = record.input.as_ref().map(RawJson::as_str);
    tx.prepare_cached(
        "INSERT INTO tasks (id, tenant, view, version, live, expires_at_ms, kind, input, due_at_ms)
         VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        record.view.id,
        record.tenant,
        to_json(&record.view),
        to_i64(record.view.version),
        record.view.expires_at_ms,
        record.kind,
        input,
        due_column(&record)
    ])?;
    Ok(Created {
        record,
        created: true,
    })
}

pub(super) fn callback(
    tx: &Connection,
    cb: Callback,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<CallbackAnswer, StoreError> {
    let mut record = load_task(tx, &cb.task_id)?
        .filter(|r| r.tenant == cb.tenant)
        .ok_or_else(|| StoreError::NotFound(cb.task_id.clone()))?;
    let seen: Option<Option<String>> = tx
        .prepare_cached(
            "SELECT coalesce(c.event, h.event) FROM callbacks c
             LEFT JOIN history h ON h.task_id = c.task_id AND h.version = c.version
             WHERE c.task_id = ?1 AND c.callback_id = ?2",
        )?
        .query_row(params![cb.task_id, cb.callback_id], |r| r.get(0))
        .optional()?;
    let seen = seen
        .map(|text| remembered_event(text, &cb.task_id, &cb.callback_id))
        .transpose()?;
    if let Some(outcome) = check_callback(seen.as_ref(), &cb.event) {
        let duplicate_callback = outcome.reason == Reason::DuplicateCallback;
        return Ok(CallbackAnswer::new(
            outcome,
            duplicate_callback,
            &record.view,
        ));
    }
    if callback_ids::sqlite_owner(tx, &cb.tenant, &cb.callback_id)?.is_some() {
        // Not this task's (that would have been `seen`): another one's.
        return Err(StoreError::CallbackIdReused(cb.callback_id));
    }
    let judged = judge_event(&mut record, &cb.event);
    if let Some(first) = judged.appended.first() {
        // Only ids whose event changed the task are remembered (core fix 1).
        let row = CallbackRef::of(&cb.event, &first.entry);
        tx.prepare_cached(
            "INSERT INTO callbacks (task_id, callback_id, version, event, tenant)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            cb.task_id,
            cb.callback_id,
            row.version,
            row.event,
            cb.tenant
        ])?;
    }
    let at_ms = cb.event.at_ms().get();
    write_judged(tx, &record, &judged, at_ms, changes, outbox)?;
    Ok(CallbackAnswer::new(judged.outcome, false, &record.view))
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
    let judged = judge_event(&mut record, &action.event);
    let at_ms = action.event.at_ms().get();
    write_judged(tx, &record, &judged, at_ms, changes, outbox)?;
    Ok(Acted {
        answer: CallbackAnswer::new(judged.outcome, false, &record.view),
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
    tx.prepare_cached(
        "UPDATE tasks SET view = ?2, version = ?3, live = ?4, lease = ?5, due_at_ms = ?6
         WHERE id = ?1",
    )?
    .execute(params![
        view.id,
        to_json(view),
        to_i64(view.version),
        !view.state.is_terminal(),
        lease_column(record),
        due_column(record)
    ])?;
    for appended in &judged.appended {
        let entry = &appended.entry;
        tx.prepare_cached("INSERT INTO history (task_id, version, event) VALUES (?1, ?2, ?3)")?
            .execute(params![
                view.id,
                to_i64(entry.version),
                to_json(&entry.event)
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
                at_ms
            ])?;
            *outbox = true;
        }
        changes.push(Change {
            view: appended.view.clone(),
            entry: entry.clone(),
        });
    }
    Ok(())
}

pub(super) fn deliver(
    tx: &Connection,
    tenant: &str,
    id: &str,
    key: &str,
    now_ms: f64,
) -> Result<Delivery, StoreError> {
    let (key, now) = check_delivery_input(key, now_ms).map_err(StoreError::Invalid)?;
    let existing: Option<String> = tx
        .prepare_cached("SELECT receipt FROM deliveries WHERE tenant = ?1 AND key = ?2")?
        .query_row(params![tenant, key.as_str()], |r| r.get(0))
        .optional()?;
    let existing = existing
        .map(|text| from_json::<Receipt>(&text, "deliveries.receipt"))
        .transpose()
        .map_err(corrupt)?;
    let task = load_own_task(tx, tenant, id)?.map(|r| r.view);
    let delivery =
        decide_delivery(existing.as_ref(), id, task.as_ref(), &key, now).map_err(|e| {
            match e.code {
                taskwire_core::ErrorCode::NotFound => StoreError::NotFound(id.to_string()),
                _ => StoreError::Invalid(e),
            }
        })?;
    if let (DeliveryReason::Delivered, Some(receipt)) = (delivery.reason, &delivery.receipt) {
        tx.prepare_cached("INSERT INTO deliveries (tenant, key, receipt) VALUES (?1, ?2, ?3)")?
            .execute(params![tenant, key.as_str(), to_json(receipt)])?;
    }
    Ok(delivery)
}

//! A batch cancel on SQLite: every open task of the tenant's batch judged
//! as one cancel of it, in the writer's transaction (one commit for all).

use rusqlite::{params, Connection, OptionalExtension};

use super::jobs::act;
use crate::hub::Change;
use crate::store::{Action, BatchCancel, BatchCancelled, StoreError};

pub(super) fn cancel_batch(
    tx: &Connection,
    cancel: BatchCancel,
    changes: &mut Vec<Change>,
    outbox: &mut bool,
) -> Result<BatchCancelled, StoreError> {
    let size: Option<i64> = tx
        .prepare_cached("SELECT size FROM batches WHERE id = ?1 AND tenant = ?2")?
        .query_row(params![cancel.batch_id, cancel.tenant], |r| r.get(0))
        .optional()?;
    let Some(size) = size else {
        return Err(StoreError::BatchNotFound(cancel.batch_id));
    };
    let mut done = BatchCancelled::of(u64::try_from(size).unwrap_or(0));
    // The open items, from the index of open items alone; in id order, as
    // PostgreSQL locks them.
    let open: Vec<String> = tx
        .prepare_cached("SELECT id FROM tasks WHERE batch_id = ?1 AND live = 1 ORDER BY id")?
        .query_map(params![cancel.batch_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for task_id in open {
        let acted = act(
            tx,
            Action {
                tenant: cancel.tenant.clone(),
                task_id,
                event: cancel.event.clone(),
            },
            changes,
            outbox,
        )?;
        done.count(acted.answer.reason, acted.answer.changed);
    }
    Ok(done)
}

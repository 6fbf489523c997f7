//! A batch cancel on PostgreSQL: every open task of the tenant's batch
//! judged as one cancel of it, in the writer's transaction (one commit for
//! all). Rows are locked in id order, as the writer orders its jobs; a
//! deadlock with another instance is retried by the writer.

use deadpool_postgres::Transaction;

use super::batch::Batch;
use super::jobs::act;
use super::writer::Sql;
use crate::store::{Action, BatchCancel, BatchCancelled, StoreError};

pub(super) async fn cancel_batch(
    tx: &Transaction<'_>,
    b: &mut Batch,
    cancel: &BatchCancel,
) -> Sql<BatchCancelled> {
    let find = tx
        .prepare_cached("SELECT size FROM batches WHERE id = $1 AND tenant = $2")
        .await?;
    let Some(row) = tx
        .query_opt(&find, &[&cancel.batch_id, &cancel.tenant])
        .await?
    else {
        return Ok(Err(StoreError::BatchNotFound(cancel.batch_id.clone())));
    };
    let size: i64 = row.get(0);
    let mut done = BatchCancelled::of(u64::try_from(size).unwrap_or(0));
    let open = tx
        .prepare_cached("SELECT id FROM tasks WHERE batch_id = $1 AND live ORDER BY id")
        .await?;
    let ids: Vec<String> = tx
        .query(&open, &[&cancel.batch_id])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for task_id in ids {
        let action = Action {
            tenant: cancel.tenant.clone(),
            task_id,
            event: cancel.event.clone(),
        };
        match act(tx, b, &action).await? {
            Ok(acted) => done.count(acted.answer.reason, acted.answer.changed),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(done))
}

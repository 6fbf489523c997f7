//! Live output on PostgreSQL (see `store/output.rs`): the append, a job
//! of the writers (appends arriving together share a commit), and the
//! followers' read.
//!
//! An append locks its task's row (`FOR UPDATE`) before it loads the
//! stream, so two appends to one task, on any instances, are judged one
//! after the other: two chunks racing on one offset cannot both append.
//! A committed append NOTIFYs `o <task>`, which wakes the task's output
//! followers on every instance (`listen.rs`).

use deadpool_postgres::{GenericClient, Transaction};
use taskwire_core::output::Catchup;
use taskwire_core::{AppendReason, Appended};

use super::batch::Batch;
use super::read::{parse_view, record};
use super::writer::Sql;
use super::{PostgresStore, CHANNEL};
use crate::store::output::{
    catch_up, joined, judge, OutputAppend, OutputWanted, StoredStream, POSTGRES_LOAD,
};
use crate::store::rows::to_i64;
use crate::store::StoreError;

async fn load_stream(
    client: &impl GenericClient,
    task: &str,
    stream: &str,
) -> Result<StoredStream, tokio_postgres::Error> {
    let stmt = client.prepare_cached(POSTGRES_LOAD).await?;
    let rows = client.query(&stmt, &[&task, &stream]).await?;
    let rows = rows
        .iter()
        .map(|r| Ok((r.try_get::<_, i64>(0)?, r.try_get::<_, String>(1)?)))
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
    Ok(joined(rows))
}

/// Locks the task, has core judge the chunk against the stream, and
/// writes what it gained (dropping an older attempt's rows first). A task
/// this transaction already changed is judged as it is now.
pub(super) async fn append_output(
    tx: &Transaction<'_>,
    batch: &Batch,
    append: &OutputAppend,
    instance: &str,
) -> Sql<Appended> {
    let id = append.task_id.as_str();
    let stmt = tx
        .prepare_cached(
            "SELECT tenant, view, kind, input, lease, batch_id FROM tasks WHERE id = $1 FOR UPDATE",
        )
        .await?;
    let row = tx.query_opt(&stmt, &[&id]).await?;
    let view = match (batch.tasks.get(id), row) {
        (Some(held), _) => held.view.clone(),
        (None, Some(row)) => match record(&row, 0) {
            Ok(rec) => rec.view,
            Err(e) => return Ok(Err(e)),
        },
        (None, None) => return Ok(Err(StoreError::NotFound(id.to_string()))),
    };
    let stream = append.stream.as_str();
    let stored = load_stream(tx, id, stream).await?;
    let judged = judge(&view, stored, &append.chunk);
    if judged.reason != AppendReason::Appended {
        return Ok(Ok(judged));
    }
    let attempt = to_i64(judged.attempt);
    if judged.offset == 0 {
        tx.execute(
            "DELETE FROM output_chunks WHERE task_id = $1 AND stream = $2 AND attempt < $3",
            &[&id, &stream, &attempt],
        )
        .await?;
    }
    tx.execute(
        "INSERT INTO output_chunks (task_id, stream, attempt, start, text) VALUES ($1, $2, $3, $4, $5)",
        &[&id, &stream, &attempt, &to_i64(judged.offset), &judged.added],
    )
    .await?;
    let payload = format!("i {instance}\no {id}");
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
        .await?;
    Ok(Ok(judged))
}

/// What a follower of the tenant's task lacks: the task and the stream
/// read in one repeatable-read transaction, so they agree.
pub(super) async fn read_output(
    store: &PostgresStore,
    tenant: String,
    id: String,
    wanted: OutputWanted,
) -> Result<Catchup, StoreError> {
    let mut client = store.conn().await?;
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let row = tx
        .query_opt(
            "SELECT view FROM tasks WHERE id = $1 AND tenant = $2",
            &[&id, &tenant],
        )
        .await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound(id));
    };
    let view = parse_view(&row.try_get::<_, String>(0)?)?;
    let stored = load_stream(&tx, &id, wanted.stream.as_str()).await?;
    tx.commit().await?;
    Ok(catch_up(&view, stored, &wanted))
}

//! The LISTEN side: one dedicated connection per instance hears every
//! commit's lines and wakes this instance's waiters (see the module docs
//! of `postgres.rs`):
//!
//! - `version taskId`: a task changed. For tasks watched here that the hub
//!   does not know at that version, it re-reads the task and its recent
//!   history once and publishes them.
//! - `b seq batchId`: a commit raised a batch's cursor to `seq`. The hub
//!   wakes the batch's waiters, if any here; they read the batch from the
//!   store themselves, so nothing is re-read for them. A server from
//!   before batches parses `b` as a version, fails, and skips the line.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

use super::errors::pg_message;
use super::read::{entries, parse_view};
use super::CHANNEL;
use crate::hub::Hub;
use crate::store::rows::to_i64;
use crate::store::StoreError;

/// The LISTEN connection is checked when it has been quiet this long.
const HEALTH_EVERY: Duration = Duration::from_secs(5);

/// What NOTIFY payloads said: the highest version per task and the
/// highest cursor per batch.
#[derive(Debug, Default)]
pub(super) struct Heard {
    pub(super) tasks: HashMap<String, u64>,
    pub(super) batches: HashMap<String, u64>,
    /// Tasks whose output was appended (`o <task>` lines).
    pub(super) outputs: Vec<String>,
}

/// Reads one payload's lines into `into`; lines it does not know (a later
/// server's) are skipped, as this server's older peers skip `b` lines.
pub(super) fn parse_payload(payload: &str, into: &mut Heard) {
    for line in payload.lines() {
        if let Some(task) = line.strip_prefix("o ") {
            into.outputs.push(task.to_string());
            continue;
        }
        let (map, rest) = match line.strip_prefix("b ") {
            Some(rest) => (&mut into.batches, rest),
            None => (&mut into.tasks, line),
        };
        let Some((number, id)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(number) = number.parse::<u64>() else {
            continue;
        };
        let v = map.entry(id.to_string()).or_insert(0);
        *v = (*v).max(number);
    }
}

/// The LISTEN side (see the module docs). Reports on `ready` once the
/// first LISTEN is in place; then reconnects for ever.
pub(super) async fn listen(
    config: tokio_postgres::Config,
    hub: Arc<Hub>,
    ready: oneshot::Sender<Result<(), String>>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(50);
    loop {
        let (connected, err) = listen_once(&config, &hub, &mut ready).await;
        hub.metrics.listen_connected(false);
        if let Some(r) = ready.take() {
            let _ = r.send(Err(err));
            return;
        }
        hub.metrics.listen_reconnecting();
        if connected {
            backoff = Duration::from_millis(50);
        }
        eprintln!("taskwire-server: LISTEN connection lost ({err}); reconnecting");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One LISTEN connection, until it fails. Returns whether it got as far as
/// listening, and why it ended.
async fn listen_once(
    config: &tokio_postgres::Config,
    hub: &Hub,
    ready: &mut Option<oneshot::Sender<Result<(), String>>>,
) -> (bool, String) {
    let (client, mut connection) = match config.connect(NoTls).await {
        Ok(c) => c,
        Err(e) => return (false, pg_message(&e)),
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let _driver = AbortOnDrop(tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n.payload().to_string()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    }));
    if let Err(e) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
        return (false, pg_message(&e));
    }
    let reread = match client
        .prepare(
            "SELECT t.id, t.view, h.version, h.event
             FROM unnest($1::text[], $2::bigint[]) AS w(id, known)
             JOIN tasks t ON t.id = w.id
             LEFT JOIN history h ON h.task_id = t.id AND h.version > GREATEST(w.known, t.version - $3)
             ORDER BY t.id, h.version",
        )
        .await
    {
        Ok(s) => s,
        Err(e) => return (false, pg_message(&e)),
    };
    let cursors = match client
        .prepare("SELECT id, seq FROM batches WHERE id = ANY($1::text[])")
        .await
    {
        Ok(s) => s,
        Err(e) => return (false, pg_message(&e)),
    };
    hub.metrics.listen_connected(true);
    if let Some(r) = ready.take() {
        let _ = r.send(Ok(()));
    }
    // Whatever committed while nobody here listened (at start, or since
    // the last connection died): re-read every watched task and the
    // cursor of every watched batch.
    if let Err(e) = refresh(&client, &reread, hub, hub.watched_tasks()).await {
        return (true, e);
    }
    if let Err(e) = refresh_batches(&client, &cursors, hub).await {
        return (true, e);
    }
    loop {
        let first = match tokio::time::timeout(HEALTH_EVERY, rx.recv()).await {
            Ok(Some(payload)) => payload,
            Ok(None) => return (true, "connection closed".into()),
            Err(_quiet) => {
                let ping = tokio::time::timeout(Duration::from_secs(5), client.simple_query(""));
                match ping.await {
                    Ok(Ok(_)) => continue,
                    Ok(Err(e)) => return (true, pg_message(&e)),
                    Err(_) => return (true, "no answer within 5 s".into()),
                }
            }
        };
        let mut heard = Heard::default();
        let own = format!("i {}\n", hub.work.instance);
        let mut foreign = !first.starts_with(&own);
        parse_payload(&first, &mut heard);
        while let Ok(more) = rx.try_recv() {
            foreign |= !more.starts_with(&own);
            parse_payload(&more, &mut heard);
        }
        // Another instance changed something: work may be waiting here.
        if foreign {
            hub.work.bump();
        }
        // Output followers here wake (a task nobody follows: one lookup).
        for task in &heard.outputs {
            hub.output.appended(task, None);
        }
        // A batch nobody watches here costs one map lookup.
        for (batch, seq) in &heard.batches {
            hub.publish_batch(batch, *seq);
        }
        let notified = heard.tasks;
        let stale: Vec<(String, Option<u64>)> = hub
            .known_versions(notified.keys().map(String::as_str))
            .into_iter()
            .filter_map(|(id, known)| {
                let known = known?; // not watched here
                known
                    .map_or(true, |k| k < notified[id])
                    .then(|| (id.to_string(), known))
            })
            .collect();
        if !stale.is_empty() {
            if let Err(e) = refresh(&client, &reread, hub, stale).await {
                return (true, e);
            }
        }
    }
}

/// Re-reads watched tasks (view and the history this hub lacks, at most
/// its retention) and publishes them: one read per task, however many
/// waiters.
async fn refresh(
    client: &tokio_postgres::Client,
    reread: &tokio_postgres::Statement,
    hub: &Hub,
    tasks: Vec<(String, Option<u64>)>,
) -> Result<(), String> {
    let retention = i64::try_from(hub.retention()).unwrap_or(i64::MAX);
    for chunk in tasks.chunks(500) {
        let ids: Vec<&str> = chunk.iter().map(|t| t.0.as_str()).collect();
        let known: Vec<i64> = chunk.iter().map(|t| t.1.map_or(-1, to_i64)).collect();
        let rows = client
            .query(reread, &[&ids, &known, &retention])
            .await
            .map_err(|e| pg_message(&e))?;
        let mut start = 0;
        while start < rows.len() {
            let id: &str = rows[start].try_get(0).map_err(|e| pg_message(&e))?;
            let mut end = start + 1;
            while end < rows.len() && rows[end].try_get::<_, &str>(0).ok() == Some(id) {
                end += 1;
            }
            let group = &rows[start..end];
            let read = group[0]
                .try_get::<_, String>(1)
                .map_err(StoreError::from)
                .and_then(|text| parse_view(&text))
                .and_then(|view| Ok((view, entries(group, 2)?)));
            match read {
                Ok((view, entries)) => hub.publish_read(view, entries),
                Err(e) => eprintln!("taskwire-server: LISTEN: task {id}: {e:?}"),
            }
            start = end;
        }
    }
    Ok(())
}

/// Reads the cursor of every batch watched here and publishes it (after a
/// gap in listening; the hub never moves a cursor back).
async fn refresh_batches(
    client: &tokio_postgres::Client,
    cursors: &tokio_postgres::Statement,
    hub: &Hub,
) -> Result<(), String> {
    let watched = hub.watched_batch_ids();
    for chunk in watched.chunks(500) {
        let rows = client
            .query(cursors, &[&chunk])
            .await
            .map_err(|e| pg_message(&e))?;
        for row in &rows {
            let read = row
                .try_get::<_, &str>(0)
                .and_then(|id| Ok((id, row.try_get::<_, i64>(1)?)));
            match read {
                Ok((id, seq)) => hub.publish_batch(id, u64::try_from(seq).unwrap_or(0)),
                Err(e) => eprintln!("taskwire-server: LISTEN: batches: {}", pg_message(&e)),
            }
        }
    }
    Ok(())
}

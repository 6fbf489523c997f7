//! The writes of one transaction ([`Batch`]): gathered in memory while the
//! batch's jobs run, then written in a few set-based statements, NOTIFY
//! included, just before the COMMIT.
//!
//! ("Batch" here is the group commit's batch of jobs; a batch of tasks,
//! PROTOCOL.md §Batches, is `store/batches.rs` and `postgres/batches.rs`.)

use std::collections::{BTreeMap, HashMap, HashSet};

use deadpool_postgres::Transaction;
use taskwire_core::{notification_key, Event, Receipt};
use taskwire_wire::to_json;
use tokio_postgres::types::ToSql;

use super::batches::{raise_cursors, NewBatchRow};
use super::callback::UsedKey;
use super::writer::lock_id;
use super::CHANNEL;
use crate::hub::{Change, Hub};
use crate::store::callback_ref::CallbackRef;
use crate::store::lifecycle::{due_column, lease_column, Judged};
use crate::store::rows::to_i64;
use crate::store::{RawJson, StoreError, TaskRecord};

/// NOTIFY payloads must stay under 8,000 bytes.
const PAYLOAD: usize = 7_000;

/// The writes of one transaction, gathered while its jobs run (later jobs
/// see earlier ones through it) and written in a few set-based statements
/// at the end.
#[derive(Default)]
pub(super) struct Batch {
    /// Tasks this transaction holds (locked, or created by it), as they are
    /// now.
    pub(super) tasks: HashMap<String, TaskRecord>,
    pub(super) created: Vec<String>,
    pub(super) changed: Vec<String>,
    pub(super) changed_set: HashSet<String>,
    pub(super) history: Vec<(String, i64, String)>,
    pub(super) callbacks: HashMap<(String, String), Event>,
    /// (task, callback id, what to store, tenant) of every id remembered.
    pub(super) callback_rows: Vec<(String, String, CallbackRef, String)>,
    /// (tenant, callback id) of the batch's callbacks that are remembered
    /// on some task (prefetched, then kept up to date).
    pub(super) claimed: HashSet<(String, String)>,
    /// The batch's signed callback requests remembered as used
    /// (`callback_replays.rs`; prefetched, then kept up to date), and
    /// those this transaction remembers.
    pub(super) used: HashSet<UsedKey>,
    pub(super) used_rows: Vec<UsedKey>,
    pub(super) idempotency: HashMap<(String, String), (String, String)>,
    pub(super) deliveries: HashMap<(String, String), Receipt>,
    pub(super) outbox: Vec<(String, String, String, String, f64)>,
    pub(super) changes: Vec<Change>,
    /// Tasks whose row (or absence) and callback ids were read up front
    /// for the batch's callbacks (see [`prefetch`]).
    pub(super) prefetched: HashSet<String>,
    /// Prefetched rows that did not parse.
    pub(super) broken: HashMap<String, StoreError>,
    /// Per tenant with an open-task quota: its live tasks as committed
    /// when this transaction first counted them (under the tenant's quota
    /// lock, see `jobs::check_open_tasks`).
    pub(super) open_tasks: HashMap<String, u64>,
    /// Batches of tasks this transaction creates.
    pub(super) new_batches: Vec<NewBatchRow>,
    /// Each item this transaction creates: its place in its batch.
    pub(super) item_index: HashMap<String, i64>,
}

impl Batch {
    /// Records what core judged for one task (see `lifecycle.rs`): the
    /// row (view and lease) when anything moved, each history entry, and
    /// for a terminal change its outbox row at `at_ms`.
    pub(super) fn judged(&mut self, record: &TaskRecord, judged: &Judged, at_ms: f64) {
        if !judged.write {
            return;
        }
        let id = &record.view.id;
        let Some(rec) = self.tasks.get_mut(id) else {
            return;
        };
        rec.view = record.view.clone();
        rec.lease = record.lease;
        if self.changed_set.insert(id.clone()) {
            self.changed.push(id.clone());
        }
        for appended in &judged.appended {
            let view = &appended.view;
            self.history.push((
                id.clone(),
                to_i64(appended.entry.version),
                to_json(&appended.entry.event),
            ));
            if appended.notify {
                self.outbox.push((
                    record.tenant.clone(),
                    notification_key(id, view.state, view.version),
                    id.clone(),
                    view.state.as_str().to_string(),
                    appended.notify_at.unwrap_or(at_ms),
                ));
            }
            self.changes.push(Change {
                view: view.clone(),
                entry: appended.entry.clone(),
                batch: None,
            });
        }
    }

    /// Writes everything, NOTIFY included, in one pipelined round of
    /// statements (the caller COMMITs). A transaction that appends history
    /// to items of batches first raises their cursors ([`raise_cursors`],
    /// one round trip more, for those transactions only), so that the
    /// rows, the NOTIFY and the hub's changes carry them.
    pub(super) async fn flush(
        &mut self,
        tx: &Transaction<'_>,
        instance: &str,
    ) -> Result<(), tokio_postgres::Error> {
        let marks = raise_cursors(tx, self).await?;
        // Prepare first (statement order does not matter there); then the
        // executions go out in this order and run in it.
        let sql = [
            "INSERT INTO tasks (id, tenant, view, version, live, expires_at_ms, kind, input, due_at_ms,
                                batch_id, batch_index, batch_seq, queued_at_ms)
             SELECT u.*, extract(epoch from clock_timestamp()) * 1000
             FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bool[],
                         $6::float8[], $7::text[], $8::text[], $9::float8[],
                         $10::text[], $11::bigint[], $12::bigint[]) AS u",
            // `batch_seq` only moves with history (NULL: as it was).
            "UPDATE tasks t SET view = u.view, version = u.version, live = u.live,
                                lease = u.lease, due_at_ms = u.due_at_ms,
                                batch_seq = coalesce(u.batch_seq, t.batch_seq),
                                queued_at_ms = CASE WHEN u.view::jsonb ->> 'state' = 'queued'
                                    THEN coalesce(t.queued_at_ms,
                                                  extract(epoch from clock_timestamp()) * 1000) END
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bool[], $5::text[], $6::float8[],
                         $7::bigint[])
                  AS u(id, view, version, live, lease, due_at_ms, batch_seq)
             WHERE t.id = u.id",
            "INSERT INTO history (task_id, version, event, batch_seq)
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[])",
            "INSERT INTO callbacks (key, task_id, callback_id, version, event, tenant)
             SELECT taskwire_callback_key(1, t, c), i, c, v, e, t
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[])
                  AS u(i, c, v, e, t)",
            "INSERT INTO idempotency (tenant, key, request, task_id)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])",
            "INSERT INTO deliveries (tenant, key, receipt)
             SELECT * FROM unnest($1::text[], $2::text[], $3::text[])",
            // Function scans run in array order: the locks are taken sorted.
            "SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS l(k)",
            "INSERT INTO outbox (tenant, key, task_id, state, at_ms)
             SELECT t, k, i, s, a FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                                              $5::float8[]) WITH ORDINALITY AS u(t, k, i, s, a, n)
             ORDER BY n",
            "SELECT pg_notify($1, $2)",
            "INSERT INTO batches (id, tenant, size, seq, created_at_ms)
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::float8[])",
            // The body names its task, whose row lock serializes every
            // judgement of one request on every instance: no conflict is
            // expected, and one would find the row that was wanted.
            "INSERT INTO callback_replays (tenant, callback_id, signed_at, body_sha256)
             SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[])
             ON CONFLICT DO NOTHING",
        ];
        let mut stmts = Vec::with_capacity(sql.len());
        for s in sql {
            stmts.push(tx.prepare_cached(s).await?);
        }

        // The cursor this transaction raised a task's batch to, for a task
        // it appended history to (the batches in `marks` are those of such
        // tasks; an item that did not change keeps its `batch_seq`).
        let appended: HashSet<&str> = self.history.iter().map(|h| h.0.as_str()).collect();
        let moved_to = |id: &str| -> Option<i64> {
            if !appended.contains(id) {
                return None;
            }
            let batch = self.tasks.get(id)?.batch.as_ref()?;
            marks.get(batch).map(|seq| to_i64(*seq))
        };

        let created: Vec<&TaskRecord> = self
            .created
            .iter()
            .filter_map(|id| self.tasks.get(id))
            .collect();
        let c_id: Vec<&str> = created.iter().map(|r| r.view.id.as_str()).collect();
        let c_tenant: Vec<&str> = created.iter().map(|r| r.tenant.as_str()).collect();
        let c_view: Vec<String> = created.iter().map(|r| to_json(&r.view)).collect();
        let c_version: Vec<i64> = created.iter().map(|r| to_i64(r.view.version)).collect();
        let c_live: Vec<bool> = created
            .iter()
            .map(|r| !r.view.state.is_terminal())
            .collect();
        let c_expires: Vec<f64> = created.iter().map(|r| r.view.expires_at_ms).collect();
        let c_kind: Vec<Option<&str>> = created.iter().map(|r| r.kind.as_deref()).collect();
        let c_input: Vec<Option<&str>> = created
            .iter()
            .map(|r| r.input.as_ref().map(RawJson::as_str))
            .collect();
        let c_due: Vec<Option<f64>> = created.iter().map(|r| due_column(r)).collect();
        let c_batch: Vec<Option<&str>> = created.iter().map(|r| r.batch.as_deref()).collect();
        let c_index: Vec<Option<i64>> = created
            .iter()
            .map(|r| self.item_index.get(&r.view.id).copied())
            .collect();
        // An item starts at its batch's first cursor (1), or at the one
        // this transaction raised it to.
        let c_seq: Vec<Option<i64>> = created
            .iter()
            .map(|r| r.batch.as_ref().map(|_| moved_to(&r.view.id).unwrap_or(1)))
            .collect();

        let created_set: HashSet<&str> = c_id.iter().copied().collect();
        let updated: Vec<&TaskRecord> = self
            .changed
            .iter()
            .filter(|id| !created_set.contains(id.as_str()))
            .filter_map(|id| self.tasks.get(id))
            .collect();
        let u_id: Vec<&str> = updated.iter().map(|r| r.view.id.as_str()).collect();
        let u_view: Vec<String> = updated.iter().map(|r| to_json(&r.view)).collect();
        let u_version: Vec<i64> = updated.iter().map(|r| to_i64(r.view.version)).collect();
        let u_live: Vec<bool> = updated
            .iter()
            .map(|r| !r.view.state.is_terminal())
            .collect();
        let u_lease: Vec<Option<String>> = updated.iter().map(|r| lease_column(r)).collect();
        let u_due: Vec<Option<f64>> = updated.iter().map(|r| due_column(r)).collect();
        let u_seq: Vec<Option<i64>> = updated.iter().map(|r| moved_to(&r.view.id)).collect();

        let h_task: Vec<&str> = self.history.iter().map(|h| h.0.as_str()).collect();
        let h_version: Vec<i64> = self.history.iter().map(|h| h.1).collect();
        let h_event: Vec<&str> = self.history.iter().map(|h| h.2.as_str()).collect();
        let h_seq: Vec<Option<i64>> = self.history.iter().map(|h| moved_to(&h.0)).collect();

        let cb_task: Vec<&str> = self.callback_rows.iter().map(|c| c.0.as_str()).collect();
        let cb_id: Vec<&str> = self.callback_rows.iter().map(|c| c.1.as_str()).collect();
        let cb_version: Vec<Option<i64>> = self.callback_rows.iter().map(|c| c.2.version).collect();
        let cb_event: Vec<Option<&str>> = self
            .callback_rows
            .iter()
            .map(|c| c.2.event.as_deref())
            .collect();
        let cb_tenant: Vec<&str> = self.callback_rows.iter().map(|c| c.3.as_str()).collect();

        let r_tenant: Vec<&str> = self.used_rows.iter().map(|r| r.0.as_str()).collect();
        let r_id: Vec<&str> = self.used_rows.iter().map(|r| r.1.as_str()).collect();
        let r_at: Vec<i64> = self.used_rows.iter().map(|r| r.2).collect();
        let r_digest: Vec<&[u8]> = self.used_rows.iter().map(|r| &r.3[..]).collect();

        let i_tenant: Vec<&str> = self.idempotency.keys().map(|k| k.0.as_str()).collect();
        let i_key: Vec<&str> = self.idempotency.keys().map(|k| k.1.as_str()).collect();
        let i_request: Vec<&str> = self.idempotency.values().map(|v| v.0.as_str()).collect();
        let i_task: Vec<&str> = self.idempotency.values().map(|v| v.1.as_str()).collect();

        let d_tenant: Vec<&str> = self.deliveries.keys().map(|k| k.0.as_str()).collect();
        let d_key: Vec<&str> = self.deliveries.keys().map(|k| k.1.as_str()).collect();
        let d_receipt: Vec<String> = self.deliveries.values().map(to_json).collect();

        let mut tenant_locks: Vec<i64> = self
            .outbox
            .iter()
            .map(|o| lock_id(&["outbox", &o.0]))
            .collect();
        tenant_locks.sort_unstable();
        tenant_locks.dedup();
        let o_tenant: Vec<&str> = self.outbox.iter().map(|o| o.0.as_str()).collect();
        let o_key: Vec<&str> = self.outbox.iter().map(|o| o.1.as_str()).collect();
        let o_task: Vec<&str> = self.outbox.iter().map(|o| o.2.as_str()).collect();
        let o_state: Vec<&str> = self.outbox.iter().map(|o| o.3.as_str()).collect();
        let o_at: Vec<f64> = self.outbox.iter().map(|o| o.4).collect();

        let nb_id: Vec<&str> = self.new_batches.iter().map(|n| n.id.as_str()).collect();
        let nb_tenant: Vec<&str> = self.new_batches.iter().map(|n| n.tenant.as_str()).collect();
        let nb_size: Vec<i64> = self.new_batches.iter().map(|n| n.size).collect();
        let nb_seq: Vec<i64> = self.new_batches.iter().map(|n| n.seq).collect();
        let nb_at: Vec<f64> = self.new_batches.iter().map(|n| n.created_at_ms).collect();

        let mut payloads = notify_payloads(&self.changes, &marks);
        if !c_id.is_empty() && payloads.is_empty() {
            // New tasks are work for held claims on the other instances
            // (hub/work.rs): a payload of the sender's line alone.
            payloads.push(String::new());
        }
        // Whose NOTIFY it is (`i <instance>`, a line older listeners
        // skip): an instance's own changes woke its claims already.
        for p in &mut payloads {
            p.insert_str(0, &format!("i {instance}\n"));
        }

        let mut calls: Vec<(usize, Vec<&(dyn ToSql + Sync)>)> = Vec::new();
        if !nb_id.is_empty() {
            calls.push((9, vec![&nb_id, &nb_tenant, &nb_size, &nb_seq, &nb_at]));
        }
        if !c_id.is_empty() {
            calls.push((
                0,
                vec![
                    &c_id, &c_tenant, &c_view, &c_version, &c_live, &c_expires, &c_kind, &c_input,
                    &c_due, &c_batch, &c_index, &c_seq,
                ],
            ));
        }
        if !u_id.is_empty() {
            calls.push((
                1,
                vec![
                    &u_id, &u_view, &u_version, &u_live, &u_lease, &u_due, &u_seq,
                ],
            ));
        }
        if !h_task.is_empty() {
            calls.push((2, vec![&h_task, &h_version, &h_event, &h_seq]));
        }
        if !cb_task.is_empty() {
            calls.push((
                3,
                vec![&cb_task, &cb_id, &cb_version, &cb_event, &cb_tenant],
            ));
        }
        if !r_tenant.is_empty() {
            calls.push((10, vec![&r_tenant, &r_id, &r_at, &r_digest]));
        }
        if !i_tenant.is_empty() {
            calls.push((4, vec![&i_tenant, &i_key, &i_request, &i_task]));
        }
        if !d_tenant.is_empty() {
            calls.push((5, vec![&d_tenant, &d_key, &d_receipt]));
        }
        if !o_key.is_empty() {
            calls.push((6, vec![&tenant_locks]));
            calls.push((7, vec![&o_tenant, &o_key, &o_task, &o_state, &o_at]));
        }
        let channel = CHANNEL;
        for p in &payloads {
            calls.push((8, vec![&channel, p]));
        }
        // try_join_all polls in order: each execution is sent, in order,
        // on its first poll; the server runs them in that order.
        let futures = calls
            .iter()
            .map(|(i, params)| tx.execute(&stmts[*i], params.as_slice()));
        futures_util::future::try_join_all(futures).await?;
        Ok(())
    }
}

/// NOTIFY payloads: lines of `version taskId`, the last version per task,
/// then `b seq batchId` for each batch cursor raised (see `listen.rs`;
/// a server before batches skips those lines), split to stay under the
/// payload limit.
pub(super) fn notify_payloads(changes: &[Change], marks: &BTreeMap<String, u64>) -> Vec<String> {
    let mut last: HashMap<&str, u64> = HashMap::new();
    let mut order = Vec::new();
    for c in changes {
        if last.insert(c.view.id.as_str(), c.view.version).is_none() {
            order.push(c.view.id.as_str());
        }
    }
    let tasks = order.into_iter().map(|id| format!("{} {id}\n", last[id]));
    let batches = marks.iter().map(|(id, seq)| format!("b {seq} {id}\n"));
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in tasks.chain(batches) {
        if !cur.is_empty() && cur.len() + line.len() > PAYLOAD {
            out.push(std::mem::take(&mut cur));
        }
        cur.push_str(&line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

pub(super) fn hub_publish(hub: &Hub, batch: &Batch) {
    hub.publish(&batch.changes);
    if !batch.outbox.is_empty() {
        hub.outbox.notify_one();
    }
}

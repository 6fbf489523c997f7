// The batches (PROTOCOL.md §Batches) as the store keeps them beside the
// core's TaskBook, which knows nothing of batches: a batch's tasks in item
// order, its cursor, how many of its tasks are still open, and for each
// task the batch cursor each of its history entries was written at. That
// last table is what lets a `delta` hold, per changed task, exactly the
// entries written after the client's cursor.
//
// All of it follows from the journal's records as they run (store.mjs,
// `#run`), live and on replay, so a restart rebuilds the same cursors: a
// batch is made by its `batch` record, and each record that gave tasks of
// a batch new versions moves that batch's cursor on by one.

import { planBatch } from "taskwire";
import { isTerminal } from "./lifecycle.mjs";

export class BatchBook {
  /** batchId → {tenant, ids (item order), cursor, open} */
  #batches = new Map();
  /**
   * taskId → {batchId, writtenAt, ended}: `writtenAt[v - 1]` is the batch
   * cursor version v was written at (non-decreasing), `ended` whether the
   * task is terminal (counted out of `open` once).
   */
  #items = new Map();

  /** A new batch of `ids` (tasks at version 0), at cursor 1. */
  add(batchId, tenant, ids) {
    this.#batches.set(batchId, { tenant, ids, cursor: 1, open: ids.length });
    for (const id of ids) this.#items.set(id, { batchId, writtenAt: [], ended: false });
  }

  /** True when `batchId` exists and belongs to `tenant` (else: 404 for them). */
  owns(tenant, batchId) {
    return this.#batches.get(batchId)?.tenant === tenant;
  }

  /** The batch a task belongs to, or undefined. */
  batchOf(taskId) {
    return this.#items.get(taskId)?.batchId;
  }

  /** {ids, cursor, size, open} of a batch that exists. */
  summary(batchId) {
    const { ids, cursor, open } = this.#batches.get(batchId);
    return { ids, cursor, size: ids.length, open };
  }

  /** The ids of a batch's tasks that are not terminal, in item order. */
  openIds(batchId) {
    return this.#batches.get(batchId).ids.filter((id) => !this.#items.get(id).ended);
  }

  /**
   * After a record ran: the tasks in `changed` have new versions
   * (`viewOf(id)` is a task's view now). Each batch holding some of them
   * moves on by one (one commit, one step, however many of its tasks it
   * changed), and every new version remembers that cursor. Returns the
   * batches that moved, whose held requests are to be woken.
   */
  advance(changed, viewOf) {
    const moved = new Map(); // batchId → [[item, view]]
    for (const id of changed) {
      const item = this.#items.get(id);
      if (item === undefined) continue;
      const view = viewOf(id);
      if (view.version <= item.writtenAt.length) continue; // no new entry: not a change
      if (!moved.has(item.batchId)) moved.set(item.batchId, []);
      moved.get(item.batchId).push([item, view]);
    }
    for (const [batchId, changes] of moved) {
      const batch = this.#batches.get(batchId);
      batch.cursor += 1;
      for (const [item, view] of changes) {
        while (item.writtenAt.length < view.version) item.writtenAt.push(batch.cursor);
        if (!item.ended && isTerminal(view.state)) {
          item.ended = true;
          batch.open -= 1;
        }
      }
    }
    return [...moved.keys()];
  }

  /**
   * The answer to a client at `cursor` (PROTOCOL.md §Batches, "Follow a
   * batch"), without the epoch. `resume(id, version)` is a task's resume
   * answer for a client that held `version`; `snapshotOf(id)` its snapshot.
   */
  answer(batchId, cursor, snapshot, { resume, snapshotOf }) {
    const { ids, cursor: now, open } = this.#batches.get(batchId);
    const head = (mode, tasks) => ({ batchId, mode, cursor: now, size: ids.length, open, tasks });
    // Which answer: core's rule (`planBatch`), as every backend's.
    const mode = planBatch(now, cursor, snapshot);
    if (mode === "snapshot") return head("snapshot", ids.map(snapshotOf));
    if (mode === "caught-up") return head("caught-up", []);
    const tasks = [];
    for (const id of ids) {
      const { writtenAt } = this.#items.get(id);
      // The version the client held at `cursor`: the entries written by then.
      const held = countAtMost(writtenAt, cursor);
      // A delta of the entries after it, or a snapshot past the window.
      if (held < writtenAt.length) tasks.push(resume(id, held));
    }
    return head("delta", tasks);
  }
}

/** How many elements of the non-decreasing `values` are ≤ `limit` (binary search). */
function countAtMost(values, limit) {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] <= limit) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

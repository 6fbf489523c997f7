// The backend's state: one shared `TaskBook` (every protocol rule lives in
// the taskwire core), plus what the core does not know about: which tenant
// owns a task, its `kind` and `input`, create idempotency keys, the
// notification feed, batches (batch-book.mjs), and who is waiting for a
// task or a batch to change.
//
// Storage is event sourcing. Every operation that changes the book is a
// record (a plain JSON object) run by one function, `#run`, both live and
// on replay. Live, a record that changed something is appended to the
// journal (fsynced) before the caller answers; on start, the journal's
// records run again, in order, through a fresh book. The core is
// deterministic (no clock, no randomness: ids and times are in the
// records), so the replay rebuilds exactly the state that was acknowledged.
//
// Records (one JSON line each, see README.md):
//   {"op":"create","id","tenant","nowMs","ttlMs","maxAttempts","deadlineMs"?,"unknownGraceMs"?,"autoRequeue"?,"kind"?,"inputJson"?,"key"?,"request"?}
//   (journals written before exact input have "input" as a JSON value, no "request")
//   {"op":"batch","batchId","tenant","nowMs","items":[{"id","ttlMs","maxAttempts",…,"kind"?,"inputJson"?}],"key"?,"request"?}
//   {"op":"callback","taskId","callbackId","event","version","signed"?} (or "lease": a heartbeat that only
//   renewed it; one that changed nothing has "signed": {at, sha256}, the request used once)
//   {"op":"act","taskId","event","version"} (a person's cancel or decision)
//   {"op":"deliver","tenant","taskId","key","nowMs"}
//   {"op":"expire","nowMs","ids"}
//   {"op":"sweep","nowMs","swept"} (leases, grace periods, deadlines)
//   {"op":"output","taskId","stream","attempt","offset","text","expected"} (a live-output chunk
//   core appended; makes no task version)
// `version`, `lease`, `ids` and `swept` are what the operation did; replay
// checks that it does the same again.

import { misreads } from "./misread.mjs";
import { TaskBook } from "taskwire";
import { Journal, newEpoch } from "./journal.mjs";
import { HttpError, quoted } from "./http.mjs";
import { BatchBook } from "./batch-book.mjs";
import { keyRecord, legacyCreateRequest, taskRecord } from "./create.mjs";
import { Feeds } from "./feed.mjs";
import { CreateKeys } from "./keys.mjs";
import { UsedRequests } from "./used-requests.mjs";
import { Watchers } from "./watch.mjs";
import { OutputStreams } from "./output-store.mjs";
import { Leases } from "./leases.mjs";

/** The record could not be made durable: the process must stop (see `#commit`). */
export class StorageError extends Error {
  constructor(cause) {
    super(`journal: ${cause.message}`, { cause });
    this.name = "StorageError";
  }
}

export class Store {
  #book;
  #journal;
  /** taskId → {tenant, kind, input, batchId}; `input` is JSON text, exactly as sent */
  #tasks = new Map();
  /** Create idempotency keys, single and batch creates in one namespace. */
  #createKeys = new CreateKeys();
  #batches = new BatchBook();
  /**
   * JSON [tenant, callbackId] → the task the id is remembered on. The book
   * scopes callback ids to their task; over HTTP a tenant's id belongs to
   * one task (PROTOCOL.md §Executor callback).
   */
  #callbackOwners = new Map();
  #used = new UsedRequests(); // signed callback requests whose id is not remembered
  #feeds = new Feeds();
  /** Who waits for a task or a batch to change. */
  #watchers = new Watchers();
  /** Live output: the streams, and who waits for their appends (output-store.mjs). */
  #outputs = new OutputStreams();
  /** Each task's lease as its last event left it: a renewal is journaled (leases.mjs). */
  #leases = new Leases();
  /** Set once a write failed: the book is ahead of the disk. */
  #broken = null;

  /** The epoch of the store's history (PROTOCOL.md §Epoch), on every view and answer. */
  epoch;

  constructor({ retention, journal = null, epoch = newEpoch() }) {
    this.#book = new TaskBook({ retentionVersions: retention });
    this.#journal = journal;
    // Memory only: every start is a new history, so a new epoch.
    this.epoch = epoch;
  }

  /**
   * A store over `dataDir`'s journal (replayed), or in memory only when
   * `dataDir` is undefined. `replayed` counts the records run again.
   */
  static open({ retention, dataDir }) {
    if (dataDir === undefined) return { store: new Store({ retention }), replayed: 0, dropped: 0 };
    const { journal, records, dropped, epoch } = Journal.open(dataDir);
    const store = new Store({ retention, journal, epoch });
    for (const { line, record } of records) {
      try {
        store.#replay(record);
      } catch (err) {
        journal.close();
        throw new Error(`${journal.path}:${line}: replay failed: ${err.message}`);
      }
    }
    return { store, replayed: records.length, dropped };
  }

  close() {
    this.#journal?.close();
    this.#journal = null;
  }

  // ---- reads ---------------------------------------------------------------

  /** The tenant that owns `taskId`, or undefined for an unknown task. */
  tenantOf(taskId) {
    return this.#tasks.get(taskId)?.tenant;
  }

  /** True when `taskId` exists and belongs to `tenant` (else: 404 for them). */
  owns(tenant, taskId) {
    return this.#tasks.get(taskId)?.tenant === tenant;
  }

  /** The task as GET and create answer it, as JSON text: the TaskView plus kind, batchId, input (byte for byte as sent) and the epoch. */
  taskJson(taskId) {
    const { kind, input, batchId } = this.#tasks.get(taskId);
    const text = JSON.stringify({
      ...this.#view(taskId),
      ...(kind !== undefined && { kind }),
      ...(batchId !== undefined && { batchId }),
      epoch: this.epoch,
    });
    return input === undefined ? text : `${text.slice(0, -1)},"input":${input}}`;
  }

  /** The resume answer for `cursor` (an object), or a snapshot when asked. */
  resume(taskId, cursor, snapshot = false) {
    if (snapshot) return { mode: "snapshot", events: [], task: this.#view(taskId), epoch: this.epoch };
    return { ...this.#book.resume(taskId, cursor), epoch: this.epoch };
  }

  /** The task's timeline as JSON text, written by core (PROTOCOL.md §Timeline). */
  timelineJson(taskId) {
    return this.#book.timelineJson(taskId);
  }

  /** Up to `limit` of the tenant's notifications with `seq > after`. */
  notifications(tenant, after, limit) {
    return this.#feeds.page(tenant, after, limit);
  }

  /** True when `batchId` exists and belongs to `tenant` (else: 404 for them). */
  ownsBatch(tenant, batchId) {
    return this.#batches.owns(tenant, batchId);
  }

  /** {size, open: the ids of its tasks not terminal} of a batch that exists. */
  batchItems(batchId) {
    return { size: this.#batches.summary(batchId).size, open: this.#batches.openIds(batchId) };
  }

  /** The batch's answer for `cursor` (PROTOCOL.md §Batches, "Follow a batch"), an object. */
  batchAnswer(batchId, cursor, snapshot = false) {
    const answer = this.#batches.answer(batchId, cursor, snapshot, {
      resume: (id, version) => this.#book.resume(id, version),
      snapshotOf: (id) => ({ mode: "snapshot", events: [], task: this.#view(id) }),
    });
    return { ...answer, epoch: this.epoch };
  }

  /** Calls `fn()` after each change of the task or batch `id`; returns the unsubscribe. */
  watch(id, fn) {
    return this.#watchers.watch(id, fn);
  }

  /** What a follower holding `wanted` ({stream, attempt, offset}) of the task lacks (core's, output-store.mjs). */
  readOutput(taskId, wanted) {
    return this.#outputs.since(taskId, wanted, this.#view(taskId));
  }

  /** `watch` for appends, `fn(stream)`: apart, so that an append wakes only who asked for output. */
  watchOutput(id, fn) {
    return this.#outputs.watch(id, fn);
  }

  // ---- writes --------------------------------------------------------------

  /** Core's judgement of a live-output chunk ({attempt, offset, text}); only `appended` is journaled, and makes no version. */
  appendOutput(taskId, stream, { attempt, offset, text }) {
    return this.#commit({ op: "output", taskId, stream, attempt, offset, text });
  }

  /**
   * Creates a task for `tenant`, or (same Idempotency-Key, same request)
   * answers the task the key made. `input` is JSON text; `idem` is
   * {key, request, legacyRequest} (see create.mjs) or undefined. Returns
   * {task (JSON text), created}.
   */
  create(tenant, { id, nowMs, ttlMs, maxAttempts, deadlineMs, unknownGraceMs, autoRequeue, workflowVersion, steps, budget, kind, input }, idem) {
    const known = this.#createKeys.replayOf(tenant, idem, "task");
    if (known) return { task: this.taskJson(known.taskId), created: false };
    const fields = { id, ttlMs, maxAttempts, deadlineMs, unknownGraceMs, autoRequeue, workflowVersion, steps, budget, kind, input };
    this.#commit({ op: "create", id, tenant, nowMs, ...taskRecord(fields), ...keyRecord(idem) });
    return { task: this.taskJson(id), created: true };
  }

  /**
   * Creates a batch for `tenant`, whole, in one record (PROTOCOL.md
   * §Batches): `items` are create fields as `create` takes them, each with
   * its id, all at `nowMs`; `idem` is {key, request} or undefined. The
   * same key and request answer the batch the key made, as it is now.
   * Returns {batch (JSON text), created}.
   */
  createBatch(tenant, { batchId, nowMs, items }, idem) {
    const known = this.#createKeys.replayOf(tenant, idem, "batch");
    if (known) return { batch: this.#batchJson(known.batchId), created: false };
    this.#commit({ op: "batch", batchId, tenant, nowMs, items: items.map(taskRecord), ...keyRecord(idem) });
    return { batch: this.#batchJson(batchId), created: true };
  }

  /** A batch as its create answers it, JSON text: the cursor now, the tasks as GET shows them. */
  #batchJson(batchId) {
    const { ids, cursor, size, open } = this.#batches.summary(batchId);
    const head = JSON.stringify({ batchId, size, cursor, open, epoch: this.epoch });
    return `${head.slice(0, -1)},"tasks":[${ids.map((id) => this.taskJson(id)).join(",")}]}`;
  }

  /**
   * Applies an executor's event for one of `tenant`'s tasks; returns the
   * core's CallbackResult. A callback id the tenant used on another task
   * is 422, and nothing is recorded.
   */
  callback(tenant, taskId, callbackId, event, signed) {
    if (this.tenantOf(taskId) !== tenant) throw new HttpError(404, "not-found", `taskId: no task with id ${quoted(taskId)}`);
    const owner = this.#callbackOwners.get(JSON.stringify([tenant, callbackId]));
    // The very request judged before: a redelivery, nothing recorded.
    if (owner !== taskId && this.#used.has(tenant, callbackId, signed)) return this.#book.redelivered(taskId, event);
    if (owner !== undefined && owner !== taskId) {
      throw new HttpError(422, "callback-id-reused-for-other-task", `webhook-id: ${quoted(callbackId)} was already used for another task`);
    }
    // The server's clock when it arrived: leases run from it (PROTOCOL.md §Workers).
    const record = { op: "callback", taskId, callbackId, event, receivedAtMs: Date.now(), ...(signed === undefined ? {} : { signed }) };
    return this.#commit(record);
  }

  /**
   * Applies a person's event (cancel, decide; its `atMs` and `actor` set
   * by the route) to a task the caller owns; returns the core's result.
   */
  act(taskId, event) {
    return this.#commit({ op: "act", taskId, event });
  }

  /** Delivers a result under the tenant's key; returns the core's Delivery. */
  deliver(tenant, taskId, key, nowMs) {
    return this.#commit({ op: "deliver", tenant, taskId, key, nowMs });
  }

  /**
   * The sweeper's tick: expires every task due at `nowMs`, then takes the
   * lifecycle steps due (lapsed leases, grace periods, deadlines), each
   * its own record. Returns the ids expired and the steps taken.
   */
  sweep(nowMs) {
    this.#used.forget(nowMs);
    const expired = this.#commit({ op: "expire", nowMs });
    const swept = this.#commit({ op: "sweep", nowMs });
    return { expired, swept };
  }

  // ---- the one path every change takes ------------------------------------

  /**
   * Runs a live record; when it changed something, journals it (fsync)
   * and only then lets watchers see it. Everything here is synchronous, so
   * no other request can observe the change before it is on disk.
   */
  #commit(record) {
    if (this.#broken) throw this.#broken;
    const { result, changed, touched, appended } = this.#run(record);
    if (changed && this.#journal) {
      try {
        this.#journal.append(record);
      } catch (err) {
        // The book already holds the change and cannot take it back: stop
        // writing. A restart replays the journal, which does not have it.
        this.#broken = new StorageError(err);
        throw this.#broken;
      }
    }
    for (const id of touched) this.#watchers.wake(id);
    if (appended) this.#outputs.wake(appended.taskId, appended.stream);
    return result;
  }

  /** Runs a journal record again, checking that it does what it did. */
  #replay(record) {
    const { changed } = this.#run(record);
    if (!changed) throw new Error(`${record.op} changed nothing`);
  }

  /**
   * Runs one record (`#runOp`), then moves on the cursor of each batch
   * whose tasks it changed. `touched` lists the tasks and batches that
   * changed, whose watchers are woken once the record is on disk.
   */
  #run(record) {
    const ran = this.#runOp(record);
    const batches = this.#batches.advance(ran.touched, (id) => this.#view(id));
    return { ...ran, touched: [...ran.touched, ...batches] };
  }

  /**
   * Runs one record against the book and the tables around it. Returns the
   * result for the caller, whether anything changed (only then is the
   * record journaled) and the ids of the tasks that changed. Fills in
   * `version` (callback) and `ids` (expire); on replay, checks them.
   */
  #runOp(record) {
    switch (record.op) {
      case "create": {
        const { id, tenant, ttlMs, maxAttempts, kind, key } = record;
        this.#createTask(record, tenant, record.nowMs);
        if (key !== undefined) {
          this.#createKeys.remember(tenant, key, {
            taskId: id,
            request: record.request ?? legacyCreateRequest({ ttlMs, maxAttempts, kind, input: record.input }),
          });
        }
        return { result: undefined, changed: true, touched: [] };
      }
      case "batch": {
        const { batchId, tenant, nowMs, items, key } = record;
        for (const item of items) this.#createTask(item, tenant, nowMs, batchId);
        this.#batches.add(batchId, tenant, items.map((item) => item.id));
        if (key !== undefined) this.#createKeys.remember(tenant, key, { batchId, request: record.request });
        return { result: undefined, changed: true, touched: [] };
      }
      case "callback":
      case "act": {
        // Journals before leases ran on the server's clock have no receivedAtMs.
        const result =
          record.receivedAtMs === undefined
            ? this.#book.apply(record.taskId, record.event, record.callbackId)
            : this.#book.applyAt(record.taskId, record.event, record.callbackId, record.receivedAtMs);
        const leaseMoved = this.#leases.moved(record.taskId, result.lease);
        const { tenant } = this.#tasks.get(record.taskId);
        if (result.changed) {
          this.#expect(record, "version", result.task.version);
          // The book remembers an id only when its event changed the task.
          if (record.callbackId !== undefined) this.#callbackOwners.set(JSON.stringify([tenant, record.callbackId]), record.taskId);
        } else if (leaseMoved) {
          this.#expect(record, "lease", result.lease ?? null);
        }
        // A signed request whose id is not remembered is remembered itself (journaled, like a lease).
        const owned = this.#callbackOwners.get(JSON.stringify([tenant, record.callbackId])) === record.taskId;
        const used = !owned && this.#used.add(tenant, record.callbackId, record.signed);
        this.#collectNotifications();
        // A renewed lease is journaled but not published: no version, nothing for watchers.
        return { result, changed: result.changed || leaseMoved || used, touched: result.changed ? [record.taskId] : [] };
      }
      case "deliver": {
        // Keys are per tenant: the book sees them namespaced, the client never does.
        const bookKey = JSON.stringify([record.tenant, record.key]);
        const result = this.#book.deliverResult(record.taskId, bookKey, record.nowMs);
        if (result.receipt) result.receipt.idempotencyKey = record.key;
        return { result, changed: result.reason === "delivered", touched: [] };
      }
      case "expire": {
        const ids = this.#book.expireDue(record.nowMs);
        if (ids.length > 0) this.#expect(record, "ids", ids);
        for (const id of ids) this.#leases.ended(id); // the attempt ended with the task
        this.#collectNotifications();
        return { result: ids, changed: ids.length > 0, touched: ids };
      }
      case "sweep": {
        const swept = this.#book.sweepDue(record.nowMs);
        // Across tasks the book may take the steps in another order after
        // a replay (its queue skipped idle ticks, which are not journaled);
        // each task's own steps keep their order.
        if (swept.length > 0) this.#expect(record, "swept", byTask(swept));
        const touched = [...new Set(swept.map((s) => s.taskId))];
        for (const id of touched) this.#leases.ended(id);
        this.#collectNotifications(misreads("sweeper-notifies-at-now") ? record.nowMs : undefined);
        return { result: swept, changed: swept.length > 0, touched };
      }
      case "output": {
        const result = this.#outputs.append(record, this.#view(record.taskId));
        const changed = result.reason === "appended";
        if (changed) this.#expect(record, "expected", result.expected);
        // No task version: the output's watchers are woken, the task's are not.
        return { result, changed, touched: [], appended: changed ? record : undefined };
      }
      default:
        throw new Error(`unknown record op ${JSON.stringify(record.op)}`);
    }
  }

  /** One task of a `create` record, or an item of a `batch` record. */
  #createTask(fields, tenant, nowMs, batchId) {
    const { id, ttlMs, maxAttempts, deadlineMs, unknownGraceMs, autoRequeue, workflowVersion, steps, budget, kind } = fields;
    this.#book.create({ id, nowMs, ttlMs, maxAttempts, deadlineMs, unknownGraceMs, autoRequeue, workflowVersion, steps, budget });
    // Old journals kept `input` as a parsed value: its text is all that is left.
    const input = fields.inputJson ?? (fields.input === undefined ? undefined : JSON.stringify(fields.input));
    this.#tasks.set(id, { tenant, kind, input, batchId });
  }

  /** Live: records what the operation did. Replay: it must match. */
  #expect(record, field, value) {
    if (!(field in record)) {
      record[field] = value;
    } else if (JSON.stringify(record[field]) !== JSON.stringify(value)) {
      throw new Error(`${record.op}: ${field} ${JSON.stringify(value)}, the journal says ${JSON.stringify(record[field])}`);
    }
  }

  /** Moves the book's outbox into the tenants' feeds, keyed taskId:state:version. */
  #collectNotifications(misreadAtMs) {
    for (const n of this.#book.drainNotifications()) {
      // A terminal task never changes again: its version now is the
      // version of the transition that made it terminal.
      const version = this.#view(n.taskId).version;
      const { tenant } = this.#tasks.get(n.taskId);
      this.#feeds.push(tenant, { key: `${n.taskId}:${n.state}:${version}`, taskId: n.taskId, state: n.state, atMs: misreadAtMs ?? n.atMs });
    }
  }

  /** The TaskView: no history, and no lease (operational, not versioned: not on the wire). */
  #view(taskId) {
    const { history, lease, ...view } = this.#book.get(taskId);
    return view;
  }
}

/** Sweep steps grouped by task (stable: a task's steps keep their order), tasks by id. */
function byTask(swept) {
  return [...swept].sort((x, y) => (x.taskId < y.taskId ? -1 : x.taskId > y.taskId ? 1 : 0));
}

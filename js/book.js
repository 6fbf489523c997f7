// TaskBook and the pure functions (the `full` build only): many tasks
// kept inside WebAssembly, O(1) per event.

import * as raw from "./taskwire_wasm.js";
import { call, text, str, num, invalid, typeName, parse } from "./api.js";

// ---- pure functions -------------------------------------------------------

/** A queued task at version 0, history included. */
export function createTask(input) {
  const json = text(input, "input");
  return parse(call(() => raw.create_task(json)));
}

/** Applies one event to a task (history included): the seed's transition. */
export function applyEvent(task, event) {
  const e = text(event, "event");
  const t = text(task, "task");
  return parse(call(() => raw.apply_event(t, e)));
}

/** Expires a task now (recorded at `expiresAtMs`). */
export function expireTask(task) {
  const t = text(task, "task");
  return parse(call(() => raw.expire_task(t)));
}

/**
 * Whether a backend holds a long-poll (PROTOCOL.md §Resume): it asked to
 * wait, its answer is `caught-up`, what it follows is `live`, and the
 * request's `epoch` (undefined without one) is the store's. Core's rule,
 * for backends written in JavaScript.
 */
export function worthHolding(request) {
  // Read through JSON, as every other input: a throwing getter or a
  // revoked proxy is a coded error, not a TypeError.
  const { waitMs, mode, live, askedEpoch, epoch } = parse(text(request, "request")) ?? {};
  if (typeof live !== "boolean") throw invalid(`request.live: must be a boolean, got ${typeName(live)}`);
  const asked = askedEpoch === undefined ? undefined : str(askedEpoch, "request.askedEpoch");
  return call(() => raw.worth_holding(num(waitMs, "request.waitMs"), str(mode, "request.mode"), live, asked, str(epoch, "request.epoch")));
}

/**
 * Which answer a batch's follower at `cursor` gets from a batch whose
 * cursor is `seq` (PROTOCOL.md §Follow a batch): `"snapshot"` when asked
 * (`snapshot`), at 0, or past `seq`; `"caught-up"` at `seq`; else
 * `"delta"`. Core's rule, for backends written in JavaScript.
 */
export function planBatch(seq, cursor, snapshot = false) {
  return call(() => raw.plan_batch(num(seq, "seq"), num(cursor, "cursor"), snapshot === true));
}

// ---- live output ----------------------------------------------------------

/**
 * Checks a live-output stream name (PROTOCOL.md §Live output): 1 to 64
 * characters of `a-z`, `0-9`, `-`, `_`. Throws an `invalid-request` error
 * naming `field`. Core's rule, for backends written in JavaScript.
 */
export function checkStreamName(name, field = "stream") {
  str(field, "field");
  str(name, field);
  call(() => raw.output_stream_name(name, field));
}

/**
 * One live-output stream as a backend keeps it: the newest attempt's
 * text, judged and served by core's `OutputLog` inside WebAssembly (so a
 * backend in JavaScript decides nothing about output itself). Each call
 * says where the task is now (its attempt, whether it is live).
 */
export class OutputLog {
  #handle = call(() => new raw.OutputLogHandle());

  /**
   * Judges the chunk `{attempt, offset, text}` (errors name
   * `field.attempt`, `field.offset`, `field.text`) for a task at
   * `taskAttempt`, `live` or ended: `{reason, accepted, added, offset,
   * superseded, attempt, expected}`. Only `appended` changes the stream.
   */
  append(chunk, taskAttempt, live, field = "chunk") {
    str(field, "field");
    // Read through JSON, as every other input: a throwing getter or a
    // revoked proxy is a coded error, not a TypeError.
    const read = parse(text(chunk, field));
    if (read === null || typeof read !== "object" || Array.isArray(read)) throw invalid(`${field}: must be an object, got ${typeName(chunk)}`);
    const { attempt, offset, text: chunkText } = read;
    num(attempt, `${field}.attempt`);
    num(offset, `${field}.offset`);
    str(chunkText, `${field}.text`);
    num(taskAttempt, "taskAttempt");
    const handle = this.#live();
    return parse(call(() => handle.append(attempt, offset, chunkText, taskAttempt, live === true, field)));
  }

  /**
   * What a follower holding `attempt`'s text up to `offset` lacks, for a
   * task at `taskAttempt`, `live` or ended: `{attempt, offset, text,
   * complete, news}` (`news`: a long-poll is answered at once).
   */
  since(attempt, offset, taskAttempt, live) {
    num(attempt, "outputAttempt");
    num(offset, "outputOffset");
    num(taskAttempt, "taskAttempt");
    const handle = this.#live();
    return parse(call(() => handle.since(attempt, offset, taskAttempt, live === true)));
  }

  /** The attempt whose text the stream holds (0 before any). */
  get attempt() {
    const handle = this.#live();
    return call(() => handle.attempt());
  }

  /** The stream's length in UTF-16 code units. */
  get units() {
    const handle = this.#live();
    return call(() => handle.units());
  }

  #live() {
    if (this.#handle === undefined) throw invalid("OutputLog: used after free()");
    return this.#handle;
  }

  /** Releases the wasm memory now (otherwise the garbage collector does). */
  free() {
    this.#handle?.free();
    this.#handle = undefined;
  }

  [Symbol.dispose]() {
    this.free();
  }
}

// ---- TaskBook -------------------------------------------------------------

/** Many tasks with callback dedup, outbox, resume and idempotent delivery. */
export class TaskBook {
  #handle;

  constructor(options = {}) {
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    let retention;
    try {
      retention = options.retentionVersions ?? 8;
    } catch (e) {
      throw invalid(`options.retentionVersions: cannot be read (${e instanceof Error ? e.message : String(e)})`);
    }
    num(retention, "retentionVersions");
    this.#handle = call(() => new raw.BookHandle(retention));
  }

  #book() {
    if (this.#handle === undefined) throw invalid("TaskBook: used after free()");
    return this.#handle;
  }

  create(input) {
    const json = text(input, "input");
    const book = this.#book();
    return parse(call(() => book.create(json)));
  }

  get(id) {
    str(id, "id");
    const book = this.#book();
    const json = call(() => book.get(id));
    return json === "null" ? undefined : parse(json);
  }

  /** The task's timeline answer as JSON text (PROTOCOL.md §Timeline), or undefined. */
  timelineJson(taskId) {
    str(taskId, "taskId");
    const book = this.#book();
    const json = call(() => book.timeline(taskId));
    return json === "null" ? undefined : json;
  }

  apply(taskId, event, callbackId) {
    str(taskId, "taskId");
    const json = text(event, "event");
    if (callbackId !== undefined && callbackId !== null) str(callbackId, "callbackId");
    const book = this.#book();
    return parse(call(() => book.apply(taskId, json, callbackId ?? undefined)));
  }

  redelivered(taskId, event) {
    str(taskId, "taskId");
    const json = text(event, "event");
    const book = this.#book();
    return parse(call(() => book.redelivered(taskId, json)));
  }

  applyAt(taskId, event, callbackId, nowMs) {
    str(taskId, "taskId");
    const json = text(event, "event");
    if (callbackId !== undefined && callbackId !== null) str(callbackId, "callbackId");
    num(nowMs, "nowMs");
    const book = this.#book();
    return parse(call(() => book.apply_at(taskId, json, callbackId ?? undefined, nowMs)));
  }

  resume(taskId, cursor) {
    str(taskId, "taskId");
    num(cursor, "cursor");
    const book = this.#book();
    return parse(call(() => book.resume(taskId, cursor)));
  }

  /** The resume answer as JSON text: what an HTTP backend sends as is. */
  resumeJson(taskId, cursor) {
    str(taskId, "taskId");
    num(cursor, "cursor");
    const book = this.#book();
    return call(() => book.resume(taskId, cursor));
  }

  deliverResult(taskId, key, nowMs) {
    str(taskId, "taskId");
    str(key, "idempotencyKey");
    num(nowMs, "nowMs");
    const book = this.#book();
    return parse(call(() => book.deliver(taskId, key, nowMs)));
  }

  expireDue(nowMs) {
    num(nowMs, "nowMs");
    const book = this.#book();
    return parse(call(() => book.expire_due(nowMs)));
  }

  /** Every lifecycle step due by `nowMs` (leases, grace periods, deadlines): `[{taskId, state, reason}]`. */
  sweepDue(nowMs) {
    num(nowMs, "nowMs");
    const book = this.#book();
    return parse(call(() => book.sweep_due(nowMs)));
  }

  drainNotifications() {
    const book = this.#book();
    return parse(call(() => book.drain()));
  }

  /** The number of tasks. */
  get size() {
    const book = this.#book();
    return call(() => book.size());
  }

  /** Releases the wasm memory now (otherwise the garbage collector does). */
  free() {
    this.#handle?.free();
    this.#handle = undefined;
  }

  [Symbol.dispose]() {
    this.free();
  }
}


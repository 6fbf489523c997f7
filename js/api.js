// The public JavaScript API of the `taskwire` package, over the wasm
// bindings in ./taskwire_wasm.js. Values cross the boundary as JSON text
// (one crossing per call; see wasm/src/lib.rs for why). This layer only
// converts: every rule lives in Rust (taskwire-core).

import * as raw from "./taskwire_wasm.js";

let ready = false;

/** Marks the module as initialised (called by the entry points). */
export function markReady() {
  ready = true;
}

/** True once the WebAssembly module is instantiated. */
export function isReady() {
  return ready;
}

/**
 * The error every taskwire call throws: an `Error` with a stable `code`
 * (`invalid-request`, `not-found`, `task-exists`, `not-initialized`) and a
 * message that names the field.
 */
export class TaskwireError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "TaskwireError";
    this.code = code;
  }
}

function invalid(message) {
  return new TaskwireError("invalid-request", message);
}

/** Turns what the bindings throw (`"code\tmessage"`) into a TaskwireError. */
function convert(e) {
  if (typeof e === "string") {
    const tab = e.indexOf("\t");
    return tab < 0 ? new TaskwireError("invalid-request", e) : new TaskwireError(e.slice(0, tab), e.slice(tab + 1));
  }
  if (e instanceof TaskwireError) return e;
  // Anything else is a bug here (a wasm trap would be a RuntimeError);
  // keep it an Error with a code so callers can rely on `.code`.
  const err = new TaskwireError("internal", e instanceof Error ? e.message : String(e));
  err.cause = e;
  return err;
}

function check() {
  if (!ready) {
    throw new TaskwireError(
      "not-initialized",
      "taskwire: call `await init()` once before using the API (Node initialises on import)",
    );
  }
}

/** Calls into wasm, converting thrown values. */
function call(fn) {
  check();
  try {
    return fn();
  } catch (e) {
    throw convert(e);
  }
}

// Inputs larger than this are refused before they reach wasm memory: a
// runaway allocation would abort the module, and no legitimate call needs
// it (a resume answer of 1,000 events is ~150 KB).
const MAX_TEXT = 32 * 1024 * 1024;

/** JSON text of a value, or a TaskwireError naming `field`. */
function text(value, field) {
  if (typeof value === "string" && value.length > MAX_TEXT) throw invalid(`${field}: too large`);
  let out;
  try {
    out = JSON.stringify(value);
  } catch (e) {
    // Cycles, BigInt, getters that throw.
    throw invalid(`${field}: cannot be read as JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  if (out === undefined) throw invalid(`${field}: required`);
  if (out.length > MAX_TEXT) throw invalid(`${field}: too large`);
  return out;
}

function str(value, field) {
  if (typeof value !== "string") throw invalid(`${field}: must be a string, got ${typeName(value)}`);
  if (value.length > MAX_TEXT) throw invalid(`${field}: too large`);
  return value;
}

function num(value, field) {
  if (typeof value !== "number") throw invalid(`${field}: must be a number, got ${typeName(value)}`);
  return value;
}

function typeName(value) {
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

function parse(json) {
  return JSON.parse(json);
}

/** Helpers shared with book.js and client.js (not part of the public API). */
export const __internal = { call, text, str, num, invalid, typeName, parse, convert };

// ---- TaskMirror -----------------------------------------------------------

const fromHandle = Symbol("fromHandle");

/** One task as a client knows it; merges resume answers, never regresses. */
export class TaskMirror {
  #handle;
  #task;
  #taskId;

  constructor(taskId, handle) {
    if (taskId === fromHandle) {
      this.#handle = handle;
      const json = call(() => handle.task());
      this.#task = json === "null" ? undefined : parse(json);
      this.#taskId = call(() => handle.task_id());
      return;
    }
    str(taskId, "taskId");
    this.#handle = call(() => new raw.MirrorHandle(taskId));
    this.#task = undefined;
    this.#taskId = taskId;
  }

  /** A mirror that starts from a known task (a view; history is ignored). */
  static fromSnapshot(task) {
    const json = text(task, "task");
    return new TaskMirror(fromHandle, call(() => raw.MirrorHandle.from_snapshot(json)));
  }

  /** A mirror from what `toJSON()` produced (an object, or its JSON text). */
  static fromJSON(value) {
    const json = typeof value === "string" ? str(value, "mirror") : text(value, "mirror");
    return new TaskMirror(fromHandle, call(() => raw.MirrorHandle.from_json(json)));
  }

  #mirror() {
    if (this.#handle === undefined) throw invalid("TaskMirror: used after free()");
    return this.#handle;
  }

  /** Merges a resume answer object. */
  merge(answer) {
    return this.mergeJson(text(answer, "answer"));
  }

  /**
   * Merges a resume answer given as JSON text (e.g. a response body):
   * parsed in Rust, one crossing, no `JSON.parse` in JavaScript.
   */
  mergeJson(json) {
    str(json, "answer");
    const mirror = this.#mirror();
    const merged = parse(call(() => mirror.merge(json)));
    if (merged.task !== undefined) this.#task = merged.task;
    return merged.outcome;
  }

  /** The task as known (without history), or undefined. */
  get task() {
    return this.#task;
  }

  /** The version known: the cursor to resume from. */
  get version() {
    return this.#task?.version ?? 0;
  }

  /** The state known, or undefined. */
  get state() {
    return this.#task?.state;
  }

  /** The progress known (0 when nothing is). */
  get progress() {
    return this.#task?.progress ?? 0;
  }

  /** The task id. */
  get taskId() {
    return this.#taskId;
  }

  /** `{taskId, task}`: persist it, restore with `TaskMirror.fromJSON`. */
  toJSON() {
    const mirror = this.#mirror();
    return parse(call(() => mirror.to_json()));
  }

  free() {
    this.#handle?.free();
    this.#handle = undefined;
  }

  [Symbol.dispose]() {
    this.free();
  }
}

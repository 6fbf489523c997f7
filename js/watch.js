// The watches of TaskClient, a task's (`Watch`) and a batch's
// (`BatchWatch`), over one loop (`Loop`): listeners for
// `online`/`offline`/`visibilitychange`, finding localStorage, and turning
// the loop's events into callbacks and the `done` promise. Every decision
// is the Rust loop's (taskwire-core's Follow).

import { text, str, maybeNum, options as object, invalid, typeName } from "./api.js";

export function isOnline() {
  const nav = globalThis.navigator;
  return !(nav && nav.onLine === false);
}

/** localStorage, if this runtime has a usable one (never throws). */
export function localStore() {
  try {
    const s = globalThis.localStorage;
    return s && typeof s.getItem === "function" ? s : undefined;
  } catch {
    return undefined; // access denied (e.g. disabled storage)
  }
}

/**
 * Calls a user listener. Its errors must not unwind through wasm (the
 * loop would lose its place), nor stop the watch: they are reported the
 * way the runtime reports an uncaught error in an event listener
 * (`reportError` in windows and workers), or logged where there is no
 * such thing (Node 20).
 */
function safely(fn, value) {
  if (typeof fn !== "function") return;
  try {
    fn(value);
  } catch (e) {
    if (typeof globalThis.reportError === "function") globalThis.reportError(e);
    else console.error("taskwire: a watch listener threw:", e);
  }
}

/** Reads an option, turning a throwing getter into a coded error. */
export function option(options, key) {
  try {
    return options[key];
  } catch (e) {
    throw invalid(`options.${key}: cannot be read (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** `options[name]` for each name: undefined, or a function. */
function listeners(options, names) {
  const out = {};
  for (const name of names) {
    const fn = option(options, name);
    if (fn !== undefined && typeof fn !== "function") throw invalid(`options.${name}: must be a function`);
    out[name] = fn;
  }
  return out;
}

/**
 * One running follow loop, of a task or a batch: its handle, the
 * runtime's listeners, the status and the `done` promise. `open(sink)`
 * starts the loop: in this tab (a wasm `WatchHandle`), or through the
 * leader tab (./tab-watch.js `shared`); `apply(kind, payload)` takes
 * `update`, `progress` and `done` (and returns what `done` resolves
 * with).
 */
class Loop {
  handle;
  status = { state: "connecting" };
  #cleanup = [];

  constructor(open, on, apply) {
    let resolve, reject;
    this.done = new Promise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // `stop()` rejects `done`; nobody is obliged to await it.
    this.done.catch(() => {});
    const sink = (kind, payload) => {
      // `fail` carries the TaskwireError itself; the rest, the event's
      // object (parsed by ./follow.js, or from the leader tab).
      if (kind === "fail") {
        this.#detach();
        reject(payload);
        return;
      }
      if (kind === "status") {
        this.status = payload;
        if (payload.state === "closed") this.#detach();
        safely(on.onStatus, payload);
      } else if (kind === "reject") {
        safely(on.onReject, payload);
      } else if (kind === "done") {
        resolve(apply(kind, payload));
      } else {
        apply(kind, payload);
      }
    };
    this.handle = open(sink);
    this.#attach();
  }

  /**
   * Reconnect at once when the network changes or the page is shown. On
   * `online`/`offline` the request in flight is cut too: it may hang on a
   * connection that died with the old network.
   */
  #attach() {
    const network = () => this.handle?.network();
    const target = globalThis;
    if (typeof target.addEventListener === "function") {
      for (const type of ["online", "offline"]) {
        target.addEventListener(type, network);
        this.#cleanup.push(() => target.removeEventListener(type, network));
      }
    }
    const doc = globalThis.document;
    if (doc && typeof doc.addEventListener === "function") {
      const onVisible = () => {
        if (doc.visibilityState === "visible") this.handle?.visible();
      };
      doc.addEventListener("visibilitychange", onVisible);
      this.#cleanup.push(() => doc.removeEventListener("visibilitychange", onVisible));
    }
  }

  #detach() {
    for (const undo of this.#cleanup.splice(0)) undo();
  }

  stop() {
    this.handle?.stop();
    this.#detach();
  }

  /** Stops and frees the wasm memory. */
  dispose() {
    this.stop();
    const handle = this.handle;
    this.handle = undefined;
    handle?.free();
  }
}

/** Checks `options` and its `cursor`; the listeners named. */
function watchOptions(options, names) {
  const cursor = maybeNum(option(object(options), "cursor"), "options.cursor");
  return { cursor, on: listeners(options, names) };
}

/**
 * Follows one task; made by `TaskClient.watch`. `open(sink, cursor,
 * seed)` starts it: in this tab (a wasm `WatchHandle`), or through the
 * leader tab (`shared`); `seed()` is what the watch holds now.
 */
export class Watch {
  #loop;
  #task;

  constructor(taskId, options, open) {
    str(taskId, "taskId");
    const { cursor, on } = watchOptions(options, ["onUpdate", "onStatus", "onReject"]);
    const start = (sink) => open(sink, cursor, () => ({ task: this.#task, cursor }));
    this.#loop = new Loop(start, on, (kind, payload) => {
      this.#task = payload.task ?? this.#task;
      if (kind === "update") safely(on.onUpdate, payload);
      return this.#task;
    });
    const initial = this.#loop.handle.initial();
    if (initial !== "null") this.#task = JSON.parse(initial);
    this.done = this.#loop.done;
  }

  /** The task as known (no history), or undefined before the first answer. */
  get task() {
    return this.#task;
  }

  /** The version known: the cursor of the next request. */
  get version() {
    return this.#task?.version ?? 0;
  }

  /** The last status reported. */
  get status() {
    return this.#loop.status;
  }

  /** Stops now: aborts the request in flight, cancels timers; `done` rejects with code `stopped`. */
  stop() {
    this.#loop.stop();
  }

  /** `using watch = client.watch(…)`: stops the watch and frees its memory at the end of the scope. */
  [Symbol.dispose]() {
    this.#loop.dispose();
  }
}

/**
 * Follows a batch over one held request; made by `TaskClient.watchBatch`.
 * `open(start, sink)` starts it in this tab, from `start` (what is known:
 * a snapshot answer's JSON text) when given.
 */
export class BatchWatch {
  #loop;
  #tasks = [];
  #index = new Map();
  #progress;
  #cursor = 0;

  constructor(batchId, options, open) {
    str(batchId, "batchId");
    const { cursor, on } = watchOptions(options, ["onUpdate", "onProgress", "onStatus", "onReject"]);
    const tasks = option(options, "tasks");
    if (tasks !== undefined && !Array.isArray(tasks)) throw invalid(`options.tasks: must be an array of tasks, got ${typeName(tasks)}`);
    if ((cursor === undefined) !== (tasks === undefined)) {
      // The batch cursor and the tasks as known at it go together.
      const [missing, given] = cursor === undefined ? ["cursor", "tasks"] : ["tasks", "cursor"];
      throw invalid(`options.${missing}: required with options.${given}`);
    }
    // What is known, as the snapshot answer the batch is stored as: the
    // wasm side reads both with the server's reader. Every task counts
    // open until the first answer says otherwise.
    const start = tasks && text({ batchId, mode: "snapshot", cursor, size: tasks.length, open: tasks.length, tasks: tasks.map((task) => ({ mode: "snapshot", task })) }, "options");
    // What this watch holds, for a leader tab that takes over (./tabs.js):
    // its tasks and the cursor they were read at, and the batch's size.
    const seed = () => ({ cursor: this.cursor, size: this.#progress?.size ?? 0, tasks: this.#tasks });
    this.#loop = new Loop((sink) => open(start, sink, seed), on, (kind, payload) => {
      if (kind === "update") {
        if (payload.task) this.#put(payload.task);
        safely(on.onUpdate, payload);
      } else if (kind === "progress") {
        this.#progress = payload;
        safely(on.onProgress, payload);
      }
      return this.tasks;
    });
    for (const { task } of JSON.parse(this.#loop.handle.initial()).tasks) this.#put(task);
    this.done = this.#loop.done;
  }

  #put(task) {
    const at = this.#index.get(task.id);
    if (at === undefined) {
      this.#index.set(task.id, this.#tasks.length);
      this.#tasks.push(task);
    } else {
      this.#tasks[at] = task;
    }
  }

  /** The tasks as known (no history), in item order; empty before the first answer. */
  get tasks() {
    return this.#tasks.slice();
  }

  /** One task as known, by id. */
  task(id) {
    const at = this.#index.get(id);
    return at === undefined ? undefined : this.#tasks[at];
  }

  /** The batch cursor known: the cursor of the next request. */
  get cursor() {
    const handle = this.#loop.handle;
    if (handle) this.#cursor = handle.cursor();
    return this.#cursor;
  }

  /** The aggregate last reported, or undefined before the batch is known. */
  get progress() {
    return this.#progress;
  }

  /** The last status reported. */
  get status() {
    return this.#loop.status;
  }

  /** Stops now: aborts the request in flight, cancels timers; `done` rejects with code `stopped`. */
  stop() {
    this.#loop.stop();
  }

  /** `using watch = client.watchBatch(…)`: stops the watch and frees its memory at the end of the scope. */
  [Symbol.dispose]() {
    void this.cursor; // kept: the handle goes
    this.#loop.dispose();
  }
}

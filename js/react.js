// taskwire/react: React hooks over a TaskClient (`taskwire/client`).
//
// Plain JavaScript with no wasm of its own: the page brings its client,
// and React (an optional peer dependency) is imported from the page's
// own copy. The rule every hook keeps: a request the hook started is
// stopped when the component lets go of it (unmount, a StrictMode
// effect replay, another task or batch id), so no held long-poll is
// left behind.

import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";

/** A misuse of a hook: an Error with the package's code for bad input. */
function invalid(message) {
  const error = new TypeError(message);
  error.code = "invalid-request";
  return error;
}

function checkClient(hook, client, method) {
  if (client === null || typeof client !== "object" || typeof client[method] !== "function") {
    throw invalid(`${hook}: client must be a TaskClient`);
  }
}

function checkId(hook, name, id) {
  if (id !== undefined && id !== null && (typeof id !== "string" || id === "")) {
    throw invalid(`${hook}: ${name} must be a non-empty string, null or undefined`);
  }
}

/** `options` is undefined or an object whose `listeners` are undefined or functions. */
function checkOptions(hook, options, listeners) {
  if (options === undefined) return;
  if (options === null || typeof options !== "object") throw invalid(`${hook}: options must be an object`);
  for (const name of listeners) {
    const listener = options[name];
    if (listener !== undefined && typeof listener !== "function") throw invalid(`${hook}: options.${name} must be a function`);
  }
}

const IDLE = Object.freeze({ state: "idle" });
const CONNECTING = Object.freeze({ state: "connecting" });

/**
 * An external store over one watch at a time, for `useSyncExternalStore`:
 * one per (client, id). It holds no watch until React subscribes, and
 * stops its watch when the last subscriber leaves, so React may create
 * stores during renders it throws away, and replay subscriptions
 * (StrictMode) at no cost. The snapshot object changes only when a
 * subclass publishes what the watch knows that the snapshot lacks
 * (`catchUp`), or the status or error changes: that is what makes React
 * re-render. A subclass starts its watch in `open(live)`, with each of
 * the watch's listeners wrapped in `live`.
 */
class WatchStore {
  #listeners = new Set();
  /** The running watch, `{watch}`, from its start until the store stops it. */
  #run;
  #watched;
  #latestOptions;

  constructor(snapshot, watched, latestOptions) {
    this.snapshot = snapshot;
    this.#watched = watched;
    this.#latestOptions = latestOptions;
  }

  subscribe = (listener) => {
    this.#listeners.add(listener);
    if (this.#watched && this.#run === undefined) this.#start();
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size > 0 || this.#run === undefined) return;
      const stopping = this.#run;
      this.#run = undefined;
      stopping.watch.stop();
    };
  };

  getSnapshot = () => this.snapshot;

  publish(change) {
    this.snapshot = { ...this.snapshot, ...change };
    for (const listener of this.#listeners) listener();
  }

  /**
   * A status equal to the one shown changes nothing: a watch's first
   * status is the `connecting` the store already shows.
   */
  showStatus(status) {
    const shown = this.snapshot.status;
    if (status.state !== shown.state || status.attempt !== shown.attempt || status.retryInMs !== shown.retryInMs || status.error !== shown.error) this.publish({ status });
  }

  /** Calls the page's latest listener `name`, if it gave one. */
  relay(name, value) {
    this.#latestOptions.current?.[name]?.(value);
  }

  #start() {
    if (this.snapshot.error !== undefined) this.publish({ error: undefined });
    const run = {};
    this.#run = run;
    // Callbacks of a watch that was stopped are dropped: only the
    // current one may change the snapshot.
    const live = (listener) => (value) => {
      if (this.#run === run) listener(value);
    };
    try {
      run.watch = this.open(live);
    } catch (error) {
      this.#run = undefined;
      this.publish({ error, status: { state: "closed" } });
      return;
    }
    this.catchUp(run.watch);
    run.watch.done.then(
      live(() => this.catchUp(run.watch)),
      live((error) => {
        // `stopped` is the hook's own doing, not the watch's.
        if (error?.code !== "stopped") this.publish({ error });
      }),
    );
  }
}

/**
 * `task` with the `kind` and `input` of `shown` (the same task, as the
 * page gave it: a create answer) where it lacks them: resume answers
 * carry the task's view only, and a hook's task would lose them at its
 * first update.
 */
function withOrigin(task, shown) {
  if (shown?.id !== task.id) return task;
  const origin = {};
  for (const key of ["kind", "input"]) if (!(key in task) && key in shown) origin[key] = shown[key];
  return Object.keys(origin).length ? { ...task, ...origin } : task;
}

/** The store behind `useTask`: the snapshot changes when the task's version rises. */
class TaskStore extends WatchStore {
  #client;
  #taskId;

  constructor(client, taskId, initial, latestOptions) {
    // A task the page already holds (e.g. the one useCreateTask created) is
    // shown until the watch knows a newer version: a watch from scratch
    // learns nothing while the task does not change.
    const known = initial?.id === taskId ? initial : undefined;
    super(taskId === undefined ? { task: undefined, status: IDLE, error: undefined } : { task: known, status: CONNECTING, error: undefined }, taskId !== undefined, latestOptions);
    this.#client = client;
    this.#taskId = taskId;
  }

  open(live) {
    return this.#client.watch(this.#taskId, {
      onUpdate: live((update) => {
        this.#take(update.task, update.reason === "epoch-changed");
        this.relay("onUpdate", update);
      }),
      onStatus: live((status) => this.showStatus(status)),
      onReject: live((rejection) => this.relay("onReject", rejection)),
    });
  }

  catchUp(watch) {
    this.#take(watch.task, false);
  }

  #take(task, epochChanged) {
    const shown = this.snapshot.task;
    if (task !== undefined && (epochChanged || shown === undefined || task.version > shown.version)) this.publish({ task: withOrigin(task, shown) });
  }
}

/**
 * The store behind `useTaskBatch`: the snapshot changes when the batch
 * cursor rises, or an epoch change starts the batch's history over (the
 * cursor may then be lower).
 */
class BatchStore extends WatchStore {
  #client;
  #batchId;
  /** The watch's start, from `initial`: its cursor and tasks. */
  #start;

  constructor(client, batchId, initial, latestOptions) {
    // As in TaskStore: the batch the page created is shown at once.
    const known = initial?.batchId === batchId ? initial : undefined;
    const empty = { tasks: [], progress: undefined, cursor: 0, error: undefined };
    const first = known ? { ...empty, tasks: known.tasks.slice(), cursor: known.cursor } : empty;
    super({ ...first, status: batchId === undefined ? IDLE : CONNECTING }, batchId !== undefined, latestOptions);
    this.#client = client;
    this.#batchId = batchId;
    this.#start = known && { cursor: known.cursor, tasks: known.tasks };
  }

  open(live) {
    let watch;
    let restarted = false;
    let queued = false;
    // One answer brings an update for each task that changed, then the
    // aggregate, in one go, and the watch's cursor has moved before the
    // first of them: the snapshot is taken once, after the last.
    const settle = () => {
      if (queued) return;
      queued = true;
      queueMicrotask(
        live(() => {
          queued = false;
          this.catchUp(watch, restarted);
          restarted = false;
        }),
      );
    };
    watch = this.#client.watchBatch(this.#batchId, {
      ...this.#start,
      onUpdate: live((update) => {
        restarted ||= update.reason === "epoch-changed";
        settle();
        this.relay("onUpdate", update);
      }),
      onProgress: live((progress) => {
        settle();
        this.relay("onProgress", progress);
      }),
      onStatus: live((status) => this.showStatus(status)),
      onReject: live((rejection) => this.relay("onReject", rejection)),
    });
    return watch;
  }

  /**
   * Takes the watch's view when its cursor is above the one shown, or
   * an epoch change `restarted` the history; at the same cursor, only
   * the aggregate a snapshot made from `initial` lacks.
   */
  catchUp(watch, restarted = false) {
    const shown = this.snapshot;
    const cursor = watch.cursor;
    const progressLearned = cursor === shown.cursor && shown.progress === undefined && watch.progress !== undefined;
    if (restarted || cursor > shown.cursor || progressLearned) this.publish({ tasks: watch.tasks, progress: watch.progress, cursor });
  }
}

/**
 * The store `create(latestOptions)` makes for (client, id), as React
 * sees it. The listeners in `options` may change on every render without
 * restarting the watch: the store calls the latest.
 */
function useWatchStore(client, id, options, create) {
  const latestOptions = useRef(options);
  useEffect(() => {
    latestOptions.current = options;
  });
  const store = useMemo(() => create(latestOptions), [client, id]);
  return useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);
}

/**
 * Follows one task: `{task, status, error}`, re-rendering only when the
 * task's version rises or the status or error changes. `taskId` null or
 * undefined: nothing is watched (`status.state` is `"idle"`).
 */
export function useTask(client, taskId, options) {
  checkClient("useTask", client, "watch");
  checkId("useTask", "taskId", taskId);
  checkOptions("useTask", options, ["onUpdate", "onReject"]);
  const initial = options?.initial;
  if (initial !== undefined && (initial === null || typeof initial !== "object" || typeof initial.version !== "number")) {
    throw invalid("useTask: options.initial must be a task (with a numeric version)");
  }
  const id = taskId ?? undefined;
  return useWatchStore(client, id, options, (latest) => new TaskStore(client, id, initial, latest));
}

/**
 * Follows every task of a batch: `{tasks, progress, cursor, status,
 * error}`, re-rendering only when the batch cursor rises (or an epoch
 * change starts its history over), or the status or error changes.
 * `batchId` null or undefined: nothing is watched (`status.state` is
 * `"idle"`).
 */
export function useTaskBatch(client, batchId, options) {
  checkClient("useTaskBatch", client, "watchBatch");
  checkId("useTaskBatch", "batchId", batchId);
  checkOptions("useTaskBatch", options, ["onUpdate", "onProgress", "onReject"]);
  const initial = options?.initial;
  if (initial !== undefined && (initial === null || typeof initial !== "object" || typeof initial.batchId !== "string" || typeof initial.cursor !== "number" || !Array.isArray(initial.tasks))) {
    throw invalid("useTaskBatch: options.initial must be a created batch (with its batchId, cursor and tasks)");
  }
  const id = batchId ?? undefined;
  return useWatchStore(client, id, options, (latest) => new BatchStore(client, id, initial, latest));
}

/** A fresh idempotency key: 128 random bits. */
function newKey() {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID === "function") return c.randomUUID();
  const bytes = c.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const NOT_CREATED = Object.freeze({ task: undefined, pending: false, error: undefined });

/**
 * Creates tasks with one idempotency key per submit, so that a double
 * click creates one task. A submit is one request until `reset()`: a
 * call while it is pending returns the same promise (one request), a
 * call with the same request after a failure retries under the same key,
 * and one after a success returns the task created. A different request
 * is a new submit with a new key.
 */
export function useCreateTask(client) {
  checkClient("useCreateTask", client, "createTask");
  const [state, setState] = useState(NOT_CREATED);
  // {body, key, promise (while pending), task (once created)}
  const submit = useRef(undefined);

  const create = useCallback(
    (request) => {
      const current = submit.current;
      if (current?.promise) return current.promise;
      let body;
      try {
        body = JSON.stringify(request);
      } catch {
        // The client refuses it with its TaskwireError (`invalid-request`
        // naming the input), which `error` then shows: one error type.
        body = undefined;
      }
      const same = current !== undefined && current.body === body && current.client === client;
      if (same && current.task !== undefined) return Promise.resolve(current.task);
      const entry = { body, client, key: same ? current.key : newKey(), task: undefined, promise: undefined };
      submit.current = entry;
      entry.promise = client.createTask(request, { idempotencyKey: entry.key }).then(
        (task) => {
          entry.promise = undefined;
          entry.task = task;
          if (submit.current === entry) setState({ task, pending: false, error: undefined });
          return task;
        },
        (error) => {
          entry.promise = undefined;
          if (submit.current === entry) setState({ task: undefined, pending: false, error });
          throw error;
        },
      );
      setState({ task: undefined, pending: true, error: undefined });
      return entry.promise;
    },
    [client],
  );

  /** Forgets the submit: the next `create` draws a new key. */
  const reset = useCallback(() => {
    submit.current = undefined;
    setState(NOT_CREATED);
  }, []);

  return useMemo(() => ({ ...state, create, reset }), [state, create, reset]);
}

// taskwire/react: React hooks over a TaskClient (`taskwire/client`).
//
// Plain JavaScript with no wasm of its own: the page brings its client,
// and React (an optional peer dependency) is imported from the page's
// own copy. The rule every hook keeps: a request the hook started is
// stopped when the component lets go of it (unmount, a StrictMode
// effect replay, another task id), so no held long-poll is left behind.

import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";

/** A misuse of a hook: an Error with the package's code for bad input. */
function invalid(message) {
  const error = new TypeError(message);
  error.code = "invalid-request";
  return error;
}

const IDLE = Object.freeze({ task: undefined, status: Object.freeze({ state: "idle" }), error: undefined });

/**
 * The external store behind `useTask`: one per (client, taskId). It holds
 * no watch until React subscribes, and stops its watch when the last
 * subscriber leaves, so React may create stores during renders it throws
 * away, and replay subscriptions (StrictMode) at no cost. The snapshot
 * object changes only when the task's version rises (or an epoch change
 * starts the history over), or the status or error changes: that is what
 * makes React re-render.
 */
function taskStore(client, taskId, initial, latestOptions) {
  // A task the page already holds (e.g. the one useCreateTask created) is
  // shown until the watch knows a newer version: a watch from scratch
  // learns nothing while the task does not change.
  const known = initial?.id === taskId ? initial : undefined;
  let snapshot = taskId === undefined ? IDLE : { task: known, status: { state: "connecting" }, error: undefined };
  const listeners = new Set();
  let watch;

  const publish = (change) => {
    snapshot = { ...snapshot, ...change };
    for (const listener of listeners) listener();
  };
  const isNewer = (task, epochChanged) => task !== undefined && (epochChanged || snapshot.task === undefined || task.version > snapshot.task.version);

  function start() {
    if (snapshot.error !== undefined) publish({ error: undefined });
    let started;
    try {
      started = client.watch(taskId, {
        // Callbacks of a watch that was stopped are dropped: only the
        // current one may change the snapshot.
        onUpdate: (update) => {
          if (watch !== started) return;
          if (isNewer(update.task, update.reason === "epoch-changed")) publish({ task: update.task });
          latestOptions.current?.onUpdate?.(update);
        },
        onStatus: (status) => {
          if (watch === started) publish({ status });
        },
        onReject: (rejection) => {
          if (watch === started) latestOptions.current?.onReject?.(rejection);
        },
      });
    } catch (error) {
      publish({ error, status: { state: "closed" } });
      return;
    }
    watch = started;
    if (isNewer(started.task, false)) publish({ task: started.task });
    started.done.then(
      (task) => {
        if (watch === started && isNewer(task, false)) publish({ task });
      },
      (error) => {
        // `stopped` is the hook's own doing, not the task's.
        if (watch === started && error?.code !== "stopped") publish({ error });
      },
    );
  }

  return {
    subscribe(listener) {
      listeners.add(listener);
      if (taskId !== undefined && watch === undefined) start();
      return () => {
        listeners.delete(listener);
        if (listeners.size > 0 || watch === undefined) return;
        const stopping = watch;
        watch = undefined;
        stopping.stop();
      };
    },
    getSnapshot: () => snapshot,
  };
}

/**
 * Follows one task: `{task, status, error}`, re-rendering only when the
 * task's version rises or the status or error changes. `taskId` null or
 * undefined: nothing is watched (`status.state` is `"idle"`).
 */
export function useTask(client, taskId, options) {
  if (client === null || typeof client !== "object" || typeof client.watch !== "function") {
    throw invalid("useTask: client must be a TaskClient");
  }
  if (taskId !== undefined && taskId !== null && (typeof taskId !== "string" || taskId === "")) {
    throw invalid("useTask: taskId must be a non-empty string, null or undefined");
  }
  if (options !== undefined && (options === null || typeof options !== "object")) throw invalid("useTask: options must be an object");
  const initial = options?.initial;
  if (initial !== undefined && (initial === null || typeof initial !== "object" || typeof initial.version !== "number")) {
    throw invalid("useTask: options.initial must be a task (with a numeric version)");
  }
  // The listeners may change on every render without restarting the watch.
  const latestOptions = useRef(options);
  useEffect(() => {
    latestOptions.current = options;
  });
  const store = useMemo(() => taskStore(client, taskId ?? undefined, initial, latestOptions), [client, taskId]);
  return useSyncExternalStore(store.subscribe, store.getSnapshot, store.getSnapshot);
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
  if (client === null || typeof client !== "object" || typeof client.createTask !== "function") {
    throw invalid("useCreateTask: client must be a TaskClient");
  }
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
      } catch (e) {
        return Promise.reject(invalid(`useCreateTask: request cannot be sent (${e instanceof Error ? e.message : String(e)})`));
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

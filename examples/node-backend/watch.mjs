// Held requests, for tasks and batches alike: a long-poll that waits for
// a change, and the parts of an SSE answer both streams share
// (PROTOCOL.md §Events stream (SSE), §Batch events (SSE)): the head,
// heartbeat comments, the end of a stream its browser token outlived, and
// the 204 that tells a standard EventSource to stop. The wake-ups come
// from the store's commit (`store.watch`): nothing here polls.

import { misreads } from "./misread.mjs";

/**
 * Task or batch id → the functions to call when it changes. The store
 * wakes them from its commit, once the change is on disk. (One map: the
 * server makes both kinds of id, `tsk_…` and `bat_…`, so they never meet.)
 */
export class Watchers {
  #sets = new Map();

  /** Calls `fn()` after each change of `id`; returns the unsubscribe. */
  watch(id, fn) {
    let set = this.#sets.get(id);
    if (!set) this.#sets.set(id, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0 && this.#sets.get(id) === set) this.#sets.delete(id);
    };
  }

  /** Calls the watchers of `id` with `args` (an append's stream name, for output watchers). */
  wake(id, ...args) {
    const set = this.#sets.get(id);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(...args);
      } catch (err) {
        console.error(`watcher of ${id} failed:`, err);
      }
    }
  }
}

/**
 * Resolves when `id` (a task or a batch) changes, `waitMs` passes or the
 * client goes away, whichever comes first. The caller then answers, unless
 * `res.destroyed`.
 */
export function changeOrTimeout(store, id, waitMs, res) {
  return new Promise((done) => {
    const finish = () => {
      clearTimeout(timer);
      unwatch();
      res.off("close", finish);
      done();
    };
    const unwatch = store.watch(id, finish);
    const timer = setTimeout(finish, waitMs);
    res.on("close", finish);
  });
}

/** 204 No Content: the starting cursor is already the end, nothing will follow. */
export function noContent(res) {
  res.writeHead(204, { "cache-control": "no-store" });
  res.end();
}

/**
 * Starts an event stream. `send(event, id, data)` writes one message,
 * `end()` ends the stream, `onClose(fn)` runs `fn` once the stream is
 * over, however it ends (the client left, `end()`, the token expired).
 */
export function openStream(res, caller, config) {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-store",
    "x-accel-buffering": "no",
  });
  const cleanups = [];
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    clearTimeout(expiry);
    for (const fn of cleanups) fn();
  };
  const live = () => !closed && !res.destroyed && !res.writableEnded;
  const heartbeat = setInterval(() => {
    if (live()) res.write(": hb\n\n");
  }, config.heartbeatMs);
  const end = () => {
    close();
    if (!res.writableEnded) res.end();
  };
  // A browser token's stream ends when the token stops being accepted;
  // the client reconnects with a fresh one.
  const expiresAt = caller.browser?.expiresAt;
  const expiry = expiresAt === undefined || misreads("sse-outlives-token")
    ? undefined
    : setTimeout(end, Math.max(0, (expiresAt + config.browserKeys.leewaySecs + 1) * 1000 - Date.now()));
  res.on("close", close);
  return {
    /** One message; without `id` (undefined) it has no id line (an `output` message). */
    send(event, id, data) {
      if (live()) res.write(`event: ${event}\n${id === undefined ? "" : `id: ${id}\n`}data: ${data}\n\n`);
    },
    end,
    onClose(fn) {
      if (closed) fn();
      else cleanups.push(fn);
    },
  };
}

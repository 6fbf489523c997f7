// A watch of a tab that shares (`shareAcrossTabs`): what must be there at
// once, when `watch()` returns, while the tab group (./tabs.js) is still
// being loaded: the handle the `Watch` drives, and the task persisted for
// it (the Rust side reads it for a watch of the tab's own).

import { TaskMirror, TaskwireError } from "./api.js";

/**
 * The handle of a watch that runs in the leader tab: `tabs` (a promise of
 * the tab group, ./tabs.js) delivers its events. `stop()` ends it as a
 * wasm watch ends: `fail` with code `stopped`, then `closed`.
 */
export function shared(tabs, kind, id, seed, sink, initial) {
  let ended, unsubscribe;
  const end = () => (ended = true) && unsubscribe?.();
  tabs.then((group) => {
    if (ended) return;
    unsubscribe = group.subscribe(kind, id, seed, (ev, data) => {
      if (ev === "done" || ev === "fail") end();
      sink(ev, ev === "fail" ? new TaskwireError(data.code, data.message, data.status) : data);
    });
  });
  return {
    stop() {
      if (ended) return;
      end();
      sink("fail", new TaskwireError("stopped", "the watch was stopped before the task ended"));
      sink("status", { state: "closed" });
    },
    initial: () => JSON.stringify(initial ?? null),
    visible() {},
    network() {},
    free() {},
  };
}

/**
 * The handle of a batch watch run by the leader tab: as [`shared`], plus
 * the batch cursor (a tab that takes over resumes the batch from it, by
 * delta). The leader marks the end of each answer with `answer` and its
 * cursor; the answer's events are held until then and delivered at once
 * with the cursor already moved, as a watch of the tab's own delivers
 * them (one message each would show a batch half updated at the new
 * cursor). `start` is the watch's own start (a snapshot answer's JSON),
 * if it was given one.
 */
export function sharedBatch(tabs, batchId, start, seed, sink) {
  const initial = start ? JSON.parse(start) : { tasks: [] };
  let cursor = initial.cursor ?? 0;
  const held = [];
  const track = (ev, data) => {
    if (ev === "answer") cursor = data.cursor;
    else if (ev !== "status" && ev !== "done" && ev !== "fail") return held.push([ev, data]);
    for (const [e, d] of held.splice(0)) sink(e, d);
    if (ev !== "answer") sink(ev, data);
  };
  return { ...shared(tabs, "batch", batchId, seed, track), initial: () => JSON.stringify(initial), cursor: () => cursor };
}

/** The task persisted in `storage` under `key`, as a watch in this tab would restore it (never throws). */
export function restored(storage, key, taskId) {
  try {
    const mirror = TaskMirror.fromJSON(storage.getItem(key));
    mirror.free();
    if (mirror.taskId === taskId) return mirror.task;
  } catch {
    // nothing sound there
  }
}

// The page's build (taskwire/client) has no steps (core's `steps`
// feature is off there, PROTOCOL.md §Steps): it must keep following a
// task that has a plan. A backend answers such a task with snapshots,
// whose `workflowVersion` and `steps` the page's reader ignores; a delta
// with a `step` event it cannot read, which is why backends never send
// one (vector steps-04). The full build (the Node backend's) reads both.

import assert from "node:assert/strict";
import { test } from "node:test";
import * as page from "../../dist/client/node.js";
import * as full from "../../dist/full/node.js";

const PLAN = { workflowVersion: "v1", steps: ["load", "publish"] };

/** A backend's book: a task with a plan, started, its first step done. */
function book() {
  const b = new full.TaskBook({ retentionVersions: 8 });
  b.create({ id: "t", nowMs: 0, ttlMs: 100_000, maxAttempts: 2, ...PLAN });
  b.apply("t", { type: "start", atMs: 1, worker: "w", attempt: 1 });
  b.apply("t", { type: "step", atMs: 2, name: "load", status: "succeeded", outputRef: "o", outputHash: "h", attempt: 1 });
  return b;
}

test("the page follows a task with a plan through the snapshot a backend sends, ignoring its steps", () => {
  const answer = book().resumeJson("t", 0);
  assert.equal(JSON.parse(answer).mode, "snapshot", "a task with a plan is never answered with a delta");
  const mirror = new page.TaskMirror("t");
  const outcome = mirror.mergeJson(answer);
  assert.equal(outcome.changed, true, JSON.stringify(outcome));
  assert.deepEqual([mirror.task.state, mirror.task.version, mirror.task.progress], ["running", 2, 50]);
  assert.equal(mirror.task.steps, undefined, "the page's view has no steps");
});

test("the full build's mirror keeps the steps of the same snapshot", () => {
  const mirror = new full.TaskMirror("t");
  mirror.mergeJson(book().resumeJson("t", 0));
  assert.deepEqual(mirror.task.steps.map((s) => [s.name, s.status]), [["load", "succeeded"], ["publish", "pending"]]);
});

test("a delta with a step event is an error to the page: why a backend sends a snapshot instead", () => {
  const delta = JSON.stringify({
    mode: "delta",
    events: [{ version: 1, event: { type: "step", atMs: 2, name: "load", status: "running", attempt: 1 } }],
  });
  assert.throws(() => new page.TaskMirror("t").mergeJson(delta), (e) => e instanceof Error && /type/.test(e.message));
});

// Behaviour of the package's JavaScript API beyond the shared vectors.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as tw from "../../dist/full/node.js";

const { TaskBook, TaskMirror, TaskwireError, createTask, applyEvent } = tw;
const input = { id: "t", nowMs: 0, ttlMs: 3_600_000, maxAttempts: 3 };
const start = { type: "start", atMs: 1200, worker: "w" };

test("errors are Error instances with a stable code and a field", () => {
  const book = new TaskBook();
  for (const [fn, code, field] of [
    [() => book.create({ ...input, ttlMs: -1 }), "invalid-request", "ttlMs"],
    [() => book.apply("nope", start), "not-found", "taskId"],
    [() => { book.create(input); book.create(input); }, "task-exists", "id"],
    [() => book.apply(42, start), "invalid-request", "taskId"],
    [() => book.resume("t", 1.5), "invalid-request", "cursor"],
    [() => book.resume("t", "3"), "invalid-request", "cursor"],
    [() => new TaskBook({ retentionVersions: -1 }), "invalid-request", "retentionVersions"],
    [() => new TaskMirror(""), "invalid-request", "taskId"],
    [() => TaskMirror.fromJSON("{"), "invalid-request", "mirror"],
  ]) {
    try {
      fn();
      assert.fail("no error");
    } catch (e) {
      assert.ok(e instanceof Error && e instanceof TaskwireError, String(e));
      assert.equal(e.code, code, e.message);
      assert.ok(e.message.startsWith(field), e.message);
    }
  }
});

test("createTask and applyEvent are the seed's pure functions", () => {
  const task = createTask(input);
  const t1 = applyEvent(task, start);
  assert.equal(t1.reason, "started");
  assert.deepEqual(t1.task.history, [{ version: 1, event: start }]);
  assert.equal(task.version, 0, "the input task is not modified");
});

test("get returns undefined for an unknown id and the history for a known one", () => {
  const book = new TaskBook();
  assert.equal(book.get("t"), undefined);
  book.create(input);
  book.apply("t", start, "cb-1");
  assert.equal(book.get("t").history.length, 1);
  assert.equal(book.size, 1);
});

test("a mirror persists through toJSON/fromJSON and JSON text", () => {
  const book = new TaskBook();
  book.create(input);
  book.apply("t", start);
  book.apply("t", { type: "progress", atMs: 2000, progress: 25, cursor: "c" });
  const mirror = new TaskMirror("t");
  const outcome = mirror.merge(book.resume("t", 0));
  assert.deepEqual(outcome.applied, [1, 2]);
  assert.equal(mirror.version, 2);
  assert.equal(mirror.progress, 25);
  assert.equal(mirror.state, "running");
  const saved = JSON.stringify(mirror);
  const restored = TaskMirror.fromJSON(JSON.parse(saved));
  assert.deepEqual(restored.task, mirror.task);
  assert.equal(restored.taskId, "t");
  assert.deepEqual(TaskMirror.fromJSON(saved).task, mirror.task);
  book.apply("t", { type: "progress", atMs: 3000, progress: 55, cursor: "c" });
  assert.deepEqual(restored.mergeJson(book.resumeJson("t", restored.version)).applied, [3]);
});

test("a stale snapshot never moves the mirror backwards", () => {
  const book = new TaskBook();
  book.create(input);
  book.apply("t", start);
  const old = book.resume("t", 5); // cursor ahead: snapshot at v1
  book.apply("t", { type: "progress", atMs: 2000, progress: 25, cursor: "c" });
  const mirror = TaskMirror.fromSnapshot(book.get("t"));
  const outcome = mirror.merge(old);
  assert.deepEqual(outcome.rejected, [{ version: 1, reason: "stale-snapshot" }]);
  assert.equal(mirror.version, 2);
});

test("free() makes later calls fail with a code, not a crash", () => {
  const book = new TaskBook();
  book.free();
  assert.throws(() => book.get("t"), (e) => e.code === "invalid-request");
  const mirror = new TaskMirror("t");
  mirror[Symbol.dispose]();
  assert.throws(() => mirror.toJSON(), (e) => e.code === "invalid-request");
});

test("init is a no-op in Node", async () => {
  await tw.init();
  tw.initSync();
  assert.equal(new TaskBook().size, 0);
});

test("TaskBook.sweepDue: a lapsed lease, then its grace period, each recorded when it fell due", () => {
  const book = new TaskBook();
  book.create({ id: "l", nowMs: 0, ttlMs: 3_600_000, maxAttempts: 2, unknownGraceMs: 1000 });
  book.create({ id: "d", nowMs: 0, ttlMs: 3_600_000, maxAttempts: 1, deadlineMs: 500 });
  const started = book.apply("l", { type: "start", atMs: 0, worker: "w", attempt: 1, leaseMs: 100 });
  assert.deepEqual(started.lease, { attempt: 1, expiresAtMs: 100, leaseMs: 100 });
  const beat = book.apply("l", { type: "heartbeat", atMs: 50, attempt: 1 });
  assert.deepEqual([beat.changed, beat.reason, beat.lease.expiresAtMs], [false, "heartbeat", 150]);
  assert.deepEqual(book.sweepDue(140), [], "nothing due yet");
  // Task by task, in the order their first step fell due.
  assert.deepEqual(book.sweepDue(10_000), [
    { taskId: "l", state: "unknown", reason: "lease-lapsed" },
    { taskId: "l", state: "queued", reason: "requeued" },
    { taskId: "d", state: "timed_out", reason: "timed-out" },
  ]);
  assert.deepEqual(book.get("l").history.slice(1).map((e) => e.event), [
    { type: "lapse", atMs: 150, attempt: 1 },
    { type: "abandon", atMs: 1150 },
  ]);
  assert.deepEqual(book.drainNotifications(), [{ taskId: "d", state: "timed_out", atMs: 500 }]);
  assert.deepEqual(book.sweepDue(20_000), []);
  assert.throws(() => book.sweepDue(-1), (e) => e instanceof TaskwireError && e.code === "invalid-request" && e.message.startsWith("nowMs"));
});

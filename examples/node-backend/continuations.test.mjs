// A continuation is not a failure (issue 26, PROTOCOL.md §Continuations),
// as a page reads it from this backend with GET: an approval spends no
// attempt and keeps the bar where it was, a continuation or the current
// attempt's first report clears a stale error, and a restart replays the
// same. The rule is core's (through the package); these check that the
// backend judges nothing itself and its sweeper follows it too.
//
//   node --test examples/node-backend/

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { call, callback, kill, sleep, start, tempDir } from "./testing.mjs";

const FLAGS = ["--lease-ms", "300", "--unknown-grace-ms", "200", "--sweep-ms", "20"];

async function create(base, body) {
  const r = await call(base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, ...body } });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  return r.json.id;
}

/** A signed executor event of `attempt`, now; must be answered 200. */
async function report(base, id, type, attempt, fields = {}) {
  const r = await callback(base, id, { type, atMs: Date.now(), attempt, ...fields });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json;
}

const startAttempt = (base, id, attempt, leaseMs = 60_000) => report(base, id, "start", attempt, { worker: `w${attempt}`, leaseMs });
const progress = (base, id, attempt, p) => report(base, id, "progress", attempt, { progress: p, cursor: `c${p}` });
const get = async (base, id) => (await call(base, "GET", `/v1/tasks/${id}`)).json;

async function holdAndDecide(base, id, attempt, decision) {
  const held = await report(base, id, "hold", attempt, { artifactRef: "blob://draft", artifactHash: "sha256:d1" });
  assert.equal(held.state, "waiting_approval", JSON.stringify(held));
  const r = await call(base, "POST", `/v1/tasks/${id}/decisions`, { body: { decision, artifactHash: "sha256:d1", version: held.version } });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json;
}

/** Waits (5 s at most) until the task is in `state`. */
async function until(base, id, state) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const t = await get(base, id);
    if (t.state === state) return t;
    assert.ok(Date.now() < deadline, `never ${state}: ${JSON.stringify(t)}`);
    await sleep(20);
  }
}

describe("continuations", () => {
  test("an approved task with maxAttempts 1 continues, its bar never drops, and stale errors go; a restart replays the same", async () => {
    const data = tempDir();
    let server = await start(data, FLAGS);
    let { base } = server;
    try {
      // The reported bar: 89 → 0 → 0 → 50 → 100 around an approval.
      const approved = await create(base, { maxAttempts: 1 });
      await startAttempt(base, approved, 1);
      await progress(base, approved, 1, 89);
      const decided = await holdAndDecide(base, approved, 1, "approve");
      assert.deepEqual(
        [decided.reason, decided.task.state, decided.task.progress, decided.task.attempts, decided.task.continuations],
        ["approved", "queued", 89, 1, 1],
      );
      const next = await startAttempt(base, approved, 2);
      assert.deepEqual([next.reason, next.state], ["started", "running"], "maxAttempts 1 does not stop the continuation");
      assert.equal((await get(base, approved)).progress, 89, "the start keeps it");
      const lower = await progress(base, approved, 2, 50);
      assert.deepEqual([lower.reason, lower.changed], ["stale-progress", false]);

      // A retried failure's error: kept by the start, cleared by request_changes.
      const revised = await create(base, { maxAttempts: 2 });
      await startAttempt(base, revised, 1);
      await report(base, revised, "fail", 1, { error: "timeout", retryable: true });
      await startAttempt(base, revised, 2);
      assert.equal((await get(base, revised)).error, "timeout", "kept by the start (seed fix 5)");
      const asked = await holdAndDecide(base, revised, 2, "request_changes");
      assert.equal(asked.reason, "changes-requested");
      assert.equal("error" in asked.task, false, `cleared by the continuation: ${JSON.stringify(asked.task)}`);
      const third = await startAttempt(base, revised, 3);
      assert.equal(third.state, "running", "the continuation granted a start");

      // The backend's sweeper gives a silent attempt up; the next one's first report clears "lease lapsed".
      const lapsed = await create(base, { maxAttempts: 2 });
      await startAttempt(base, lapsed, 1, 300);
      await progress(base, lapsed, 1, 40);
      const requeued = await until(base, lapsed, "queued");
      assert.deepEqual([requeued.error, requeued.progress], ["lease lapsed, no sign in the grace period", 0]);
      await startAttempt(base, lapsed, 2);
      assert.equal((await get(base, lapsed)).error, "lease lapsed, no sign in the grace period", "kept by the start");
      await progress(base, lapsed, 2, 5);
      assert.equal("error" in (await get(base, lapsed)), false, "attempt 2 runs fine");

      const before = await Promise.all([approved, revised, lapsed].map((id) => get(base, id)));
      await kill(server);
      server = await start(data, FLAGS);
      ({ base } = server);
      const after = await Promise.all([approved, revised, lapsed].map((id) => get(base, id)));
      assert.deepEqual(after, before, "the journal replays the same tasks");
    } finally {
      await kill(server);
    }
  });
});

// The lifecycle's durability (what the conformance suite cannot see): a
// person's cancel, the sweeper's steps, and a heartbeat that only renewed
// a lease are journaled, so a restart after SIGKILL replays exactly what
// was acknowledged; the default lease and grace period come from their
// flags.
//
//   node --test examples/node-backend/

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { call, callback, kill, observe, sleep, start, tempDir } from "./testing.mjs";

const FLAGS = ["--lease-ms", "300", "--unknown-grace-ms", "200", "--sweep-ms", "20"];

async function create(base, body = {}) {
  const r = await call(base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 2, ...body } });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  return r.json;
}

async function ok(promise) {
  const r = await promise;
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json;
}

/** Waits (5 s at most) until the task is in `state`. */
async function until(base, id, state) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const t = (await call(base, "GET", `/v1/tasks/${id}`)).json;
    if (t.state === state) return t;
    assert.ok(Date.now() < deadline, `never ${state}: ${JSON.stringify(t)}`);
    await sleep(20);
  }
}

const events = async (base, id) => (await call(base, "GET", `/v1/tasks/${id}/resume?cursor=0`)).json.events.map((e) => e.event);

describe("lifecycle across a restart", () => {
  test("a cancel, the sweeper's steps and a renewed lease survive a SIGKILL; the defaults come from the flags", async () => {
    const data = tempDir();
    let server = await start(data, FLAGS);
    let { base } = server;

    // A person's cancel (the actor is the token's tenant).
    const cancelled = await create(base);
    const answer = await ok(call(base, "POST", `/v1/tasks/${cancelled.id}/cancel`, { body: { reason: "not needed" } }));
    assert.deepEqual([answer.reason, answer.task.state], ["cancelled", "cancelled"]);

    // The execution deadline, taken by the sweeper.
    const timed = await create(base, { deadlineMs: 100 });
    await until(base, timed.id, "timed_out");

    // The default lease (--lease-ms 300) of a start with attempt and no
    // leaseMs, then the default grace period (--unknown-grace-ms 200).
    const silent = await create(base);
    assert.equal(silent.unknownGraceMs, 200, "the default grace period");
    const s = { type: "start", atMs: Date.now(), worker: "w", attempt: 1 };
    const sent = Date.now();
    await ok(callback(base, silent.id, s));
    const answered = Date.now();
    await until(base, silent.id, "queued");
    const [started, lapsed, abandoned] = (await events(base, silent.id)).map((e) => [e.type, e.atMs]);
    assert.deepEqual([started, lapsed[0], abandoned[0]], [["start", s.atMs], "lapse", "abandon"]);
    // The lease runs from when the backend received the start (PROTOCOL.md §Workers).
    assert.ok(lapsed[1] >= sent + 300 && lapsed[1] <= answered + 300, `lapse at ${lapsed[1]}, start sent at ${sent}`);
    assert.equal(abandoned[1], lapsed[1] + 200, "the grace period runs from the lapse");

    // A heartbeat that only renews the lease: no version, but journaled.
    const renewed = await create(base, { unknownGraceMs: 60_000 });
    const t = Date.now();
    await ok(callback(base, renewed.id, { type: "start", atMs: t, worker: "w", attempt: 1, leaseMs: 2000 }));
    const beatSent = Date.now();
    const beat = await ok(callback(base, renewed.id, { type: "heartbeat", atMs: t + 100, attempt: 1, leaseMs: 2500 }));
    const beatAnswered = Date.now();
    assert.deepEqual([beat.changed, beat.reason, beat.version], [false, "heartbeat", 1]);
    // The lease is operational state, not part of the TaskView on the wire.
    for (const path of [`/v1/tasks/${renewed.id}`, `/v1/tasks/${renewed.id}/resume?cursor=0&snapshot=1`]) {
      const { json } = await call(base, "GET", path);
      assert.equal("lease" in (json.task ?? json), false, `${path}: ${JSON.stringify(json)}`);
    }

    const ids = [cancelled.id, timed.id, silent.id];
    const before = await observe(base, ids);
    await kill(server);

    const journal = readFileSync(join(data, "journal.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    const ops = new Set(journal.map((r) => r.op));
    for (const op of ["act", "sweep"]) assert.ok(ops.has(op), `the journal has ${op} records`);
    const renewedLease = journal.findLast((r) => r.op === "callback" && r.taskId === renewed.id)?.lease?.expiresAtMs;
    assert.ok(renewedLease >= beatSent + 2500 && renewedLease <= beatAnswered + 2500, `the renewed lease is journaled: ${renewedLease}`);

    server = await start(data, FLAGS);
    ({ base } = server);
    try {
      assert.deepEqual(await observe(base, ids), before, "the same tasks, histories and feed after the restart");
      const [cancel] = await events(base, cancelled.id);
      assert.deepEqual([cancel.type, cancel.reason, cancel.actor], ["cancel", "not needed", "tenant:tenant-a"]);
      // The lease the heartbeat renewed (2500 ms from its receipt), not the start's.
      await until(base, renewed.id, "unknown");
      const lapse = (await events(base, renewed.id)).find((e) => e.type === "lapse");
      assert.equal(lapse.atMs, renewedLease, "the lapse falls at the renewed lease's end");
    } finally {
      await kill(server);
    }
  });
});

// Batches (PROTOCOL.md §Batches) where the conformance suite cannot look:
// a batch, its cursor and its per-task deltas survive a SIGKILL (the
// journal replays them to the same answers), a batch's journal line is
// the whole batch (torn, none of it exists), one commit that changes
// several items is one step of the cursor, a heartbeat that changes no
// version is none, and a held batch request wakes from the commit.
//
//   node --test examples/node-backend/

import assert from "node:assert/strict";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { TOKEN, call, callback, kill, sleep, start, tempDir } from "./testing.mjs";

const item = (i, extra = {}) => ({ ttlMs: 3_600_000, maxAttempts: 2, kind: "moderation", input: { item: i }, ...extra });

/** POST /v1/batches with `items` (a list, or the JSON text of one: exact numbers); {status, json, text}. */
async function post(base, items, key) {
  const res = await fetch(`${base}/v1/batches`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...(key && { "idempotency-key": key }) },
    body: `{"items":${typeof items === "string" ? items : JSON.stringify(items)}}`,
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text), text };
}

async function createBatch(base, items, key) {
  const r = await post(base, items, key);
  assert.equal(r.status, 201, r.text);
  return r.json;
}

const getText = async (base, path) => (await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();

const follow = async (base, id, cursor) => (await call(base, "GET", `/v1/batches/${id}/resume?cursor=${cursor}`)).json;

/** Every answer a client could get, at every cursor up to the batch's (and one past it). */
async function answers(base, id) {
  const { cursor } = await follow(base, id, 0);
  const all = [];
  for (let c = 0; c <= cursor + 1; c++) all.push(await follow(base, id, c));
  return all;
}

describe("batches across a restart", () => {
  test("a batch, its cursor and every per-task delta are the same after a SIGKILL; its key still answers it", async () => {
    const data = tempDir();
    let server = await start(data);
    // Item 1's input holds 2^53 + 1, which a double cannot: kept as text.
    const exact = '{"n":9007199254740993}';
    const items = `[${JSON.stringify(item(0))},${JSON.stringify(item(1)).replace('{"item":1}', exact)},${JSON.stringify(item(2))}]`;
    const batch = await createBatch(server.base, items, "batch-1");
    const [t0, t1, t2] = batch.tasks.map((t) => t.id);
    const steps = [
      [t0, { type: "start", atMs: 10, worker: "w" }],
      [t2, { type: "start", atMs: 11, worker: "w" }],
      [t0, { type: "progress", atMs: 12, progress: 40, cursor: "c" }],
      [t2, { type: "fail", atMs: 13, error: "bad", retryable: false }],
    ];
    for (const [id, event] of steps) assert.equal((await callback(server.base, id, event)).json.changed, true);
    const before = await answers(server.base, batch.batchId);
    assert.deepEqual([before[1].mode, before[1].cursor, before[1].open], ["delta", 5, 2]);
    assert.deepEqual(before[3].tasks.map((t) => [t.task.id, t.events.map((e) => e.version)]), [[t0, [2]], [t2, [2]]]);

    await kill(server);
    server = await start(data);
    try {
      const { base } = server;
      assert.deepEqual(await answers(base, batch.batchId), before, "the same answers at every cursor");
      const got = await getText(base, `/v1/tasks/${t1}`);
      assert.equal(JSON.parse(got).batchId, batch.batchId);
      assert.ok(got.endsWith(`,"input":${exact}}`), `the item's input byte for byte: ${got}`);
      const replay = await post(base, items, "batch-1");
      assert.deepEqual([replay.status, replay.json.batchId, replay.json.cursor, replay.json.tasks[0].version], [200, batch.batchId, 5, 2]);
      assert.ok(replay.text.includes(`"input":${exact}`), "the replay answers the exact input too");
      // 2^53 where 2^53 + 1 was sent: the same double, another request.
      assert.equal((await post(base, items.replace("9007199254740993", "9007199254740992"), "batch-1")).status, 422);
      const single = await call(base, "POST", "/v1/tasks", { body: item(0), headers: { "idempotency-key": "batch-1" } });
      assert.equal(single.status, 422, "a batch's key stays out of single creates after the restart");
      // The cursor goes on from where it was, and a held request wakes.
      const held = call(base, "GET", `/v1/batches/${batch.batchId}/resume?cursor=5&waitMs=10000`);
      await sleep(200);
      await callback(base, t1, { type: "start", atMs: 20, worker: "w" });
      const woke = (await held).json;
      assert.deepEqual([woke.mode, woke.cursor, woke.tasks.map((t) => t.task.id)], ["delta", 6, [t1]]);
    } finally {
      await kill(server);
    }
  });

  test("a batch is one journal line: torn by a crash, none of its tasks exists and its key is free", async () => {
    const data = tempDir();
    let server = await start(data);
    const kept = await createBatch(server.base, [item(0)]);
    const lost = await createBatch(server.base, [item(0), item(1), item(2)], "lost-1");
    await kill(server);
    const file = join(data, "journal.jsonl");
    const lines = readFileSync(file, "utf8").trimEnd().split("\n");
    const last = JSON.parse(lines.at(-1));
    assert.deepEqual([last.op, last.batchId, last.items.length], ["batch", lost.batchId, 3], "the whole batch in one record");
    // The crash cut the last write short: the line without its end.
    writeFileSync(file, `${lines.slice(0, -1).join("\n")}\n`);
    appendFileSync(file, lines.at(-1).slice(0, Math.floor(lines.at(-1).length / 2)));
    server = await start(data);
    try {
      const { base } = server;
      assert.match(server.output(), /ignored a torn last line/);
      assert.equal((await follow(base, kept.batchId, 0)).size, 1);
      assert.equal((await call(base, "GET", `/v1/batches/${lost.batchId}/resume?cursor=0`)).status, 404);
      for (const t of lost.tasks) assert.equal((await call(base, "GET", `/v1/tasks/${t.id}`)).status, 404);
      const again = await post(base, [item(9)], "lost-1");
      assert.equal(again.status, 201, "the key was never acknowledged");
    } finally {
      await kill(server);
    }
  });
});

describe("the batch cursor", () => {
  test("the sweeper expiring several items in one commit is one step; a heartbeat that only renews a lease is none", async () => {
    const data = tempDir();
    let server = await start(data, ["--sweep-ms", "20"]);
    const short = await createBatch(server.base, [item(0, { ttlMs: 300 }), item(1), item(2, { ttlMs: 300 })]);
    const [e0, live, e2] = short.tasks.map((t) => t.id);
    const t = Date.now();
    await callback(server.base, live, { type: "start", atMs: t, worker: "w", attempt: 1, leaseMs: 60_000 }); // cursor 2
    const deadline = Date.now() + 5000;
    while ((await follow(server.base, short.batchId, 0)).open !== 1) {
      assert.ok(Date.now() < deadline, "the two short items never expired");
      await sleep(50);
    }
    const expired = await follow(server.base, short.batchId, 2);
    assert.deepEqual([expired.mode, expired.cursor, expired.open], ["delta", 3, 1], "both expiries: one commit, one step");
    assert.deepEqual(expired.tasks.map((x) => [x.task.id, x.events.map((e) => e.event.type)]), [[e0, ["expire"]], [e2, ["expire"]]]);
    const beat = await callback(server.base, live, { type: "heartbeat", atMs: t + 100, attempt: 1, leaseMs: 60_000 });
    assert.deepEqual([beat.json.changed, beat.json.reason], [false, "heartbeat"]);
    assert.equal((await follow(server.base, short.batchId, 3)).mode, "caught-up", "no version, no step");
    const before = await answers(server.base, short.batchId);
    await kill(server);
    server = await start(data, ["--sweep-ms", "20"]);
    try {
      assert.deepEqual(await answers(server.base, short.batchId), before, "the same steps after a replay");
    } finally {
      await kill(server);
    }
  });
});

// PROTOCOL.md §Batches: the create (its answer, validation per item,
// whole or nothing, the 1,000 items and 1 MiB limits, idempotency in the
// namespace of single creates, the tenant token), the batch cursor and
// the answer table of GET /v1/batches/{id}/resume, the retention window
// per task, and the errors. Held requests, events and browser tokens:
// batch-watch.mjs.

import assert from 'node:assert/strict';
import { assertError, MAX_SAFE } from '../lib/match.mjs';
import { attemptsFor, changes, progress, start } from '../lib/events.mjs';
import { uid } from '../lib/client.mjs';
import { batchAnswer, batchResume, createBatch, createdBatch, cursorNow, items } from '../lib/batches.mjs';
import { claims, hs256 } from '../lib/tokens.mjs';

const MIB = 1024 * 1024;
const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** `n` items whose body `{"items":[…]}` is exactly `bytes` bytes long (the padding in each input). */
function bodyOfSize(n, bytes) {
  const body = { items: items(n, { ttlMs: 60_000, maxAttempts: 1 }).map((item) => ({ ...item, input: { pad: '' } })) };
  const spare = bytes - JSON.stringify(body).length;
  assert.ok(spare >= 0, `${n} items take more than ${bytes} bytes`);
  body.items.forEach((item, i) => {
    item.input.pad = 'x'.repeat(Math.floor(spare / n) + (i < spare % n ? 1 : 0));
  });
  const text = JSON.stringify(body);
  assert.equal(text.length, bytes);
  return text;
}

export default {
  section: 'Batches',
  protocol: 'Batches',
  checks: [
    {
      name: 'create: 201 with the batch at cursor 1 and its tasks in item order, each an ordinary task with batchId (GET shows it too)',
      async run(ctx) {
        const bodies = items(3);
        const batch = await createdBatch(ctx.a.http, bodies);
        for (const [i, created] of batch.tasks.entries()) {
          const task = await ctx.a.task(created.id);
          assert.equal(task.batchId, batch.batchId, `GET of item ${i}: batchId`);
          assert.equal(task.kind, bodies[i].kind, `GET of item ${i}: kind`);
          assert.deepEqual(task.input, bodies[i].input, `GET of item ${i}: input`);
          assert.equal(task.epoch, batch.epoch, `GET of item ${i}: epoch`);
        }
        // An item is an ordinary task: its callbacks, resume and version.
        const first = batch.tasks[0].id;
        await ctx.exec.drive(first, [start(100)]);
        await ctx.a.answer(first, 0, { mode: 'delta', versions: [1], task: { id: first, state: 'running' } });
      },
    },
    {
      name: 'each item is judged as a single create: 400 naming body.items[i] and the field, and nothing is created',
      async run(ctx) {
        const ok = { ttlMs: 60_000, maxAttempts: 1 };
        const cases = [
          [[ok, { ttlMs: -1, maxAttempts: 1 }], /items\[1\]\.ttlMs/],
          [[ok, { maxAttempts: 1 }], /items\[1\]\.ttlMs/],
          [[ok, ok, { ttlMs: 1000, maxAttempts: 0 }], /items\[2\]\.maxAttempts/],
          [[{ ...ok, kind: 'k'.repeat(65) }, ok], /items\[0\]\.kind/],
          [[ok, { ...ok, deadlineMs: 0 }], /items\[1\]\.deadlineMs/],
          [[ok, 'not a body'], /items\[1\]/],
        ];
        for (const [bodies, field] of cases) {
          // A key the refused create would have recorded, had it done anything.
          const key = uid('refused');
          assertError(await createBatch(ctx.a.http, { items: bodies }, { key }), 400, 'invalid-request', field);
          // Whole or nothing: the key is still free for another body.
          const other = await createBatch(ctx.a.http, { items: [{ ttlMs: 1000, maxAttempts: 2 }] }, { key });
          assert.equal(other.status, 201, `after a refused batch its Idempotency-Key makes a new batch: expected 201, got ${other.status} ${other.text}`);
        }
      },
    },
    {
      name: 'items: 1 to 1,000 (else 400 naming items); malformed bodies 400',
      async run(ctx) {
        for (const body of [{}, { items: [] }, { items: 'x' }, { items: { ttlMs: 1 } }, { items: null }, { items: items(1001) }]) {
          assertError(await createBatch(ctx.a.http, body), 400, 'invalid-request', 'items');
        }
        for (const raw of ['', '{"items":', 'null', '[]', '{"items":[{"ttlMs":1e400,"maxAttempts":1}]}']) {
          assertError(await createBatch(ctx.a.http, raw), 400, 'invalid-request');
        }
      },
    },
    {
      name: 'the body may be up to 1 MiB on this route: 1,000 items in exactly 1 MiB are created, 1 MiB + 1 is 413',
      async run(ctx) {
        const text = bodyOfSize(1000, MIB);
        const res = await createBatch(ctx.a.http, text);
        assert.equal(res.status, 201, `a batch of 1,000 items in 1,048,576 bytes: expected 201, got ${res.status}`);
        assert.equal(res.json.size, 1000);
        assert.equal(res.json.tasks.length, 1000);
        assert.deepEqual(res.json.tasks[999].input, JSON.parse(text).items[999].input, 'the last item kept whole');
        assertError(await createBatch(ctx.a.http, bodyOfSize(1000, MIB + 1)), 413, 'payload-too-large');
      },
    },
    {
      name: 'Idempotency-Key: the same body answers 200 with the batch as it is now; another body, or a key of a single create, 422',
      async run(ctx) {
        const key = uid('batch-key');
        const bodies = [{ ttlMs: 60_000, maxAttempts: 2, kind: 'a', input: { n: 1 } }, { ttlMs: 60_000, maxAttempts: 1 }];
        const batch = await createdBatch(ctx.a.http, bodies, { key });
        await ctx.exec.drive(batch.tasks[0].id, [start(100)]);
        const now = await cursorNow(ctx.a.http, batch.batchId, 1);
        // Compared as JSON values: key order and number spellings do not matter.
        const same = '{"items":[{"input":{"n":1.0},"kind":"a","maxAttempts":2,"ttlMs":6e4},{"maxAttempts":1,"ttlMs":60000}]}';
        const replay = await createBatch(ctx.a.http, same, { key });
        assert.equal(replay.status, 200, `the same key and body: expected 200, got ${replay.status} ${replay.text}`);
        assert.equal(replay.json.batchId, batch.batchId);
        assert.deepEqual(replay.json.tasks.map((t) => t.id), batch.tasks.map((t) => t.id), 'the same tasks, in item order');
        assert.equal(replay.json.tasks[0].version, 1, 'tasks as they are now');
        assert.equal(replay.json.tasks[0].batchId, batch.batchId);
        assert.equal(replay.json.cursor, now, "the batch's current cursor");
        assert.equal(replay.json.size, 2);
        const others = [
          { items: [bodies[0], { ...bodies[1], maxAttempts: 2 }] },
          { items: [bodies[1], bodies[0]] },
          { items: [bodies[0]] },
        ];
        for (const body of others) {
          assertError(await createBatch(ctx.a.http, body, { key }), 422, 'idempotency-key-reused', 'Idempotency-Key');
        }
        // One namespace with single creates, both ways round.
        assertError(await ctx.a.create({ ttlMs: 60_000, maxAttempts: 1 }, { key }), 422, 'idempotency-key-reused', 'Idempotency-Key');
        const single = uid('single-key');
        await ctx.a.createTask({ ttlMs: 60_000, maxAttempts: 1 }, { key: single });
        assertError(await createBatch(ctx.a.http, { items: [{ ttlMs: 60_000, maxAttempts: 1 }] }, { key: single }), 422, 'idempotency-key-reused', 'Idempotency-Key');
        // Keys are per tenant.
        if (ctx.b) await createdBatch(ctx.b.http, bodies, { key });
      },
    },
    {
      name: 'a tenant token only: no token 401, a browser token 403 tenant-token-required',
      async run(ctx) {
        assertError(await createBatch(ctx.a.http, { items: items(1) }, { token: null }), 401, 'unauthorized');
        if (ctx.config.browserKeys.length === 0) return;
        const batch = await createdBatch(ctx.a.http, items(1));
        const { browserAudience: aud, browserKeys: [key] } = ctx.config;
        const forTask = hs256(key, claims(aud, [batch.tasks[0].id], ['watch']));
        const forBatch = hs256(key, { ...claims(aud, undefined, ['watch']), batch: batch.batchId });
        for (const token of [forTask, forBatch]) {
          assertError(await createBatch(ctx.a.http, { items: items(1) }, { token }), 403, 'tenant-token-required');
        }
      },
    },
    {
      name: 'the cursor: 1 after the create, growing with each change; snapshot at 0, caught-up at the batch cursor, a delta of only the changed tasks and only their entries after the cursor',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(3));
        const [t0, t1, t2] = batch.tasks.map((t) => t.id);
        const id = batch.batchId;
        const head = { size: 3, open: 3, epoch: batch.epoch };
        const snapshotOfAll = (version) => [t0, t1, t2].map((tid) => ({ id: tid, mode: 'snapshot', events: [], task: { version: version[tid] ?? 0 } }));
        await batchAnswer(ctx.a.http, id, 0, { ...head, mode: 'snapshot', cursor: 1, tasks: snapshotOfAll({}) });
        await batchAnswer(ctx.a.http, id, 1, { ...head, mode: 'caught-up', cursor: 1, tasks: [] });

        const s0 = start(100);
        const s2 = start(110, 'worker-2');
        const p0 = progress(120, 30);
        // The cursor after each change, as the batch reports it.
        await ctx.exec.drive(t0, [s0]);
        const c2 = await cursorNow(ctx.a.http, id, 1);
        await ctx.exec.drive(t2, [s2]);
        const c3 = await cursorNow(ctx.a.http, id, c2);
        await ctx.exec.drive(t0, [p0]);
        const c4 = await cursorNow(ctx.a.http, id, c3);
        await batchAnswer(ctx.a.http, id, 1, {
          ...head,
          mode: 'delta',
          cursor: c4,
          tasks: [
            { id: t0, mode: 'delta', events: [{ version: 1, event: s0 }, { version: 2, event: p0 }], task: { id: t0, version: 2, progress: 30 } },
            { id: t2, mode: 'delta', events: [{ version: 1, event: s2 }], task: { id: t2, version: 1, state: 'running' } },
          ],
        });
        await batchAnswer(ctx.a.http, id, c2, {
          mode: 'delta',
          cursor: c4,
          tasks: [{ id: t0, mode: 'delta', versions: [2] }, { id: t2, mode: 'delta', versions: [1] }],
        });
        await batchAnswer(ctx.a.http, id, c3, { mode: 'delta', cursor: c4, tasks: [{ id: t0, mode: 'delta', versions: [2] }] });
        await batchAnswer(ctx.a.http, id, c4, { mode: 'caught-up', cursor: c4, tasks: [] });
        // A cursor above the batch's is a view the server never had; snapshot=1 asks for one.
        const now = { [t0]: 2, [t2]: 1 };
        for (const cursor of [c4 + 1, c4 + 1000, MAX_SAFE]) {
          await batchAnswer(ctx.a.http, id, cursor, { ...head, mode: 'snapshot', cursor: c4, tasks: snapshotOfAll(now) });
        }
        for (const cursor of [c4, c2, 0]) {
          await batchAnswer(ctx.a.http, id, cursor, { mode: 'snapshot', cursor: c4, tasks: snapshotOfAll(now) }, { snapshot: 1 });
        }
        // Each element's task is the task as GET shows it.
        const answer = await batchAnswer(ctx.a.http, id, 0, { mode: 'snapshot' });
        for (const element of answer.tasks) {
          const got = await ctx.a.task(element.task.id);
          assert.deepEqual([element.task.version, element.task.state, element.task.progress], [got.version, got.state, got.progress]);
        }
      },
    },
    {
      name: 'more than the retention window of entries after the cursor: that task is a snapshot, the others still deltas (a gap equal to the window is a delta)',
      async run(ctx) {
        const r = ctx.retention;
        const batch = await createdBatch(ctx.a.http, items(2, { maxAttempts: attemptsFor(r + 1) }));
        const [t0, t1] = batch.tasks.map((t) => t.id);
        const past = changes(r + 1);
        const within = changes(r);
        await ctx.exec.drive(t0, past.slice(0, 1));
        const afterFirst = await cursorNow(ctx.a.http, batch.batchId, 1);
        await ctx.exec.drive(t0, past.slice(1));
        await ctx.exec.drive(t1, within);
        const cursor = await cursorNow(ctx.a.http, batch.batchId, afterFirst);
        await batchAnswer(ctx.a.http, batch.batchId, 1, {
          mode: 'delta',
          cursor,
          tasks: [
            { id: t0, mode: 'snapshot', events: [], task: { version: r + 1 } },
            { id: t1, mode: 'delta', versions: range(1, r), events: within.map((event, i) => ({ version: i + 1, event })) },
          ],
        });
        // From just after t0's first change, t0 has r entries left: a delta again.
        await batchAnswer(ctx.a.http, batch.batchId, afterFirst, {
          mode: 'delta',
          cursor,
          tasks: [{ id: t0, mode: 'delta', versions: range(2, r + 1) }, { id: t1, mode: 'delta', versions: range(1, r) }],
        });
      },
    },
    {
      name: 'errors: 400 naming cursor, waitMs, snapshot or batchId (before the batch is looked up), 404 for an unknown batch or another tenant’s, 401, 405',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(1));
        const http = ctx.a.http;
        for (const id of [batch.batchId, 'no-such-batch-3a9e']) {
          const bad = [[{}, 'cursor'], [{ cursor: -1 }, 'cursor'], [{ cursor: 1.5 }, 'cursor'], [{ cursor: 'abc' }, 'cursor'],
            [{ cursor: MAX_SAFE + 1 }, 'cursor'], [{ cursor: 1, waitMs: 30_001 }, 'waitMs'], [{ cursor: 1, snapshot: 'maybe' }, 'snapshot']];
          for (const [params, field] of bad) assertError(await batchResume(http, id, params), 400, 'invalid-request', field);
        }
        assertError(await batchResume(http, 'b'.repeat(256), { cursor: 0 }), 400, 'invalid-request', 'batchId');
        assertError(await batchResume(http, 'no-such-batch-3a9e', { cursor: 0 }), 404, 'not-found');
        assertError(await http.request('GET', '/v1/batches/no-such-batch-3a9e/events'), 404, 'not-found');
        // A task id is not a batch id.
        assertError(await batchResume(http, batch.tasks[0].id, { cursor: 0 }), 404, 'not-found');
        if (ctx.b) {
          assertError(await batchResume(ctx.b.http, batch.batchId, { cursor: 0 }), 404, 'not-found');
          assertError(await ctx.b.http.request('GET', `/v1/batches/${batch.batchId}/events`), 404, 'not-found');
        }
        assertError(await batchResume(http, batch.batchId, { cursor: 0 }, { token: null }), 401, 'unauthorized');
        assertError(await http.request('GET', `/v1/batches/${batch.batchId}/events`, { token: null }), 401, 'unauthorized');
        assertError(await http.request('GET', '/v1/batches'), 405, 'method-not-allowed');
        assertError(await http.request('POST', `/v1/batches/${batch.batchId}/resume?cursor=0`), 405, 'method-not-allowed');
      },
    },
  ],
};

// PROTOCOL.md §Epoch: every task view and answer carries the epoch of the
// store's history, one for the whole store. That it survives a restart is
// checked by local.mjs, which can restart the backend.

import assert from 'node:assert/strict';
import { taskAt } from '../lib/scenarios.mjs';
import { assertError } from '../lib/match.mjs';
import { batchResume, createdBatch, items } from '../lib/batches.mjs';

/** `request()`'s answer, with how long it took to come. */
async function timed(request) {
  const started = Date.now();
  const res = await request();
  return { res, elapsed: Date.now() - started };
}

/** The epoch of `what`: a non-blank string (PROTOCOL.md §Epoch). */
function epochOf(value, what) {
  const epoch = value?.epoch;
  assert.equal(typeof epoch, 'string', `${what}.epoch: expected a string, got ${JSON.stringify(epoch)}`);
  assert.ok(epoch.trim() !== '', `${what}.epoch: must not be blank`);
  return epoch;
}

export default {
  section: 'Epoch',
  protocol: 'Epoch',
  checks: [
    {
      name: 'every view and answer carries the same epoch: create, GET, resume (caught-up, delta, snapshot), SSE, callback and cancel answers',
      async run(ctx) {
        const created = await ctx.a.createTask();
        const epoch = epochOf(created, 'create answer');
        const same = (value, what) => assert.equal(epochOf(value, what), epoch, `${what}: another epoch than the create answer's`);
        same(await ctx.a.task(created.id), 'GET task');
        same(await ctx.a.answer(created.id, 0, { mode: 'caught-up' }), 'caught-up answer');
        const started = await ctx.exec.apply(created.id, { type: 'start', atMs: Date.now(), worker: 'w' });
        same(started, 'callback answer');
        same(await ctx.a.answer(created.id, 0, { mode: 'delta' }), 'delta answer');
        same(await ctx.a.answer(created.id, 0, { mode: 'snapshot' }, { snapshot: 1 }), 'snapshot answer');
        same(await ctx.a.answer(created.id, 5, { mode: 'snapshot' }), 'snapshot answer (cursor ahead)');
        const opened = await ctx.a.events(created.id, { lastEventId: 0 });
        assert.equal(opened.status, 200, `events: expected 200, got ${opened.status}`);
        const { stream } = opened;
        try {
          const message = await stream.next();
          assert.ok(message, 'the stream sends a first message');
          same(JSON.parse(message.data), 'SSE resume message');
        } finally {
          stream.close();
        }
        same(await ctx.a.acted(created.id, 'cancel', {}), 'cancel answer');
      },
    },
    {
      name: 'the epoch is the store’s, not a task’s: tasks created apart share it',
      async run(ctx) {
        const { task } = await taskAt(ctx, 2);
        const other = await ctx.a.createTask();
        assert.equal(epochOf(other, 'create answer'), epochOf(await ctx.a.task(task.id), 'GET task'));
      },
    },
      {
      name: 'a long-poll that sends another epoch is answered at once, with the store’s; one that sends the store’s is held; a blank or overlong epoch is 400 naming epoch',
      async run(ctx) {
        const { task } = await taskAt(ctx, 1);
        const now = await ctx.a.task(task.id);
        const epoch = epochOf(now, 'GET task');
        const version = now.version;
        // The store's own epoch: held as without one (caught-up after waitMs).
        const held = await timed(() => ctx.a.resume(task.id, { cursor: version, waitMs: 1500, epoch }));
        assert.equal(held.res.status, 200, `held resume: expected 200, got ${held.res.status}`);
        assert.equal(held.res.json.mode, 'caught-up');
        assert.ok(held.elapsed >= 1400, `the store's epoch is held: answered after ${held.elapsed} ms of waitMs 1500`);
        // Another history at the very same version: at once, carrying the
        // store's epoch, so the client sees the history changed.
        const other = await timed(() => ctx.a.resume(task.id, { cursor: version, waitMs: 20_000, epoch: `${epoch}-restored` }));
        assert.equal(other.res.status, 200, `resume with another epoch: expected 200, got ${other.res.status}`);
        assert.ok(other.elapsed < 5000, `another epoch is answered at once, not held: ${other.elapsed} ms`);
        assert.equal(epochOf(other.res.json, 'resume answer'), epoch);
        // And the same for a batch's long-poll.
        const batch = await createdBatch(ctx.a.http, items(2));
        const batchHeld = await timed(() => batchResume(ctx.a.http, batch.batchId, { cursor: batch.cursor, waitMs: 20_000, epoch: 'another-history' }));
        assert.equal(batchHeld.res.status, 200, `batch resume with another epoch: expected 200, got ${batchHeld.res.status}`);
        assert.ok(batchHeld.elapsed < 5000, `a batch long-poll from another epoch is answered at once: ${batchHeld.elapsed} ms`);
        assert.equal(epochOf(batchHeld.res.json, 'batch answer'), epoch);
        for (const bad of [' ', 'e'.repeat(256)]) {
          assertError(await ctx.a.resume(task.id, { cursor: version, epoch: bad }), 400, 'invalid-request', 'epoch');
          assertError(await batchResume(ctx.a.http, batch.batchId, { cursor: 1, epoch: bad }), 400, 'invalid-request', 'epoch');
        }
      },
    },
  ],
};

// PROTOCOL.md §Epoch: every task view and answer carries the epoch of the
// store's history, one for the whole store. That it survives a restart is
// checked by local.mjs, which can restart the backend.

import assert from 'node:assert/strict';
import { taskAt } from '../lib/scenarios.mjs';

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
  ],
};

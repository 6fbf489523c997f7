// PROTOCOL.md §Deliver a result.

import assert from 'node:assert/strict';
import { assertError, assertJsonType, assertMatches } from '../lib/match.mjs';
import { failedTask, runningTask, succeededTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';

const FIVE_MINUTES = 5 * 60_000;

/** Delivers and asserts 201 `delivered`; returns the receipt. */
async function deliverOnce(a, task, key) {
  const res = await a.deliver(task.id, key);
  assert.equal(res.status, 201, `first delivery under a key: expected 201, got ${res.status}`);
  assertJsonType(res);
  assertMatches(res.json, {
    ok: true,
    duplicate: false,
    reason: 'delivered',
    receipt: { taskId: task.id, resultRef: task.resultRef, resultHash: task.resultHash, idempotencyKey: key },
  }, 'delivery');
  const at = res.json.receipt.deliveredAtMs;
  assert.ok(typeof at === 'number' && Math.abs(at - Date.now()) < FIVE_MINUTES, `receipt.deliveredAtMs ${at}: expected the server's time`);
  return res.json.receipt;
}

export default {
  section: 'Deliver a result',
  protocol: 'Deliver a result',
  checks: [
    {
      name: 'first delivery under a key is 201; the same key again is 200 with the same receipt',
      async run(ctx) {
        const task = await succeededTask(ctx);
        const key = uid('deliver');
        const receipt = await deliverOnce(ctx.a, task, key);
        const again = await ctx.a.deliver(task.id, key);
        assert.equal(again.status, 200, `the same key again: expected 200, got ${again.status}`);
        assertMatches(again.json, { ok: true, duplicate: true, reason: 'duplicate-delivery' }, 'second delivery');
        assert.deepEqual(again.json.receipt, receipt, 'the duplicate carries the same receipt');
        const other = await deliverOnce(ctx.a, task, uid('deliver'));
        assert.notEqual(other.idempotencyKey, receipt.idempotencyKey);
      },
    },
    {
      name: 'a task without a result: 409 not-succeeded',
      async run(ctx) {
        const queued = await ctx.a.createTask();
        const running = await runningTask(ctx);
        const failed = await failedTask(ctx);
        for (const task of [queued, running, failed]) {
          assertError(await ctx.a.deliver(task.id, uid('deliver')), 409, 'not-succeeded');
        }
      },
    },
    {
      name: 'a key already used for another task: 422 key-reused-for-other-task, without the other receipt',
      async run(ctx) {
        const first = await succeededTask(ctx);
        const second = await succeededTask(ctx);
        const key = uid('deliver');
        await deliverOnce(ctx.a, first, key);
        const res = await ctx.a.deliver(second.id, key);
        assertError(res, 422, 'key-reused-for-other-task');
        for (const secret of [first.id, first.resultRef, first.resultHash]) {
          assert.ok(!res.text.includes(secret), `the 422 answer reveals the other task's receipt (${secret})`);
        }
        await deliverOnce(ctx.a, second, uid('deliver'));
      },
    },
    {
      name: 'Idempotency-Key is required (400 naming it) and at most 255 bytes',
      async run(ctx) {
        const task = await succeededTask(ctx);
        assertError(await ctx.a.deliver(task.id), 400, 'invalid-request', /idempotency-key/i);
        assertError(await ctx.a.deliver(task.id, 'k'.repeat(256)), 400, 'invalid-request');
        await deliverOnce(ctx.a, task, `k${uid('x')}`.padEnd(255, 'k'));
      },
    },
    {
      name: 'unknown task: 404',
      async run({ a }) {
        assertError(await a.deliver('no-such-task-4b4b', uid('deliver')), 404, 'not-found');
      },
    },
  ],
};

// PROTOCOL.md §Batches › Cancel a batch: one request cancels every task of
// a batch that is not terminal, each as its own cancel would (queued ones
// at once, running ones asked to stop), and leaves ended ones alone. A
// browser token whose `batch` claim names the batch may do it with the
// `cancel` right. Each check names the misreading it catches.

import assert from 'node:assert/strict';
import { assertError, assertJsonType } from '../lib/match.mjs';
import { start, succeed } from '../lib/events.mjs';
import { batchResume, createdBatch, items } from '../lib/batches.mjs';
import { claims, hs256 } from '../lib/tokens.mjs';

/** POST /v1/batches/{id}/cancel with `body` (an object, or text sent as it is). */
function cancelBatch(http, id, body, { token } = {}) {
  const opts = typeof body === 'string' ? { body, headers: { 'content-type': 'application/json' } } : { json: body };
  return http.request('POST', `/v1/batches/${encodeURIComponent(id)}/cancel`, { ...opts, token });
}

/** A 200 batch-cancel answer, its shape checked. */
function answerOf(res, what) {
  assert.equal(res.status, 200, `${what}: expected 200, got ${res.status} ${res.text ?? ''}`);
  assertJsonType(res);
  const a = res.json;
  assert.equal(typeof a?.batchId, 'string', `${what}.batchId`);
  for (const k of ['size', 'changed']) assert.ok(Number.isInteger(a[k]) && a[k] >= 0, `${what}.${k}: expected an integer >= 0, got ${JSON.stringify(a[k])}`);
  assert.equal(typeof a.reasons, 'object', `${what}.reasons: expected an object`);
  assert.equal(typeof a.epoch, 'string', `${what}.epoch`);
  return a;
}

export default {
  section: 'Cancel a batch',
  protocol: 'Batches › Cancel a batch',
  checks: [
    {
      name: 'one request cancels the rest: queued items cancelled, a running one cancelling, an ended one untouched; again, nothing changes (misreading: a batch cancel that skips running items, or touches ended ones)',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(4));
        const [running, ended, queuedA, queuedB] = batch.tasks.map((t) => t.id);
        const t = Date.now();
        await ctx.exec.apply(running, start(t));
        await ctx.exec.drive(ended, [start(t), succeed(t + 1, 'blob://r', 'sha256:aa')]);
        const before = (await batchResume(ctx.a.http, batch.batchId, { cursor: 0 })).json.cursor;

        const first = answerOf(await cancelBatch(ctx.a.http, batch.batchId, { reason: 'the rest is not needed' }), 'batch cancel');
        assert.equal(first.batchId, batch.batchId);
        assert.equal(first.size, 4);
        assert.equal(first.changed, 3, 'two queued items and the running one changed');
        assert.deepEqual(first.reasons, { cancelled: 2, 'cancel-requested': 1 });
        const states = Object.fromEntries(await Promise.all(batch.tasks.map(async ({ id }) => [id, (await ctx.a.task(id)).state])));
        assert.deepEqual(states, { [running]: 'cancelling', [ended]: 'succeeded', [queuedA]: 'cancelled', [queuedB]: 'cancelled' });

        // Followers see it as any change of the batch: a delta after the cursor.
        const delta = (await batchResume(ctx.a.http, batch.batchId, { cursor: before })).json;
        assert.equal(delta.mode, 'delta');
        assert.ok(delta.cursor > before, 'the batch cursor moved');
        assert.deepEqual(new Set(delta.tasks.map((a) => a.task.id)), new Set([running, queuedA, queuedB]));

        const again = answerOf(await cancelBatch(ctx.a.http, batch.batchId, ''), 'the same cancel again (empty body)');
        assert.equal(again.changed, 0, 'a repeat changes nothing');
        assert.deepEqual(again.reasons, { 'duplicate-cancel': 1 }, 'only the cancelling task is still open');
      },
    },
    {
      name: 'a browser token with the batch and cancel cancels it; one without cancel is 403, another batch’s or a tasks-only token 404; an unknown batch 404; the server’s own fields in the body 400',
      needsBrowserKey: true,
      async run(ctx) {
        const { browserAudience: aud, browserKeys: [key] } = ctx.config;
        const batch = await createdBatch(ctx.a.http, items(2));
        const other = await createdBatch(ctx.a.http, items(1));
        const forBatch = (id, rights) => hs256(key, { ...claims(aud, undefined, rights), batch: id });
        const http = ctx.a.http;
        assertError(await cancelBatch(http, batch.batchId, {}, { token: forBatch(batch.batchId, ['watch']) }), 403, 'right-not-granted');
        assertError(await cancelBatch(http, batch.batchId, {}, { token: forBatch(other.batchId, ['cancel']) }), 404, 'not-found');
        const tasksOnly = hs256(key, claims(aud, batch.tasks.map((t) => t.id), ['watch', 'cancel']));
        assertError(await cancelBatch(http, batch.batchId, {}, { token: tasksOnly }), 404, 'not-found');
        assertError(await cancelBatch(http, 'no-such-batch-5e2a', {}), 404, 'not-found', 'batchId');
        assertError(await cancelBatch(http, batch.batchId, { atMs: 1 }), 400, 'invalid-request', 'body.atMs');
        assertError(await cancelBatch(http, batch.batchId, '{'), 400, 'invalid-request', 'body');
        const done = answerOf(await cancelBatch(http, batch.batchId, {}, { token: forBatch(batch.batchId, ['watch', 'cancel']) }), 'batch cancel with a batch token');
        assert.deepEqual(done.reasons, { cancelled: 2 });
        for (const { id } of batch.tasks) assert.equal((await ctx.a.task(id)).state, 'cancelled');
        assert.equal((await ctx.a.task(other.tasks[0].id)).state, 'queued', 'another batch is untouched');
      },
    },
  ],
};

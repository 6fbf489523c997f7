// PROTOCOL.md §Conventions › Numbers in parameters and headers, and the
// other spellings a backend must judge alike: which texts are integers,
// what `snapshot` accepts, ids in the path, the webhook-timestamp, the
// field named by the Idempotency-Key errors.

import assert from 'node:assert/strict';
import { assertError, assertResumeResponse } from '../lib/match.mjs';
import { start } from '../lib/events.mjs';
import { runningTask, succeededTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';

/** Not integers: each is 400 naming the parameter. */
const NOT_INTEGERS = ['3.0', '1e1', '+3', '-0', ' 3', '3 ', '0x3', '', 'three'];

/** Reads a query parameter's raw text (no encoding by the client). */
const raw = (http, path) => http.request('GET', path);

export default {
  section: 'Numbers in parameters and headers',
  protocol: 'Conventions › Numbers in parameters and headers',
  concurrency: 3,
  checks: [
    {
      name: 'cursor, waitMs, after, limit: ASCII digits only (3.0, 1e1, +3, -0, spaces, empty: 400 naming the parameter); leading zeros are fine',
      async run(ctx) {
        const task = await runningTask(ctx);
        for (const text of NOT_INTEGERS) {
          const q = encodeURIComponent(text);
          assertError(await raw(ctx.a.http, `/v1/tasks/${task.id}/resume?cursor=${q}`), 400, 'invalid-request', 'cursor');
          assertError(await raw(ctx.a.http, `/v1/tasks/${task.id}/resume?cursor=1&waitMs=${q}`), 400, 'invalid-request', 'waitMs');
          assertError(await raw(ctx.a.http, `/v1/notifications?after=${q}`), 400, 'invalid-request', 'after');
          assertError(await raw(ctx.a.http, `/v1/notifications?limit=${q}`), 400, 'invalid-request', 'limit');
          assertError(await raw(ctx.a.http, `/v1/tasks/${task.id}/events?cursor=${q}`), 400, 'invalid-request', 'cursor');
        }
        const res = await raw(ctx.a.http, `/v1/tasks/${task.id}/resume?cursor=01&waitMs=00`);
        assertResumeResponse(res, { mode: 'caught-up', task: { version: 1 } }, 'cursor=01&waitMs=00');
        assert.equal((await raw(ctx.a.http, '/v1/notifications?after=00&limit=010')).status, 200, 'after=00&limit=010');
      },
    },
    {
      name: 'limit is 1 to 1,000: 0 and 1,001 are 400, not clamped',
      async run({ a }) {
        for (const limit of [0, 1001, 100_000]) {
          assertError(await a.notifications({ limit }), 400, 'invalid-request', 'limit');
        }
        assert.equal((await a.notifications({ limit: 1 })).status, 200, 'limit=1');
        assert.equal((await a.notifications({ limit: 1000 })).status, 200, 'limit=1000');
      },
    },
    {
      name: 'snapshot: 1, true or empty ask for a snapshot; 0 or false do not; any other value is 400',
      async run(ctx) {
        const task = await runningTask(ctx);
        for (const text of ['1', 'true', '']) {
          assertResumeResponse(await raw(ctx.a.http, `/v1/tasks/${task.id}/resume?cursor=1&snapshot=${text}`),
            { mode: 'snapshot' }, `snapshot=${text}`);
        }
        for (const text of ['0', 'false']) {
          assertResumeResponse(await raw(ctx.a.http, `/v1/tasks/${task.id}/resume?cursor=1&snapshot=${text}`),
            { mode: 'caught-up' }, `snapshot=${text}`);
        }
        for (const text of ['yes', '2', 'TRUE', ' 1']) {
          assertError(await raw(ctx.a.http, `/v1/tasks/${task.id}/resume?cursor=1&snapshot=${encodeURIComponent(text)}`),
            400, 'invalid-request', 'snapshot');
        }
      },
    },
    {
      name: 'Last-Event-ID: an integer as cursor is (surrounding spaces trimmed); anything else is 400 naming Last-Event-ID, before the stream',
      async run(ctx) {
        const task = await runningTask(ctx);
        for (const text of ['x', '3.0', '+1', '-1', '1e1', '']) {
          assertError(await ctx.a.events(task.id, { lastEventId: text }), 400, 'invalid-request', 'Last-Event-ID');
        }
        for (const text of [' 1', '01']) {
          const res = await ctx.a.events(task.id, { lastEventId: text });
          try {
            assert.equal(res.status, 200, `Last-Event-ID ${JSON.stringify(text)}: expected 200, got ${res.status}`);
            const m = await res.stream.next(5000);
            assert.equal(m?.id, '1', `Last-Event-ID ${JSON.stringify(text)} starts at 1: first message id`);
            assert.equal(JSON.parse(m.data).mode, 'caught-up', `Last-Event-ID ${JSON.stringify(text)}: caught-up at 1`);
          } finally {
            res.stream?.close();
          }
        }
      },
    },
    {
      name: 'a task id in the path over 255 bytes is 400 naming taskId on every task endpoint (255 bytes is an unknown task: 404)',
      async run(ctx) {
        const long = 't'.repeat(256);
        assertError(await ctx.a.get(long), 400, 'invalid-request', 'taskId');
        assertError(await ctx.a.resume(long, { cursor: 0 }), 400, 'invalid-request', 'taskId');
        assertError(await ctx.a.events(long), 400, 'invalid-request', 'taskId');
        assertError(await ctx.a.deliver(long, uid('k')), 400, 'invalid-request', 'taskId');
        assertError(await ctx.exec.send(long, start(10)), 400, 'invalid-request', 'taskId');
        assertError(await ctx.a.get('t'.repeat(255)), 404, 'not-found');
      },
    },
    {
      name: 'webhook-timestamp must be an integer of seconds: a non-numeric or fractional one is 401 naming webhook-timestamp',
      async run(ctx) {
        const task = await runningTask(ctx);
        for (const ts of ['soon', '', `${Math.floor(Date.now() / 1000)}.5`, '1e9']) {
          const res = await ctx.exec.send(task.id, start(20), { headers: { 'webhook-timestamp': ts } });
          assertError(res, 401, 'unauthorized', 'webhook-timestamp');
        }
      },
    },
    {
      name: 'Idempotency-Key errors name the field: 422 on a create or a delivery, 400 when blank or missing',
      async run(ctx) {
        const key = uid('k');
        await ctx.a.createTask({ ttlMs: 60_000, maxAttempts: 1 }, { key });
        assertError(await ctx.a.create({ ttlMs: 60_000, maxAttempts: 2 }, { key }), 422, 'idempotency-key-reused', 'Idempotency-Key');
        assertError(await ctx.a.create({ ttlMs: 60_000, maxAttempts: 1 }, { key: ' ' }), 400, 'invalid-request', 'Idempotency-Key');
        const one = await succeededTask(ctx);
        const other = await succeededTask(ctx);
        const dk = uid('dk');
        assert.equal((await ctx.a.deliver(one.id, dk)).status, 201);
        assertError(await ctx.a.deliver(other.id, dk), 422, 'key-reused-for-other-task', 'Idempotency-Key');
        assertError(await ctx.a.deliver(other.id, ' '), 400, 'invalid-request', 'Idempotency-Key');
        assertError(await ctx.a.deliver(other.id), 400, 'invalid-request', 'Idempotency-Key');
      },
    },
  ],
};

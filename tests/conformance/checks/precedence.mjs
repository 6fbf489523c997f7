// PROTOCOL.md §Conventions › Error precedence: when a request is wrong in
// several ways, which error it gets.

import assert from 'node:assert/strict';
import { assertError } from '../lib/match.mjs';
import { start } from '../lib/events.mjs';
import { failedTask, runningTask, succeededTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';

const OVERSIZED = `{"ttlMs":60000,"maxAttempts":1,"input":"${'x'.repeat(70_000)}"}`;
const UNKNOWN = 'no-such-task-precedence';

export default {
  section: 'Error precedence',
  protocol: 'Conventions › Error precedence',
  checks: [
    {
      name: 'the route first: an unknown path is 404 and a wrong method 405, even without credentials',
      async run({ anon }) {
        assertError(await anon.http.request('GET', '/v1/nope'), 404, 'not-found');
        assertError(await anon.http.request('GET', `/v1/tasks/${UNKNOWN}/nope`), 404, 'not-found');
        assertError(await anon.http.request('DELETE', '/v1/tasks'), 405, 'method-not-allowed');
        assertError(await anon.http.request('PUT', `/v1/tasks/${UNKNOWN}`), 405, 'method-not-allowed');
      },
    },
    {
      name: 'then credentials: 401 before 404 (unknown task), 400 (bad parameters) and 413 (body too large)',
      async run({ anon }) {
        assertError(await anon.get(UNKNOWN), 401, 'unauthorized');
        assertError(await anon.resume(UNKNOWN, { cursor: 'x' }), 401, 'unauthorized');
        assertError(await anon.notifications({ limit: 5000 }), 401, 'unauthorized');
        assertError(await anon.create(OVERSIZED), 401, 'unauthorized');
        assertError(await anon.deliver(UNKNOWN), 401, 'unauthorized');
      },
    },
    {
      name: 'then parameters, headers and body (400, 413) before the task is looked up (404)',
      async run({ a, b }) {
        // The same 400 for an unknown task as for a known one: it reveals nothing.
        assertError(await a.resume(UNKNOWN, { cursor: 'x' }), 400, 'invalid-request', 'cursor');
        assertError(await a.resume(UNKNOWN, {}), 400, 'invalid-request', 'cursor');
        assertError(await a.resume(UNKNOWN, { cursor: 0, waitMs: 30_001 }), 400, 'invalid-request', 'waitMs');
        assertError(await a.resume(UNKNOWN, { cursor: 0, snapshot: 'yes' }), 400, 'invalid-request', 'snapshot');
        assertError(await a.events(UNKNOWN, { lastEventId: 'x' }), 400, 'invalid-request', 'Last-Event-ID');
        assertError(await a.events(UNKNOWN, { cursor: -1 }), 400, 'invalid-request', 'cursor');
        assertError(await a.deliver(UNKNOWN), 400, 'invalid-request', 'Idempotency-Key');
        assertError(await a.get('x'.repeat(256)), 400, 'invalid-request', 'taskId');
        if (b) {
          // Another tenant's task is unknown: the same 400.
          const theirs = await b.createTask();
          assertError(await a.resume(theirs.id, { cursor: 'x' }), 400, 'invalid-request', 'cursor');
        }
      },
    },
    {
      name: 'callbacks: the header checks come before anything about the task (400 for a bad webhook-id on an unknown task, never 404)',
      async run({ exec }) {
        const event = start(10);
        assertError(await exec.send(UNKNOWN, event, { id: ' ' }), 400, 'invalid-request', 'webhook-id');
        assertError(await exec.send(UNKNOWN, event, { id: 'i'.repeat(256) }), 400, 'invalid-request', 'webhook-id');
        assertError(await exec.send('t'.repeat(256), event), 400, 'invalid-request', 'taskId');
        // Good headers: an unknown task has no secret, so 401, never 404,
        // and an invalid event for it is 401 too (the signature comes first).
        assertError(await exec.send(UNKNOWN, event), 401, 'unauthorized');
        assertError(await exec.send(UNKNOWN, { ...event, atMs: -1 }), 401, 'unauthorized');
        assertError(await exec.send(UNKNOWN, event, { headers: { 'webhook-timestamp': 'soon' } }), 401, 'unauthorized', 'webhook-timestamp');
      },
    },
    {
      name: 'callbacks: a bad signature header (401) before a bad webhook-id (400) before an oversized Content-Length (413)',
      async run({ a, exec }) {
        const task = await runningTask({ a, exec });
        const big = JSON.stringify({ taskId: task.id, ...start(10), worker: 'w'.repeat(70_000) });
        assertError(await exec.send(task.id, null, { body: big, id: ' ', headers: { 'webhook-timestamp': 'x' } }), 401, 'unauthorized');
        assertError(await exec.send(task.id, null, { body: big, id: ' ' }), 400, 'invalid-request', 'webhook-id');
        assertError(await exec.send(task.id, null, { body: big }), 413, 'payload-too-large');
      },
    },
    {
      name: 'deliveries: a key used for another task is 422 even when this task has no result (not 409)',
      async run(ctx) {
        const done = await succeededTask(ctx);
        const key = uid('dk');
        assert.equal((await ctx.a.deliver(done.id, key)).status, 201, 'the first delivery under the key');
        const failed = await failedTask(ctx);
        assertError(await ctx.a.deliver(failed.id, key), 422, 'key-reused-for-other-task', 'Idempotency-Key');
        // With a fresh key, the task without a result is 409.
        assertError(await ctx.a.deliver(failed.id, uid('dk')), 409, 'not-succeeded');
      },
    },
  ],
};

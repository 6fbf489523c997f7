// PROTOCOL.md §Executor callback: callback ids, every transition rule
// reachable over HTTP, and event validation.

import assert from 'node:assert/strict';
import { assertError, assertMatches } from '../lib/match.mjs';
import { expire, fail, progress, start, succeed } from '../lib/events.mjs';
import { runningTask, succeededTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';
import { nowSeconds } from '../lib/sign.mjs';

const unchanged = (reason, extra = {}) => ({
  changed: false,
  duplicate: false,
  duplicateCallback: false,
  notify: false,
  reason,
  ...extra,
});
const changed = (reason, extra = {}) => ({
  changed: true,
  duplicate: false,
  duplicateCallback: false,
  notify: false,
  reason,
  ...extra,
});

/** Applies each [event, expected transition] in order. */
async function play(exec, id, steps) {
  for (const [event, expected, opts] of steps) {
    const t = await exec.apply(id, event, opts);
    assertMatches(t, expected, `${event.type} ${JSON.stringify(event)}`);
  }
}

export default {
  section: 'Executor callback',
  protocol: 'Executor callback',
  checks: [
    {
      name: 'duplicate: the same webhook-id and event is duplicate-callback and changes nothing',
      async run({ a, exec }) {
        const task = await a.createTask();
        const id = uid('cb');
        await play(exec, task.id, [
          [start(10), changed('started', { version: 1, state: 'running' }), { id }],
          [start(10), unchanged('duplicate-callback', { duplicate: true, duplicateCallback: true, version: 1, state: 'running' }), { id }],
        ]);
        await a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1 } });
      },
    },
    {
      name: 'conflict: the same webhook-id with another event is callback-conflict and changes nothing',
      async run({ a, exec }) {
        const task = await a.createTask();
        const id = uid('cb');
        await play(exec, task.id, [
          [start(10), changed('started', { version: 1 }), { id }],
          [progress(20, 10), unchanged('callback-conflict', { version: 1 }), { id }],
          [start(10), unchanged('duplicate-callback', { duplicate: true, duplicateCallback: true, version: 1 }), { id }],
          [progress(20, 10), changed('progress', { version: 2 })],
        ]);
      },
    },
    {
      name: 'a callback id belongs to the task it changed: on another task of the tenant it is refused (422)',
      async run({ a, exec }) {
        const [t1, t2] = [await a.createTask(), await a.createTask()];
        const id = uid('cb');
        await play(exec, t1.id, [[start(10), changed('started', { version: 1 }), { id }]]);
        assertError(await exec.send(t2.id, start(10), { id }), 422, 'callback-id-reused-for-other-task', 'webhook-id');
        await a.answer(t2.id, 0, { mode: 'caught-up', task: { version: 0, state: 'queued' } });
      },
    },
    {
      name: 'reordered: succeed before start is not-running; after the start its redelivery succeeds',
      async run({ a, exec, feedStart }) {
        const task = await a.createTask({ ttlMs: 60_000, maxAttempts: 1 });
        const id = uid('cb-succeed');
        const s = succeed(700, 'r', 'h');
        await play(exec, task.id, [
          [s, unchanged('not-running', { version: 0, state: 'queued' }), { id }],
          [start(600), changed('started', { version: 1 })],
          // Sent again as a retry is: signed again, with a fresh timestamp.
          [s, changed('succeeded', { notify: true, version: 2, state: 'succeeded' }), { id, timestamp: nowSeconds(1) }],
          [s, unchanged('duplicate-callback', { duplicate: true, duplicateCallback: true, version: 2 }), { id }],
        ]);
        const mine = (await a.feedSince(feedStart.a)).filter((n) => n.taskId === task.id);
        assertMatches(mine, [{ state: 'succeeded', key: `${task.id}:succeeded:2` }], 'notifications for the task');
      },
    },
    {
      name: 'start and progress rules: already-running, not-running, stale-progress, duplicate-progress',
      async run({ a, exec }) {
        const task = await a.createTask();
        await play(exec, task.id, [
          [progress(5, 10), unchanged('not-running', { version: 0, state: 'queued' })],
          [fail(6, 'early', true), unchanged('not-running', { version: 0 })],
          [start(10), changed('started', { version: 1, state: 'running' })],
          [start(11, 'worker-2'), unchanged('already-running', { duplicate: true, version: 1 })],
          [progress(20, 40), changed('progress', { version: 2 })],
          [progress(30, 30), unchanged('stale-progress', { version: 2 })],
          [progress(40, 40), unchanged('duplicate-progress', { duplicate: true, version: 2 })],
        ]);
        assertMatches(await a.task(task.id), { progress: 40, attempts: 1, version: 2 });
      },
    },
    {
      name: 'retries: requeued while attempts are left, then failed; a success clears the earlier error',
      async run({ a, exec, feedStart }) {
        const task = await a.createTask({ ttlMs: 3_600_000, maxAttempts: 2 });
        await play(exec, task.id, [
          [start(10), changed('started', { version: 1 })],
          [progress(15, 50), changed('progress', { version: 2 })],
          [fail(20, 'timeout', true), changed('requeued', { version: 3, state: 'queued' })],
        ]);
        assertMatches(await a.task(task.id), { state: 'queued', progress: 0, attempts: 1, error: 'timeout' }, 'after the requeue');
        await play(exec, task.id, [
          [start(30), changed('started', { version: 4, state: 'running' })],
          [fail(40, 'timeout again', true), changed('failed', { notify: true, version: 5, state: 'failed' })],
        ]);
        assertMatches(await a.task(task.id), { state: 'failed', attempts: 2, error: 'timeout again' }, 'out of attempts');

        const other = await a.createTask({ ttlMs: 3_600_000, maxAttempts: 3 });
        await play(exec, other.id, [
          [start(10), changed('started')],
          [fail(20, 'timeout', true), changed('requeued')],
          [start(30), changed('started', { version: 3 })],
          [succeed(40, 'r', 'h'), changed('succeeded', { notify: true, version: 4 })],
        ]);
        assertMatches(await a.task(other.id), { state: 'succeeded', error: null, resultRef: 'r', resultHash: 'h', progress: 100 }, 'success after a retry');

        const final = await a.createTask({ ttlMs: 3_600_000, maxAttempts: 3 });
        await play(exec, final.id, [
          [start(10), changed('started')],
          [fail(20, 'bad input', false), changed('failed', { notify: true, version: 2, state: 'failed' })],
        ]);
        const mine = (await a.feedSince(feedStart.a)).filter((n) => [task.id, final.id].includes(n.taskId));
        assertMatches(mine, [
          { taskId: task.id, state: 'failed', key: `${task.id}:failed:5`, atMs: 40 },
          { taskId: final.id, state: 'failed', key: `${final.id}:failed:2`, atMs: 20 },
        ], 'one notification per failed task, none for the requeue');
      },
    },
    {
      name: 'expiry by event: expire, or any event at/after expiresAtMs, expires the task (recorded at expiresAtMs)',
      async run({ a, exec }) {
        const t1 = await runningTask({ a, exec });
        await play(exec, t1.id, [
          [expire(500), changed('expired', { notify: true, version: 2, state: 'expired' })],
          [expire(600), unchanged('duplicate-expire', { duplicate: true, version: 2 })],
        ]);
        await a.answer(t1.id, 1, { mode: 'delta', events: [{ version: 2, event: { type: 'expire', atMs: t1.expiresAtMs } }] });

        const t2 = await runningTask({ a, exec });
        await play(exec, t2.id, [
          [progress(t2.expiresAtMs, 90), changed('expired', { notify: true, version: 2, state: 'expired' })],
        ]);
        await a.answer(t2.id, 1, { mode: 'delta', events: [{ version: 2, event: { type: 'expire', atMs: t2.expiresAtMs } }], task: { progress: 0 } });

        const t3 = await a.createTask();
        await play(exec, t3.id, [[start(t3.expiresAtMs - 0.5), changed('started', { version: 1 })]]);
      },
    },
    {
      name: 'a terminal task absorbs everything: duplicate-result, result-conflict, terminal-conflict',
      async run(ctx) {
        const { a, exec } = ctx;
        const task = await succeededTask(ctx, { resultRef: 'r1', resultHash: 'sha256:one' });
        await play(exec, task.id, [
          [succeed(30, 'r-other-ref', 'sha256:one'), unchanged('duplicate-result', { duplicate: true, version: 2 })],
          [succeed(30, 'r2', 'sha256:two'), unchanged('result-conflict', { version: 2, state: 'succeeded' })],
          [start(40), unchanged('terminal-conflict', { version: 2 })],
          [progress(40, 99), unchanged('terminal-conflict', { version: 2 })],
          [fail(40, 'late', false), unchanged('terminal-conflict', { version: 2 })],
          [expire(50), unchanged('terminal-conflict', { version: 2 })],
        ]);
        assertMatches(await a.task(task.id), { state: 'succeeded', version: 2, resultRef: 'r1', resultHash: 'sha256:one' });

        const failed = await runningTask(ctx);
        await play(exec, failed.id, [
          [fail(20, 'x', false), changed('failed', { notify: true })],
          [succeed(30, 'r', 'h'), unchanged('terminal-conflict', { version: 2 })],
          [expire(30), unchanged('terminal-conflict', { version: 2 })],
        ]);
      },
    },
    {
      name: 'invalid events: 400 naming the field, nothing recorded, the callback id not burned',
      async run(ctx) {
        const { a, exec } = ctx;
        const task = await runningTask(ctx, { ttlMs: 60_000, maxAttempts: 3 });
        const id = uid('cb');
        const late = task.expiresAtMs + 1000;
        const cases = [
          [{ type: 'progress', atMs: late, progress: 101, cursor: 'c' }, 'progress'],
          [{ type: 'progress', atMs: late, progress: 25.5, cursor: 'c' }, 'progress'],
          [{ type: 'progress', atMs: 20, progress: -1, cursor: 'c' }, 'progress'],
          [{ type: 'progress', atMs: 20, progress: 10 }, 'cursor'],
          [{ type: 'start', atMs: -1, worker: 'w' }, 'atMs'],
          [{ type: 'start', atMs: '10', worker: 'w' }, 'atMs'],
          [{ type: 'start', atMs: null, worker: 'w' }, 'atMs'],
          [{ type: 'launch', atMs: 10 }, 'type'],
          [{ atMs: 10 }, undefined],
          [{ type: 'succeed', atMs: 20, resultRef: 'r' }, 'resultHash'],
          [{ type: 'succeed', atMs: 20, resultRef: '  ', resultHash: 'h' }, 'resultRef'],
          [{ type: 'fail', atMs: 20, error: 'e', retryable: 'no' }, 'retryable'],
        ];
        for (const [event, field] of cases) {
          assertError(await exec.send(task.id, event, { id }), 400, 'invalid-request', field);
        }
        for (const body of ['{"type":"start"', '[]', 'null', '']) {
          assertError(await exec.send(task.id, null, { id, body }), 400, 'invalid-request');
        }
        await a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1, state: 'running', progress: 0 } });
        await play(exec, task.id, [[progress(20, 10), changed('progress', { version: 2 }), { id }]]);
      },
    },
    {
      name: 'unknown event fields are ignored, times may be fractional; callbacks need no bearer token',
      async run({ a, exec }) {
        const task = await a.createTask();
        await play(exec, task.id, [
          [{ ...start(10.25), note: 'from the future' }, changed('started', { version: 1 })],
          [progress(20.5, 5), changed('progress', { version: 2 })],
        ]);
        await a.answer(task.id, 0, {
          mode: 'delta',
          events: [{ version: 1, event: { type: 'start', atMs: 10.25 } }, { version: 2, event: { atMs: 20.5 } }],
        });
      },
    },
    {
      name: 'unknown task: 401 (it has no secret to check against); a webhook-id over 255 bytes: 400',
      async run({ a, exec }) {
        assertError(await exec.send('no-such-task-c0de', start(10)), 401, 'unauthorized');
        const task = await a.createTask();
        assertError(await exec.send(task.id, start(10), { id: 'i'.repeat(256) }), 400, 'invalid-request');
        const t = await exec.apply(task.id, start(10), { id: uid('i').padEnd(255, 'i') });
        assert.equal(t.reason, 'started', 'a 255-byte webhook-id is fine');
      },
    },
  ],
};

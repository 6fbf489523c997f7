// PROTOCOL.md §Executor callback, "Secrets and binding" and "Order of the
// checks, and limits": a signature holds for one task of one tenant, a
// tenant's callback id belongs to one task, a signed request is used
// once, each signature header comes once, and the headers are judged
// before the body is read.

import assert from 'node:assert/strict';
import { assertError, assertMatches } from '../lib/match.mjs';
import { fail, progress, start, succeed } from '../lib/events.mjs';
import { runningTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';
import { rawPost } from '../lib/raw.mjs';
import { callbackBody, nowSeconds, signedHeaders } from '../lib/sign.mjs';

/** A callback as an executor sent it: the exact headers and bytes. */
function capture(secret, taskId, event, id = uid('cb')) {
  const body = callbackBody(taskId, event);
  return { id, body, headers: signedHeaders(secret, id, body) };
}

/** Sends a captured callback, unchanged, to `taskId`'s callback path. */
function replay(exec, taskId, captured) {
  return exec.send(taskId, null, { body: captured.body, headers: captured.headers, id: captured.id });
}

/** A running task of tenant B, started by B's executor (or A's when B has no secret of its own). */
async function runningTaskB(ctx) {
  const task = await ctx.b.createTask();
  await (ctx.execB ?? ctx.exec).drive(task.id, [start(100)]);
  return task;
}

const SIGNATURE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'];

export default {
  section: 'Executor callback: secrets, binding and the order of the checks',
  protocol: 'Executor callback › Secrets and binding',
  checks: [
    {
      name: 'a callback replayed unchanged on another task of the tenant: 401, nothing changes',
      async run(ctx) {
        const [t1, t2] = [await runningTask(ctx), await runningTask(ctx)];
        const done = capture(ctx.config.secret, t1.id, succeed(300, 'blob://r1', 'sha256:r1'));
        assertMatches(await ctx.exec.apply(t1.id, null, { body: done.body, headers: done.headers }), { reason: 'succeeded' });
        assertError(await replay(ctx.exec, t2.id, done), 401, 'unauthorized', 'taskId');
        await ctx.a.answer(t2.id, 1, { mode: 'caught-up', task: { state: 'running', version: 1 } });
      },
    },
    {
      name: "a callback replayed unchanged on another tenant's task: 401, nothing changes",
      needsTokenB: true,
      async run(ctx) {
        const mine = await runningTask(ctx);
        const theirs = await runningTaskB(ctx);
        const done = capture(ctx.config.secret, mine.id, succeed(300, 'blob://mine', 'sha256:mine'));
        assertMatches(await ctx.exec.apply(mine.id, null, { body: done.body, headers: done.headers }), { reason: 'succeeded' });
        assertError(await replay(ctx.exec, theirs.id, done), 401, 'unauthorized');
        await ctx.b.answer(theirs.id, 1, { mode: 'caught-up', task: { state: 'running', version: 1 } });
        const task = await ctx.b.task(theirs.id);
        assert.equal(task.resultRef, undefined, "tenant B's task took tenant A's result");
      },
    },
    {
      name: "a tenant's secret does not sign for another tenant's tasks; each tenant's own does",
      needsTokenB: true,
      needsSecretB: true,
      async run(ctx) {
        const theirs = await runningTaskB(ctx);
        // Signed with A's secret, for B's task, naming it: a valid
        // Standard Webhooks signature, of the wrong tenant.
        assertError(await ctx.exec.send(theirs.id, progress(200, 10)), 401, 'unauthorized', 'webhook-signature');
        await ctx.b.answer(theirs.id, 1, { mode: 'caught-up', task: { version: 1 } });
        assertMatches(await ctx.execB.apply(theirs.id, progress(200, 10)), { reason: 'progress', version: 2 });
        const mine = await ctx.a.createTask();
        assertError(await ctx.execB.send(mine.id, start(10)), 401, 'unauthorized', 'webhook-signature');
        await ctx.a.answer(mine.id, 0, { mode: 'caught-up', task: { version: 0 } });
      },
    },
    {
      // Misreadings caught: a body without taskId accepted (the replay
      // hole), or refused after its callback id was remembered, so the
      // seed-000 executor's fixed resend is a callback-conflict
      // (PROTOCOL.md §Versioning: how an old executor learns what changed).
      name: 'a body that names no task, or names it with a non-string: 400 naming taskId, nothing changes; the same callback id with taskId then applies',
      async run(ctx) {
        const task = await runningTask(ctx);
        const id = uid('cb');
        for (const body of [JSON.stringify(progress(200, 10)), JSON.stringify({ taskId: 7, ...progress(200, 10) })]) {
          assertError(await ctx.exec.send(task.id, null, { body, id }), 400, 'invalid-request', 'taskId');
        }
        await ctx.a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1 } });
        const fixed = await ctx.exec.apply(task.id, progress(200, 10), { id });
        assert.equal(fixed.reason, 'progress', `the same callback id, now with taskId: expected progress, got ${fixed.reason}`);
      },
    },
    {
      name: 'a callback id remembered on one task, sent for another of the tenant: 422 callback-id-reused-for-other-task',
      async run(ctx) {
        const [t1, t2] = [await runningTask(ctx), await runningTask(ctx)];
        const id = uid('cb');
        assertMatches(await ctx.exec.apply(t1.id, progress(200, 10), { id }), { reason: 'progress', version: 2 });
        assertError(await ctx.exec.send(t2.id, progress(200, 10), { id }), 422, 'callback-id-reused-for-other-task', 'webhook-id');
        assertError(await ctx.exec.send(t2.id, fail(210, 'other', false), { id }), 422, 'callback-id-reused-for-other-task');
        await ctx.a.answer(t2.id, 1, { mode: 'caught-up', task: { state: 'running', version: 1 } });
        // On its own task, the id is still a redelivery.
        assertMatches(await ctx.exec.apply(t1.id, progress(200, 10), { id }), { reason: 'duplicate-callback', version: 2 });
      },
    },
    {
      name: 'an id that changed nothing is not remembered: another task may still use it',
      async run(ctx) {
        const queued = await ctx.a.createTask();
        const running = await runningTask(ctx);
        const id = uid('cb');
        assertMatches(await ctx.exec.apply(queued.id, progress(200, 10), { id }), { reason: 'not-running', changed: false });
        assertMatches(await ctx.exec.apply(running.id, progress(200, 10), { id }), { reason: 'progress', version: 2 });
      },
    },
    {
      name: 'a signed request is used once: a captured fail that changed nothing, replayed after a start, changes nothing; signed again it applies',
      async run(ctx) {
        const task = await ctx.a.createTask();
        const early = capture(ctx.config.secret, task.id, fail(200, 'quota', false));
        assertMatches(await ctx.exec.apply(task.id, null, { body: early.body, headers: early.headers }), { reason: 'not-running', changed: false });
        assertMatches(await ctx.exec.apply(task.id, start(100)), { reason: 'started', version: 1 });
        assertMatches(await ctx.exec.apply(task.id, null, { body: early.body, headers: early.headers }),
          { reason: 'duplicate-callback', duplicateCallback: true, changed: false, state: 'running', version: 1 }, 'the captured bytes again');
        await ctx.a.answer(task.id, 1, { mode: 'caught-up', task: { state: 'running', version: 1 } });
        // A resend is signed again, with a fresh timestamp: judged as the first was.
        const resent = { id: early.id, body: early.body, timestamp: nowSeconds(1) };
        assertMatches(await ctx.exec.apply(task.id, null, resent), { changed: true, duplicateCallback: false, state: 'failed', version: 2 });
      },
    },
    ...SIGNATURE_HEADERS.map((name) => ({
      name: `${name} sent twice (even identical): 401 naming it, nothing changes`,
      async run(ctx) {
        const task = await runningTask(ctx);
        const c = capture(ctx.config.secret, task.id, progress(200, 10));
        const headers = Object.entries(c.headers);
        headers.push([name, c.headers[name]]);
        const res = await rawPost(ctx.exec.http, `/v1/tasks/${task.id}/callbacks`, { headers, body: c.body });
        assertError(res, 401, 'unauthorized', name);
        await ctx.a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1 } });
        assertMatches(await ctx.exec.apply(task.id, null, { body: c.body, headers: c.headers }), { reason: 'progress' }, 'the same callback, each header once');
      },
    })),
    {
      name: 'headers are judged before the body: unsigned, stale or oversized callbacks are answered without their body',
      async run(ctx) {
        const task = await runningTask(ctx);
        const stale = signedHeaders(ctx.config.secret, uid('cb'), '{}', { timestamp: nowSeconds(-600) });
        const fresh = signedHeaders(ctx.config.secret, uid('cb'), '{}');
        const cases = [
          ['no signature headers', [], 60_000, 401],
          ['a stale timestamp', Object.entries(stale), 60_000, 401],
          ['a Content-Length over 64 KiB', Object.entries(fresh), 10_000_000, 413],
        ];
        for (const [label, headers, length, status] of cases) {
          // One byte of the body is sent; the rest never comes.
          const res = await rawPost(ctx.exec.http, `/v1/tasks/${task.id}/callbacks`, { headers, body: '{', length, waitMs: 4000 });
          assert.equal(res.status, status, `${label}: expected ${status} before the body, got ${res.status ?? 'no answer'}`);
          assert.ok(res.ms < 3000, `${label}: answered after ${res.ms} ms`);
        }
        await ctx.a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1 } });
      },
    },
  ],
};

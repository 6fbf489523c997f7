// PROTOCOL.md §Resume, long-poll (waitMs). Time bounds are protocol-level
// and generous: "promptly" is within 2 s of the change, "about waitMs" is
// not before waitMs and within 5 s after it.

import assert from 'node:assert/strict';
import { assertError, assertResumeResponse } from '../lib/match.mjs';
import { fail, progress } from '../lib/events.mjs';
import { runningTask, sleep } from '../lib/scenarios.mjs';

const PROMPT_MS = 2000;
const SLACK_MS = 5000;

/** Starts a held resume and records when it settled. */
function hold(a, id, params) {
  const started = Date.now();
  const held = { settledAt: null };
  held.promise = a.resume(id, params).then((res) => {
    held.settledAt = Date.now();
    held.elapsed = held.settledAt - started;
    return res;
  });
  held.promise.catch(() => {});
  return held;
}

export default {
  section: 'Resume: long-poll',
  protocol: 'Resume',
  checks: [
    {
      name: 'a long-poll on a terminal task answers caught-up at once, without waiting (nothing can change any more)',
      async run(ctx) {
        const task = await runningTask(ctx);
        await ctx.exec.drive(task.id, [fail(200, 'gave up', false)]);
        // Held would be about waitMs; a busy backend answering "at once"
        // may still take a second or two (the client's own test: an answer
        // in under half the wait was not held).
        const held = hold(ctx.a, task.id, { cursor: 2, waitMs: 20_000 });
        const res = await held.promise;
        assertResumeResponse(res, { mode: 'caught-up', task: { version: 2, state: 'failed' } });
        assert.ok(held.elapsed < 10_000, `the long-poll on a failed task was held ${held.elapsed} ms; a terminal task's caught-up answer comes at once`);
      },
    },
    {
      name: 'a held request answers the delta promptly after a callback changes the task',
      async run(ctx) {
        const task = await runningTask(ctx);
        const held = hold(ctx.a, task.id, { cursor: 1, waitMs: 20_000 });
        await sleep(500);
        assert.equal(held.settledAt, null, `the request with nothing new answered after ${held.elapsed} ms instead of waiting`);
        const event = progress(500, 40);
        const sentAt = Date.now();
        await ctx.exec.drive(task.id, [event]);
        const res = await held.promise;
        assertResumeResponse(res, { mode: 'delta', versions: [2], events: [{ version: 2, event }], task: { version: 2, progress: 40 } });
        const lag = held.settledAt - sentAt;
        assert.ok(lag <= PROMPT_MS, `the held request answered ${lag} ms after the callback was sent (bound: ${PROMPT_MS} ms)`);
      },
    },
    {
      name: 'every request held on a task wakes on one change',
      async run(ctx) {
        const task = await runningTask(ctx);
        const helds = [0, 1, 2].map(() => hold(ctx.a, task.id, { cursor: 1, waitMs: 20_000 }));
        await sleep(500);
        const sentAt = Date.now();
        await ctx.exec.drive(task.id, [progress(500, 10)]);
        for (const held of helds) {
          assertResumeResponse(await held.promise, { mode: 'delta', versions: [2] });
          assert.ok(held.settledAt - sentAt <= PROMPT_MS, `a held request answered ${held.settledAt - sentAt} ms after the change`);
        }
      },
    },
    {
      name: 'nothing new: caught-up after about waitMs',
      async run(ctx) {
        const task = await runningTask(ctx);
        const waitMs = 1500;
        const held = hold(ctx.a, task.id, { cursor: 1, waitMs });
        const res = await held.promise;
        assertResumeResponse(res, { mode: 'caught-up', task: { version: 1 } });
        assert.ok(held.elapsed >= waitMs - 50, `caught-up after ${held.elapsed} ms, before waitMs (${waitMs}) ended`);
        assert.ok(held.elapsed <= waitMs + SLACK_MS, `caught-up after ${held.elapsed} ms, long after waitMs (${waitMs})`);
      },
    },
    {
      name: 'something new already (cursor < version): answered at once, even with waitMs=30000',
      async run(ctx) {
        const task = await runningTask(ctx);
        const held = hold(ctx.a, task.id, { cursor: 0, waitMs: 30_000 });
        assertResumeResponse(await held.promise, { mode: 'delta', versions: [1] });
        assert.ok(held.elapsed <= SLACK_MS, `a delta that was ready took ${held.elapsed} ms`);
      },
    },
    {
      name: 'a cursor ahead of the version is not held: snapshot at once',
      async run(ctx) {
        const task = await runningTask(ctx);
        const held = hold(ctx.a, task.id, { cursor: 7, waitMs: 20_000 });
        assertResumeResponse(await held.promise, { mode: 'snapshot', task: { version: 1 } });
        assert.ok(held.elapsed <= SLACK_MS, `a snapshot that was ready took ${held.elapsed} ms`);
      },
    },
    {
      name: 'waitMs=0: caught-up without waiting',
      async run(ctx) {
        const task = await runningTask(ctx);
        const held = hold(ctx.a, task.id, { cursor: 1, waitMs: 0 });
        assertResumeResponse(await held.promise, { mode: 'caught-up' });
        assert.ok(held.elapsed <= PROMPT_MS, `waitMs=0 took ${held.elapsed} ms`);
      },
    },
    {
      name: 'bad waitMs (over 30000, negative, fractional, not a number): 400 naming waitMs',
      async run(ctx) {
        const task = await runningTask(ctx);
        for (const waitMs of [30_001, -1, 1.5, 'soon']) {
          assertError(await ctx.a.resume(task.id, { cursor: 1, waitMs }), 400, 'invalid-request', 'waitMs');
        }
      },
    },
  ],
};

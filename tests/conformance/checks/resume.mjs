// PROTOCOL.md §Resume: the answer table, caching and parameter errors.

import assert from 'node:assert/strict';
import { assertError, assertMatches, MAX_SAFE } from '../lib/match.mjs';
import { taskAt } from '../lib/scenarios.mjs';
import { changes } from '../lib/events.mjs';

const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** The expected delta entries after `cursor` for a task built from `events`. */
const entriesAfter = (events, cursor) =>
  events.slice(cursor).map((event, i) => ({ version: cursor + 1 + i, event }));

export default {
  section: 'Resume',
  protocol: 'Resume',
  checks: [
    {
      name: 'cursor == version: caught-up (a new task at version 0 too)',
      async run(ctx) {
        const fresh = await ctx.a.createTask();
        await ctx.a.answer(fresh.id, 0, { mode: 'caught-up', task: { id: fresh.id, version: 0, state: 'queued' } });
        const { task } = await taskAt(ctx, 2);
        await ctx.a.answer(task.id, 2, { mode: 'caught-up', task: { id: task.id, version: 2, state: 'running' } });
      },
    },
    {
      name: '0 < version − cursor ≤ retention: delta with the entries after the cursor, oldest first',
      async run(ctx) {
        const n = ctx.retention + 2;
        const { task, events } = await taskAt(ctx, n);
        for (const cursor of [n - 1, n - 2, 3]) {
          await ctx.a.answer(task.id, cursor, {
            mode: 'delta',
            versions: range(cursor + 1, n),
            events: entriesAfter(events, cursor),
            task: { id: task.id, version: n },
          });
        }
      },
    },
    {
      name: 'a gap exactly equal to retention is still a delta',
      async run(ctx) {
        const n = ctx.retention + 2;
        const { task, events } = await taskAt(ctx, n);
        const cursor = n - ctx.retention;
        await ctx.a.answer(task.id, cursor, {
          mode: 'delta',
          versions: range(cursor + 1, n),
          events: entriesAfter(events, cursor),
        });
      },
    },
    {
      name: 'version − cursor > retention: snapshot',
      async run(ctx) {
        const n = ctx.retention + 2;
        const { task } = await taskAt(ctx, n);
        for (const cursor of [n - ctx.retention - 1, 0]) {
          await ctx.a.answer(task.id, cursor, { mode: 'snapshot', events: [], task: { id: task.id, version: n } });
        }
      },
    },
    {
      name: 'cursor > version (a view the server never had): snapshot',
      async run(ctx) {
        const { task } = await taskAt(ctx, 2);
        for (const cursor of [3, 1000, MAX_SAFE]) {
          await ctx.a.answer(task.id, cursor, { mode: 'snapshot', task: { version: 2 } });
        }
      },
    },
    {
      name: 'snapshot=1: snapshot whatever the cursor',
      async run(ctx) {
        const { task } = await taskAt(ctx, 3);
        for (const cursor of [3, 2, 0]) {
          await ctx.a.answer(task.id, cursor, { mode: 'snapshot', events: [], task: { version: 3 } }, { snapshot: 1 });
        }
      },
    },
    {
      // Misreading caught: the answer's task as GET shows it, with kind
      // and input (a large input sent on every poll), or with fields GET
      // lacks; the TaskView is GET's fields without kind, input, batchId.
      name: 'every answer carries the task: exactly the fields GET shows but kind, input and batchId, without history (epoch beside it); Cache-Control: no-store',
      async run(ctx) {
        const task = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 2, kind: 'resume-shape', input: { doc: 'x'.repeat(100) } });
        await ctx.exec.drive(task.id, changes(3));
        const view = await ctx.a.task(task.id);
        const ONLY_GET = ['kind', 'input', 'batchId', 'epoch'];
        const expected = Object.fromEntries(Object.entries(view).filter(([k]) => !ONLY_GET.includes(k)));
        // caught-up, delta and snapshot (assertResumeResponse checks no-store and no history).
        for (const [cursor, params] of [[3, {}], [1, {}], [0, { snapshot: 1 }]]) {
          const answer = await ctx.a.answer(task.id, cursor, undefined, params);
          const what = `answer to cursor ${cursor} ${JSON.stringify(params)}: task`;
          assert.deepEqual(Object.keys(answer.task).sort(), Object.keys(expected).sort(), `${what}: the fields of GET but kind, input, batchId and epoch`);
          assertMatches(answer.task, expected, what);
        }
      },
    },
    {
      name: 'bad cursor (missing, negative, fractional, too large, not a number): 400 naming cursor',
      async run(ctx) {
        const { task } = await taskAt(ctx, 1);
        const cases = [{}, { cursor: -1 }, { cursor: 1.5 }, { cursor: MAX_SAFE + 1 }, { cursor: 'abc' }, { cursor: '' }];
        for (const params of cases) {
          const res = await ctx.a.resume(task.id, params);
          assertError(res, 400, 'invalid-request', 'cursor');
        }
      },
    },
    {
      name: 'unknown query parameters are ignored (new optional parameters may appear within /v1)',
      async run(ctx) {
        const { task } = await taskAt(ctx, 2);
        await ctx.a.answer(task.id, 1, { mode: 'delta', versions: [2] }, { futureParam: 'x', 'x-trace': 1 });
      },
    },
    {
      name: 'unknown task: 404',
      async run({ a }) {
        assertError(await a.resume('no-such-task-7f3a', { cursor: 0 }), 404, 'not-found');
      },
    },
  ],
};

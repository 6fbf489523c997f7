// PROTOCOL.md §Conventions, authentication: every task belongs to the
// tenant that created it; another tenant gets 404, never 403.

import assert from 'node:assert/strict';
import { assertError } from '../lib/match.mjs';
import { expire } from '../lib/events.mjs';
import { succeededTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';

export default {
  section: 'Tenant isolation',
  protocol: 'Conventions',
  checks: [
    {
      name: "another tenant's task is 404 not-found on every endpoint, and stays untouched",
      needsTokenB: true,
      async run(ctx) {
        const { a, b } = ctx;
        const task = await succeededTask(ctx);
        const key = uid('deliver');
        assertError(await b.get(task.id), 404, 'not-found');
        assertError(await b.resume(task.id, { cursor: 0 }), 404, 'not-found');
        assertError(await b.resume(task.id, { cursor: 0, waitMs: 1000 }), 404, 'not-found');
        assertError(await b.events(task.id, { lastEventId: 0 }), 404, 'not-found');
        assertError(await b.deliver(task.id, key), 404, 'not-found');
        const res = await a.deliver(task.id, key);
        assert.equal(res.status, 201, `tenant A's first delivery under the key tenant B tried: expected 201, got ${res.status}`);
      },
    },
    {
      name: 'notification feeds are separate',
      needsTokenB: true,
      async run({ a, b, exec, execB, feedStart }) {
        const ta = await a.createTask();
        const tb = await b.createTask();
        await exec.drive(ta.id, [expire(10)]);
        // Tenant B's executor (B's own secret, when it has one).
        await (execB ?? exec).drive(tb.id, [expire(10)]);
        const feedA = await a.feedSince(feedStart.a);
        const feedB = await b.feedSince(feedStart.b);
        assert.equal(feedA.filter((n) => n.taskId === ta.id).length, 1, "A's task in A's feed");
        assert.equal(feedB.filter((n) => n.taskId === tb.id).length, 1, "B's task in B's feed");
        assert.ok(!feedB.some((n) => n.taskId === ta.id), "A's task in B's feed");
        assert.ok(!feedA.some((n) => n.taskId === tb.id), "B's task in A's feed");
      },
    },
    {
      name: 'idempotency keys are per tenant (create and delivery)',
      needsTokenB: true,
      async run(ctx) {
        const { a, b } = ctx;
        const key = uid('shared');
        const ta = await a.createTask({ ttlMs: 60_000, maxAttempts: 1 }, { key });
        const tb = await b.createTask({ ttlMs: 60_000, maxAttempts: 2 }, { key });
        assert.notEqual(ta.id, tb.id, 'the same key under two tenants makes two tasks');
        const sa = await succeededTask({ ...ctx, a });
        const sb = await succeededTask({ ...ctx, a: b, exec: ctx.execB ?? ctx.exec });
        const dkey = uid('deliver');
        assert.equal((await a.deliver(sa.id, dkey)).status, 201);
        assert.equal((await b.deliver(sb.id, dkey)).status, 201, "tenant B's first delivery under a key tenant A used");
        assertError(await a.get(tb.id), 404, 'not-found');
      },
    },
  ],
};

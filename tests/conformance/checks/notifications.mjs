// PROTOCOL.md §Notifications feed.

import assert from 'node:assert/strict';
import { assertError, assertMatches, isCounter, MAX_SAFE } from '../lib/match.mjs';
import { expire, fail, start, succeed } from '../lib/events.mjs';

/** Runs `fn` over `items` with at most `n` in flight. */
async function pool(items, n, fn) {
  const queue = [...items];
  await Promise.all(Array.from({ length: n }, async () => {
    while (queue.length > 0) await fn(queue.shift());
  }));
}

export default {
  section: 'Notifications feed',
  protocol: 'Notifications feed',
  checks: [
    {
      name: 'seq rises in commit order within a tenant\'s feed but need not be consecutive: paging by next works across gaps',
      needsTokenB: true,
      async run({ a, b, exec, execB, feedStart }) {
        const mine = [];
        for (let i = 0; i < 3; i += 1) {
          const t = await a.createTask();
          await exec.drive(t.id, [expire(10)]);
          mine.push(t.id);
          // Another tenant's notification in between (with one counter for
          // every tenant, as in the reference server, this leaves a gap).
          const o = await b.createTask();
          await (execB ?? exec).drive(o.id, [expire(10)]);
        }
        const feed = (await a.feedSince(feedStart.a)).filter((n) => mine.includes(n.taskId));
        assert.deepEqual(feed.map((n) => n.taskId), mine, 'the three notifications, in commit order');
        assert.ok(feed[0].seq < feed[1].seq && feed[1].seq < feed[2].seq, `seq rises: ${feed.map((n) => n.seq)}`);
        // One page at a time from the first: each page is exactly the next one.
        let after = feed[0].seq;
        for (const expected of feed.slice(1)) {
          const later = (await a.feedSince(after)).filter((n) => mine.includes(n.taskId));
          assert.equal(later[0]?.seq, expected.seq, `after=${after}: the next notification is seq ${expected.seq}`);
          after = later[0].seq;
        }
        assert.ok(!(await b.feedSince(feedStart.b)).some((n) => mine.includes(n.taskId)), "tenant A's notifications are not in B's feed");
      },
    },
    {
      name: 'one entry per terminal task, in commit order, keyed taskId:state:version',
      async run({ a, exec, feedStart }) {
        const ok = await a.createTask();
        const failed = await a.createTask({ ttlMs: 3_600_000, maxAttempts: 2 });
        const expired = await a.createTask();
        await exec.drive(failed.id, [start(10), fail(20, 'flaky', true), start(30)]);
        await exec.drive(ok.id, [start(10), succeed(50, 'r', 'h')]);
        await exec.drive(failed.id, [fail(60, 'broken', false)]);
        await exec.drive(expired.id, [expire(70)]);
        const ids = [ok.id, failed.id, expired.id];
        const mine = (await a.feedSince(feedStart.a)).filter((n) => ids.includes(n.taskId));
        assertMatches(mine, [
          { taskId: ok.id, state: 'succeeded', key: `${ok.id}:succeeded:2`, atMs: 50 },
          { taskId: failed.id, state: 'failed', key: `${failed.id}:failed:4` },
          { taskId: expired.id, state: 'expired', key: `${expired.id}:expired:1` },
        ], 'the notifications of the three tasks');
        for (const n of mine) {
          assert.ok(isCounter(n.seq), `seq: expected an integer counter, got ${n.seq}`);
          assert.equal(typeof n.atMs, 'number', 'atMs: expected a number');
        }
        assert.ok(mine[0].seq < mine[1].seq && mine[1].seq < mine[2].seq, 'seq rises in commit order');
      },
    },
    {
      name: 'next is the last seq returned, or after when none; limit pages',
      async run({ a, exec, feedStart }) {
        const tasks = [await a.createTask(), await a.createTask()];
        for (const t of tasks) await exec.drive(t.id, [expire(10)]);
        const mine = (await a.feedSince(feedStart.a)).filter((n) => tasks.some((t) => t.id === n.taskId));
        assert.equal(mine.length, 2, 'one notification per expired task');
        const one = await a.page(mine[0].seq - 1, 1);
        assertMatches(one, { notifications: [{ seq: mine[0].seq, taskId: tasks[0].id }], next: mine[0].seq }, 'limit=1');
        const following = await a.page(one.next, 1);
        assert.equal(following.notifications.length, 1, 'the next page has one entry');
        assert.ok(following.notifications[0].seq > one.next, 'the next page starts after next');
        assert.equal(following.next, following.notifications[0].seq);
        const empty = await a.page(MAX_SAFE, 10);
        assertMatches(empty, { notifications: [], next: MAX_SAFE }, 'a page past the end');
      },
    },
    {
      name: 'after defaults to 0 and limit to 100',
      timeoutMs: 60_000,
      async run({ a, exec, feedStart }) {
        // 101 fresh terminal tasks guarantee more than a default page after feedStart.
        await pool(Array.from({ length: 101 }, (_, i) => i), 8, async () => {
          const t = await a.createTask();
          await exec.drive(t.id, [expire(10)]);
        });
        const page = await a.page(feedStart.a);
        assert.equal(page.notifications.length, 100, 'without limit a page has 100 entries');
        const res = await a.notifications();
        assert.equal(res.status, 200);
        const fromZero = await a.page(0);
        assert.ok(res.json.notifications.length === 100, 'without after the feed starts at 0 (full page expected)');
        assert.deepEqual(res.json.notifications, fromZero.notifications, 'no after = after=0');
      },
    },
    {
      name: 'limit is at most 1000; bad after/limit values: 400',
      async run({ a }) {
        assert.equal((await a.notifications({ after: 0, limit: 1000 })).status, 200, 'limit=1000 is allowed');
        for (const [params, field] of [
          [{ limit: 1001 }, 'limit'],
          [{ limit: -1 }, 'limit'],
          [{ limit: 'ten' }, 'limit'],
          [{ after: -1 }, 'after'],
          [{ after: 1.5 }, 'after'],
          [{ after: 'x' }, 'after'],
        ]) {
          assertError(await a.notifications(params), 400, 'invalid-request', field);
        }
      },
    },
  ],
};

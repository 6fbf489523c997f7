// PROTOCOL.md §Wire types › State machine rules, "Expiry": whatever
// expires a task (an expire event, a late event, the backend's own timer),
// its history entry is {"type":"expire","atMs":expiresAtMs}; the
// notification's atMs is the event's, or the backend's clock for the
// timer; expiry keeps progress, attempts and error; a terminal task is
// never expired by the timer.

import assert from 'node:assert/strict';
import { assertMatches } from '../lib/match.mjs';
import { expire, fail, progress, start, succeed } from '../lib/events.mjs';
import { waitFor } from '../lib/scenarios.mjs';
import { SHORT_TTL_TIMEOUT_MS, awaitExpiry, shortLivedTask } from '../lib/short-ttl.mjs';

// The backend's timer may lag its deadlines, the more so on a busy machine.
const LAG_MS = 20_000;

const BUSY = [start(10), fail(20, 'quota', true), start(30), progress(40, 40)];

/** A task with attempts 2, progress 40 and error "quota" (version 4). */
async function busyTask({ a, exec }) {
  const task = await a.createTask({ ttlMs: 3_600_000, maxAttempts: 3 });
  await exec.drive(task.id, BUSY);
  return task;
}

async function notificationOf(a, feedStart, id) {
  const mine = await waitFor(async () => {
    const n = (await a.feedSince(feedStart)).filter((x) => x.taskId === id);
    return n.length > 0 && n;
  }, { timeoutMs: 2000 });
  assert.ok(mine, `no notification for ${id}`);
  assert.equal(mine.length, 1, `one notification for ${id}, got ${JSON.stringify(mine)}`);
  return mine[0];
}

/** The history entry at version 5 and the task's fields after the expiry. */
async function assertExpiredKeepingFields(a, task, what) {
  await a.answer(task.id, 4, {
    mode: 'delta',
    events: [{ version: 5, event: { type: 'expire', atMs: task.expiresAtMs } }],
    task: { state: 'expired', version: 5, attempts: 2, progress: 40, error: 'quota' },
  });
  assertMatches(await a.task(task.id), { state: 'expired', progress: 40, attempts: 2, error: 'quota' }, what);
}

export default {
  section: 'State machine rules: expiry',
  protocol: 'Wire types › State machine rules',
  checks: [
    {
      name: 'an expire event, whatever its atMs: entry at expiresAtMs, notification at the event\'s atMs, progress and error kept',
      async run(ctx) {
        const task = await busyTask(ctx);
        const t = await ctx.exec.apply(task.id, expire(50));
        assertMatches(t, { reason: 'expired', changed: true, notify: true, version: 5 }, 'the expire event');
        await assertExpiredKeepingFields(ctx.a, task, 'after an expire event');
        assertMatches(await notificationOf(ctx.a, ctx.feedStart.a, task.id), { state: 'expired', atMs: 50 }, 'the notification');
      },
    },
    {
      name: 'a late event (atMs ≥ expiresAtMs): entry at expiresAtMs, notification at the late event\'s atMs, progress and error kept',
      async run(ctx) {
        const task = await busyTask(ctx);
        const late = task.expiresAtMs + 1234.5;
        const t = await ctx.exec.apply(task.id, progress(late, 90));
        assertMatches(t, { reason: 'expired', changed: true, notify: true, version: 5 }, 'the late progress');
        await assertExpiredKeepingFields(ctx.a, task, 'after a late event');
        assertMatches(await notificationOf(ctx.a, ctx.feedStart.a, task.id), { state: 'expired', atMs: late }, 'the notification');
      },
    },
    {
      name: "the backend's own expiry at the TTL: entry at expiresAtMs, notification at the backend's clock then (≥ expiresAtMs), progress and error kept",
      timeoutMs: SHORT_TTL_TIMEOUT_MS,
      async run(ctx) {
        const { task, ttlMs } = await shortLivedTask(ctx, { maxAttempts: 3, events: BUSY });
        const answer = await awaitExpiry(ctx.a, task.id, 4, ttlMs);
        assert.equal(answer.task.state, 'expired', 'not expired by the backend within 20 s of a short TTL');
        await assertExpiredKeepingFields(ctx.a, task, 'after expiry at the TTL');
        const n = await notificationOf(ctx.a, ctx.feedStart.a, task.id);
        assert.ok(n.atMs >= task.expiresAtMs && n.atMs <= task.expiresAtMs + LAG_MS,
          `notification atMs ${n.atMs}: expected the backend's clock at expiry, from expiresAtMs ${task.expiresAtMs} to ${LAG_MS} ms later`);
      },
    },
    {
      name: 'a task that ended before its TTL is left alone: still succeeded, one notification',
      timeoutMs: SHORT_TTL_TIMEOUT_MS,
      async run(ctx) {
        const { task, ttlMs } = await shortLivedTask(ctx, { events: [start(10), succeed(20, 'blob://kept', 'sha256:kept')] });
        // Past the TTL, with the expiry of another task as proof that the
        // backend's timer ran in between.
        const witness = await ctx.a.createTask({ ttlMs, maxAttempts: 1 });
        const woke = await awaitExpiry(ctx.a, witness.id, 0, ttlMs);
        assert.equal(woke.task.state, 'expired', 'the witness task expired');
        assertMatches(await ctx.a.task(task.id), { state: 'succeeded', version: 2, resultRef: 'blob://kept' }, 'the task after its TTL');
        assertMatches(await notificationOf(ctx.a, ctx.feedStart.a, task.id), { state: 'succeeded', atMs: 20 }, 'its one notification');
      },
    },
  ],
};

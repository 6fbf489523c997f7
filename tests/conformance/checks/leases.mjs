// PROTOCOL.md §Lifecycle › Leases, over HTTP, judged by recorded times:
// each check learns the server's clock from a create (lib/server-clock.mjs),
// lets a short lease run out, and compares the `lapse` the sweeper
// recorded with bounds on when the backend received the reports. A
// backend that is late only delays the answer (the held resume waits for
// it); a backend that records the wrong time fails, however fast it is.
//
// Each check names the misreading it catches.

import assert from 'node:assert/strict';
import { assertMatches } from '../lib/match.mjs';
import { clockOffset, timed } from '../lib/server-clock.mjs';
import { HOUR, entriesUntil, ev, notificationsFor, startOf } from '../lib/lifecycle.mjs';
import { sleep } from '../lib/scenarios.mjs';

/** Float noise in times that went through JSON and two clocks. */
const EPSILON_MS = 20;

/** Asserts that `atMs` lies in `[low, high]` (server clock), saying what was expected. */
function assertWithin(atMs, low, high, what) {
  assert.ok(
    atMs >= low - EPSILON_MS && atMs <= high + EPSILON_MS,
    `${what}: recorded at ${atMs}, expected between ${Math.round(low)} and ${Math.round(high)} (${Math.round(atMs - low)} ms after the earliest)`,
  );
}

/** A task that waits in `unknown` once its lease lapsed (no grace period), started with a lease of `leaseMs`. */
async function leasedTask({ a, exec }, leaseMs, body = {}) {
  const offset = await clockOffset(a, { ttlMs: HOUR, maxAttempts: 1, autoRequeue: false, ...body });
  const { at } = await timed(offset, () => exec.drive(offset.task.id, [startOf(1, leaseMs)]));
  return { task: offset.task, offset, startAt: at };
}

export default {
  section: 'Lifecycle: leases',
  protocol: 'Lifecycle › Leases',
  checks: [
    {
      // Misreading caught: a heartbeat's leaseMs sets the lease's end
      // (received + leaseMs) even when that is earlier than the end it had.
      name: 'never shortened: a heartbeat with a shorter leaseMs leaves the lease where it was',
      async run(ctx) {
        const LEASE_MS = 2000;
        const { task, offset, startAt } = await leasedTask(ctx, LEASE_MS);
        const beat = await ctx.exec.apply(task.id, ev('heartbeat', 1, { leaseMs: 100 }));
        assertMatches(beat, { changed: false, reason: 'heartbeat', state: 'running', version: 1 }, 'the heartbeat');
        const { events } = await entriesUntil(ctx.a, task.id, 1, 2, LEASE_MS);
        // When the lapse was seen, on the server's clock at the latest.
        const seenBy = Date.now() + offset.high;
        assertMatches(events, [{ version: 2, event: { type: 'lapse', attempt: 1 } }], 'the entries after the start');
        const lapseAt = events[0].event.atMs;
        assertWithin(lapseAt, startAt.low + LEASE_MS, startAt.high + LEASE_MS,
          `the lapse (the start's lease ran ${LEASE_MS} ms from its receipt; the heartbeat's leaseMs 100 must not shorten it)`);
        assert.ok(seenBy >= lapseAt - EPSILON_MS, `the lapse was visible by ${Math.round(seenBy)}, before the time it records (${lapseAt}): the task lapsed early`);
      },
    },
    {
      // Misreading caught: only a progress that raises the percentage
      // renews the lease (a stale or repeated one is ignored whole).
      name: 'a stale progress of the current attempt still renews the lease (from its receipt)',
      async run(ctx) {
        const LEASE_MS = 2000;
        const { task, offset } = await leasedTask(ctx, LEASE_MS);
        await ctx.exec.drive(task.id, [ev('progress', 1, { progress: 50, cursor: 'c50' })]);
        await sleep(700);
        const { answer: stale, at } = await timed(offset, () => ctx.exec.apply(task.id, ev('progress', 1, { progress: 40, cursor: 'c40' })));
        assertMatches(stale, { changed: false, reason: 'stale-progress', version: 2 }, 'a lower progress');
        const { events } = await entriesUntil(ctx.a, task.id, 2, 3, LEASE_MS);
        assertMatches(events, [{ version: 3, event: { type: 'lapse', attempt: 1 } }], 'the entries after the progress');
        assertWithin(events[0].event.atMs, at.low + LEASE_MS, at.high + LEASE_MS,
          `the lapse (the stale progress renewed the lease for ${LEASE_MS} ms from its receipt)`);
      },
    },
    {
      // Misreadings caught: a repeated `start` of the lapsed attempt
      // brings the task back to running (only its reports do); and
      // `succeed`, `fail` or `hold` refused as `not-running` in unknown.
      name: 'in unknown, a start of the current attempt is already-running (still unknown); progress recovers it; succeed, fail and hold end it as from running',
      async run(ctx) {
        const LEASE_MS = 300;
        const bodies = [{}, {}, { maxAttempts: 2 }, {}];
        const tasks = await Promise.all(bodies.map((body) => leasedTask(ctx, LEASE_MS, body)));
        await Promise.all(tasks.map(({ task }) => entriesUntil(ctx.a, task.id, 1, 2, LEASE_MS)));
        const [restarted, succeeding, failing, holding] = tasks.map((t) => t.task.id);
        const again = await ctx.exec.apply(restarted, startOf(1));
        assertMatches(again, { changed: false, reason: 'already-running', state: 'unknown', version: 2 }, 'a start of the unknown attempt');
        assertMatches(await ctx.a.task(restarted), { state: 'unknown', version: 2 }, 'the task after the start');
        const back = await ctx.exec.apply(restarted, ev('progress', 1, { progress: 10, cursor: 'c10' }));
        assertMatches(back, { changed: true, reason: 'recovered', state: 'running', version: 3 }, 'a progress of the unknown attempt');
        const ends = [
          [succeeding, ev('succeed', 1, { resultRef: 'blob://late', resultHash: 'sha256:late' }), { reason: 'succeeded', state: 'succeeded' }],
          [failing, ev('fail', 1, { error: 'boom', retryable: true }), { reason: 'requeued', state: 'queued' }],
          [holding, ev('hold', 1, { artifactRef: 'blob://d', artifactHash: 'sha256:d' }), { reason: 'held', state: 'waiting_approval' }],
        ];
        for (const [id, event, expected] of ends) {
          assertMatches(await ctx.exec.apply(id, event), { changed: true, version: 3, ...expected }, `a ${event.type} of the unknown attempt`);
        }
      },
    },
    {
      // Misreading caught: a lapse always makes the task unknown, also
      // after a cancel (the page would wait for a worker that is gone and
      // was asked to stop).
      name: 'a cancelling or cancel_ineffective task whose lease lapses is cancelled (recorded as lapse at the lease end), notified once, never unknown',
      async run(ctx) {
        // Long enough for the cancel and cannot_cancel to arrive first on a busy machine.
        const LEASE_MS = 2500;
        const [asked, refused] = await Promise.all([0, 1].map(() => leasedTask(ctx, LEASE_MS, { maxAttempts: 2, autoRequeue: undefined, unknownGraceMs: 60_000 })));
        await ctx.a.acted(asked.task.id, 'cancel', {});
        await ctx.a.acted(refused.task.id, 'cancel', {});
        await ctx.exec.drive(refused.task.id, [ev('cannot_cancel', 1)]);
        for (const [{ task, startAt }, cursor] of [[asked, 2], [refused, 3]]) {
          const { events, task: after } = await entriesUntil(ctx.a, task.id, cursor, cursor + 1, LEASE_MS);
          assertMatches(after, { state: 'cancelled', version: cursor + 1 }, 'the task after its lease lapsed');
          assertMatches(events, [{ version: cursor + 1, event: { type: 'lapse', attempt: 1 } }], 'the entry');
          assertWithin(events[0].event.atMs, startAt.low + LEASE_MS, startAt.high + LEASE_MS, 'the lapse');
          assertMatches(await notificationsFor(ctx.a, ctx.feedStart.a, task.id), [{ state: 'cancelled', key: `${task.id}:cancelled:${cursor + 1}` }], 'notifications');
        }
      },
    },
    {
      // Misreading caught: an abandon with no start left re-queues the
      // task anyway, or fails it with an error text of its own.
      name: 'an unknown task past its grace period with no start left fails, error "lease lapsed, no sign in the grace period", abandon at lease end + grace',
      async run(ctx) {
        const [LEASE_MS, GRACE_MS] = [300, 300];
        const { task, startAt } = await leasedTask(ctx, LEASE_MS, { autoRequeue: undefined, unknownGraceMs: GRACE_MS });
        const { events, task: after } = await entriesUntil(ctx.a, task.id, 1, 3, LEASE_MS + GRACE_MS);
        assertMatches(after, { state: 'failed', attempts: 1, error: 'lease lapsed, no sign in the grace period' }, 'the task');
        assertMatches(events, [{ version: 2, event: { type: 'lapse', attempt: 1 } }, { version: 3, event: { type: 'abandon' } }], 'the entries');
        const lapseAt = events[0].event.atMs;
        assertWithin(lapseAt, startAt.low + LEASE_MS, startAt.high + LEASE_MS, 'the lapse');
        assert.equal(events[1].event.atMs, lapseAt + GRACE_MS, 'the abandon is recorded at the lease end + unknownGraceMs');
        assertMatches(await notificationsFor(ctx.a, ctx.feedStart.a, task.id), [{ state: 'failed', key: `${task.id}:failed:3` }], 'notifications');
      },
    },
  ],
};

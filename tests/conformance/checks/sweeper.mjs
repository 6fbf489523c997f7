// PROTOCOL.md §Lifecycle › The sweeper: what a backend records, and
// notifies, for a task nobody reports for. Judged by recorded times: the
// entry must carry the time the change fell due, and the notification
// the entry's time, however late the sweeper noticed.
//
// Each check names the misreading it catches.

import assert from 'node:assert/strict';
import { assertMatches } from '../lib/match.mjs';
import { HOUR, entriesUntil, ev, notificationsFor, startOf } from '../lib/lifecycle.mjs';

const LEASE_MS = 300;
const GRACE_MS = 300;
const DEADLINE_MS = 400;
const CANCELLED_LEASE_MS = 2000;

/** Three tasks the sweeper ends: a timeout, a lapse after a cancel, an abandon with no start left. */
async function sweptTasks({ a, exec }) {
  const timedOut = await a.createTask({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: DEADLINE_MS });
  const cancelled = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
  // Long enough for the cancel to arrive first on a busy machine.
  await exec.drive(cancelled.id, [startOf(1, CANCELLED_LEASE_MS)]);
  await a.acted(cancelled.id, 'cancel', {});
  const failed = await a.createTask({ ttlMs: HOUR, maxAttempts: 1, unknownGraceMs: GRACE_MS });
  await exec.drive(failed.id, [startOf(1, LEASE_MS)]);
  return [
    ['timeout', timedOut, 0, 1, 'timed_out'],
    ['lapse after a cancel', cancelled, 2, 3, 'cancelled'],
    ['abandon with no start left', failed, 1, 3, 'failed'],
  ];
}

export default {
  section: 'Lifecycle: the sweeper',
  protocol: 'Lifecycle › The sweeper',
  checks: [
    {
      // Misreading caught: the sweeper records its own clock (when it
      // noticed) instead of when the deadline passed.
      name: 'a timeout is recorded at deadlineAtMs for a queued, a running and a cancelling task',
      async run({ a, exec }) {
        const tasks = await Promise.all([0, 1, 2].map(() => a.createTask({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: 2500 })));
        const [, running, cancelling] = tasks;
        await exec.drive(running.id, [ev('start', 1, { worker: 'w', leaseMs: 60_000 })]);
        await exec.drive(cancelling.id, [ev('start', 1, { worker: 'w', leaseMs: 60_000 })]);
        await a.acted(cancelling.id, 'cancel', {});
        for (const [task, cursor] of [[tasks[0], 0], [running, 1], [cancelling, 2]]) {
          const { events, task: after } = await entriesUntil(a, task.id, cursor, cursor + 1, 2500);
          assertMatches(after, { state: 'timed_out', expiresAtMs: task.expiresAtMs }, 'the task after its deadline');
          assertMatches(events, [{ version: cursor + 1, event: { type: 'timeout', atMs: task.deadlineAtMs } }], 'the entry');
        }
      },
    },
    {
      // Misreading caught: a task the sweeper ended is notified at the
      // sweeper's clock (when it noticed), as the TTL's timer is, instead
      // of when the change fell due (the entry's atMs).
      name: 'the notification of a task the sweeper ended (timeout, lapse after a cancel, abandon with no start left) is at the time it fell due',
      async run(ctx) {
        const tasks = await sweptTasks(ctx);
        for (const [what, task, cursor, version, state] of tasks) {
          const { events, task: after } = await entriesUntil(ctx.a, task.id, cursor, version, CANCELLED_LEASE_MS + GRACE_MS);
          assertMatches(after, { state }, `${what}: the task`);
          const due = events.at(-1).event.atMs;
          const notes = await notificationsFor(ctx.a, ctx.feedStart.a, task.id);
          assertMatches(notes, [{ state, key: `${task.id}:${state}:${version}` }], `${what}: notifications`);
          assert.equal(notes[0].atMs, due, `${what}: the notification's atMs must be the time the change fell due (${due}, the ${events.at(-1).event.type} entry's), not when the sweeper noticed (${notes[0].atMs - due} ms later)`);
        }
      },
    },
  ],
};

// PROTOCOL.md §Workers › Reports: the rules every executor's callbacks
// follow, a worker's or an application's own (so every backend, with or
// without the claim route): each answer says what to do next (`next`)
// and which attempt is current (`attempt`); a report of an attempt that
// has not started is `not-started`; an event with `attempt` whose `atMs`
// is far from the server's clock is refused (`clock-skew`). (Leases on
// the server's clock are checked with the lapses, in lifecycle.mjs.)

import assert from 'node:assert/strict';
import { assertError, assertMatches } from '../lib/match.mjs';
import { uid } from '../lib/client.mjs';

const HOUR = 3_600_000;
const TEN_MINUTES = 600_000;
/** An executor event of `attempt` (none when undefined), on the server's clock. */
const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), ...(attempt !== undefined && { attempt }), ...extra });
const startOf = (attempt, leaseMs = 60_000) => ev('start', attempt, { worker: `w${attempt}`, leaseMs });

export default {
  section: 'Workers: reports',
  protocol: 'Workers › Reports',
  checks: [
    {
      name: 'every callback answer carries next and attempt: continue for the current attempt, stop for a stale one (attempt the current), stop once the attempt ended',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2 });
        assertMatches(await exec.apply(task.id, startOf(1)), { reason: 'started', next: 'continue', attempt: 1 }, 'start of attempt 1');
        assertMatches(await exec.apply(task.id, ev('heartbeat', 1)), { reason: 'heartbeat', next: 'continue', attempt: 1 }, 'a heartbeat of attempt 1');
        assertMatches(await exec.apply(task.id, ev('progress', 1, { progress: 30, cursor: 'c30' })), { reason: 'progress', next: 'continue', attempt: 1 }, 'a progress of attempt 1');
        const stale = await exec.apply(task.id, ev('progress', 2, { progress: 40, cursor: 'c40' }));
        assertMatches(stale, { changed: false, reason: 'stale-attempt', next: 'stop', attempt: 1 }, 'a progress of attempt 2 while 1 runs');
        const requeued = await exec.apply(task.id, ev('fail', 1, { error: 'flaky', retryable: true }));
        assertMatches(requeued, { changed: true, state: 'queued', next: 'stop', attempt: 1 }, 'a retryable fail: the attempt ended');
        assertMatches(await exec.apply(task.id, startOf(2)), { reason: 'started', next: 'continue', attempt: 2 }, 'start of attempt 2');
        const zombie = await exec.apply(task.id, ev('heartbeat', 1));
        assertMatches(zombie, { changed: false, reason: 'stale-attempt', next: 'stop', attempt: 2 }, 'a heartbeat of attempt 1 while 2 runs: stop, and attempt says which is current');
        const held = await exec.apply(task.id, ev('hold', 2, { artifactRef: 'blob://a', artifactHash: 'sha256:a' }));
        assertMatches(held, { changed: true, state: 'waiting_approval', next: 'stop', attempt: 2 }, 'a hold: the attempt ended');

        // An executor that never sends attempt gets both too.
        const seed = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        assertMatches(await exec.apply(seed.id, { type: 'start', atMs: 1000, worker: 'w' }), { reason: 'started', next: 'continue', attempt: 1 }, 'a start without attempt');
        const done = await exec.apply(seed.id, { type: 'succeed', atMs: 2000, resultRef: 'blob://r', resultHash: 'sha256:r' });
        assertMatches(done, { reason: 'succeeded', next: 'stop', attempt: 1 }, 'a succeed without attempt: the task is terminal');
      },
    },
    {
      name: 'next is cancel once a person asked to cancel; continue after cannot_cancel; stop once cancelled',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1)]);
        await a.acted(task.id, 'cancel', {});
        const told = await exec.apply(task.id, ev('heartbeat', 1));
        assertMatches(told, { reason: 'heartbeat', state: 'cancelling', cancelRequested: true, next: 'cancel', attempt: 1 }, 'a heartbeat after the cancel');
        assertMatches(await exec.apply(task.id, ev('progress', 1, { progress: 50, cursor: 'c50' })), { next: 'cancel', attempt: 1 }, 'a progress after the cancel');
        const cannot = await exec.apply(task.id, ev('cannot_cancel', 1, { reason: 'no way back' }));
        assertMatches(cannot, { state: 'cancel_ineffective', next: 'continue', attempt: 1 }, 'cannot_cancel: the work goes on');

        const other = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(other.id, [startOf(1)]);
        await a.acted(other.id, 'cancel', {});
        const ack = await exec.apply(other.id, ev('ack_cancel', 1));
        assertMatches(ack, { state: 'cancelled', next: 'stop', attempt: 1 }, 'ack_cancel: the task is terminal');
      },
    },
    {
      name: 'a report of attempt attempts+1 before its start is not-started (next stop), not stale-attempt; nothing changes; one further ahead is stale-attempt',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 3 });
        for (const early of [ev('heartbeat', 1), ev('progress', 1, { progress: 5, cursor: 'c5' }), ev('succeed', 1, { resultRef: 'blob://r', resultHash: 'sha256:r' })]) {
          const res = await exec.apply(task.id, early);
          assertMatches(res, { changed: false, duplicate: false, reason: 'not-started', next: 'stop', attempt: 0, state: 'queued', version: 0 }, `a ${early.type} of attempt 1 on a task never started`);
        }
        assertMatches(await exec.apply(task.id, ev('heartbeat', 2)), { changed: false, reason: 'stale-attempt', next: 'stop', attempt: 0 }, 'a heartbeat of attempt 2 (attempts + 2)');
        await a.answer(task.id, 0, { mode: 'caught-up', task: { state: 'queued', version: 0, attempts: 0 } });
        // Re-queued after attempt 1: attempt 2 is the early one now.
        await exec.drive(task.id, [startOf(1), ev('fail', 1, { error: 'retry', retryable: true })]);
        const early = await exec.apply(task.id, ev('heartbeat', 2));
        assertMatches(early, { changed: false, reason: 'not-started', next: 'stop', attempt: 1, state: 'queued', version: 2 }, 'a heartbeat of attempt 2 before its start');
        assertMatches(await exec.apply(task.id, ev('heartbeat', 1)), { changed: false, reason: 'stale-attempt', next: 'stop', attempt: 1 }, 'a heartbeat of the ended attempt 1');
        // The start itself is no early report.
        assertMatches(await exec.apply(task.id, startOf(2)), { changed: true, reason: 'started', next: 'continue', attempt: 2, version: 3 }, 'the start of attempt 2');
      },
    },
    {
      name: 'an event with attempt whose atMs is 10 minutes off the server clock is 400 clock-skew naming atMs, and nothing changes; without attempt it is judged as before',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        const id = uid('cb');
        const ahead = { ...startOf(1), atMs: Date.now() + TEN_MINUTES };
        assertError(await exec.send(task.id, ahead, { id }), 400, 'clock-skew', 'atMs');
        await a.answer(task.id, 0, { mode: 'caught-up', task: { state: 'queued', version: 0 } });
        await exec.drive(task.id, [startOf(1)]);
        for (const [what, atMs] of [['10 minutes ahead', Date.now() + TEN_MINUTES], ['10 minutes behind', Date.now() - TEN_MINUTES]]) {
          for (const event of [
            ev('heartbeat', 1, { atMs }),
            ev('progress', 1, { atMs, progress: 20, cursor: 'c20' }),
            ev('succeed', 1, { atMs, resultRef: 'blob://r', resultHash: 'sha256:r' }),
          ]) {
            const res = await exec.send(task.id, event);
            try {
              assertError(res, 400, 'clock-skew', 'atMs');
            } catch (err) {
              err.message = `a ${event.type} ${what}: ${err.message}`;
              throw err;
            }
          }
        }
        await a.answer(task.id, 1, { mode: 'caught-up', task: { state: 'running', version: 1, progress: 0 } });
        // Refused, so not remembered: the callback id of the refused start is still free.
        const late = await exec.apply(task.id, ev('progress', 1, { progress: 20, cursor: 'c20' }), { id });
        assertMatches(late, { changed: true, reason: 'progress', version: 2 }, 'the refused callback id, sent again with a right atMs');
        // Seed 000's executors (no attempt) are judged as before, whatever their clock.
        const seed = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        const far = Date.now() + TEN_MINUTES;
        await exec.drive(seed.id, [{ type: 'start', atMs: far, worker: 'w' }, { type: 'progress', atMs: far + 1, progress: 10, cursor: 'c10' }]);
      },
    },
  ],
};

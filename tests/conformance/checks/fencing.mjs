// PROTOCOL.md §Lifecycle › Fencing, Cancel and Decisions: the answers the
// vectors pin for each state, over HTTP. No waiting: every state here is
// reached with events (an `unknown` task is in leases.mjs).
//
// Each check names the misreading it catches.

import { assertMatches } from '../lib/match.mjs';
import { HOUR, ev, startOf } from '../lib/lifecycle.mjs';

/** Sends `event` and matches the answer. */
async function judged(exec, id, event, expected, what) {
  assertMatches(await exec.apply(id, event), expected, what);
}

const STALE = { changed: false, duplicate: false, reason: 'stale-attempt', next: 'stop' };

export default {
  section: 'Lifecycle: fencing, cancel and decisions',
  protocol: 'Lifecycle › Fencing',
  checks: [
    {
      // Misreading caught: "N must be attempts + 1" applied to every
      // state (a second start of the running attempt stale, attempts + 1
      // accepted on a held task), or `not-started` for any attempt ahead.
      name: 'a start by state: attempts + 1 on queued starts, any other stale; the current one already-running while open, not-startable when held; attempts + 1 on a held task stale',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 3 });
        await judged(exec, task.id, ev('progress', 1, { progress: 5, cursor: 'c' }), { changed: false, reason: 'not-started', attempt: 0 }, 'a progress of attempt 1 before any start');
        await judged(exec, task.id, ev('progress', 2, { progress: 5, cursor: 'c' }), { ...STALE, attempt: 0 }, 'a progress of attempt 2 before any start');
        await judged(exec, task.id, startOf(2), { ...STALE, version: 0 }, 'a start of attempt 2 on a never-started task');
        await judged(exec, task.id, startOf(1), { changed: true, reason: 'started', attempt: 1 }, 'the start of attempt 1');
        await judged(exec, task.id, startOf(1), { changed: false, duplicate: true, reason: 'already-running', version: 1 }, 'the start of attempt 1 again');
        await judged(exec, task.id, startOf(2), { ...STALE, attempt: 1, version: 1 }, 'a start of attempt 2 while 1 runs');
        await judged(exec, task.id, ev('hold', 1, { artifactRef: 'blob://d', artifactHash: 'sha256:d' }), { reason: 'held', version: 2 }, 'the hold');
        await judged(exec, task.id, startOf(2), { ...STALE, version: 2 }, 'a start of attempt 2 on the held task');
        await judged(exec, task.id, startOf(1), { changed: false, reason: 'not-startable', version: 2 }, 'a start of the held attempt');
        await judged(exec, task.id, { type: 'start', atMs: Date.now(), worker: 'w' }, { changed: false, reason: 'not-startable', version: 2 }, 'a start without attempt on the held task');
        const cancelling = await a.createTask({ ttlMs: HOUR, maxAttempts: 3 });
        await exec.drive(cancelling.id, [startOf(1)]);
        await a.acted(cancelling.id, 'cancel', {});
        await judged(exec, cancelling.id, startOf(1), { changed: false, duplicate: true, reason: 'already-running', state: 'cancelling' }, 'a start of the cancelling attempt');
        await judged(exec, cancelling.id, startOf(2), { ...STALE, state: 'cancelling' }, 'a start of attempt 2 on the cancelling task');
      },
    },
    {
      // Misreading caught: the attempt that ended is fenced only once the
      // next one starts, so its late report lands on the re-queued task.
      name: 'a re-queued task fences the attempt that ended at once: its reports are stale-attempt before the next start',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 3 });
        await exec.drive(task.id, [startOf(1), ev('fail', 1, { error: 'flaky', retryable: true })]);
        await judged(exec, task.id, ev('succeed', 1, { resultRef: 'blob://z', resultHash: 'sha256:z' }), { ...STALE, state: 'queued', version: 2 }, "attempt 1's succeed on the re-queued task");
        await judged(exec, task.id, ev('heartbeat', 1), { ...STALE, state: 'queued' }, "attempt 1's heartbeat");
      },
    },
    {
      // Misreading caught: cancelRequested true (and next: cancel) for as
      // long as a cancel was ever asked, so an executor that said it
      // cannot stop is asked again on every report.
      name: '§Cancel: cancelRequested is true only in cancelling; in cancel_ineffective false with next continue; a second cannot_cancel is duplicate-cancel',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1)]);
        await a.acted(task.id, 'cancel', {});
        await judged(exec, task.id, ev('heartbeat', 1), { cancelRequested: true, next: 'cancel', state: 'cancelling' }, 'a heartbeat while cancelling');
        await judged(exec, task.id, ev('cannot_cancel', 1), { changed: true, reason: 'cancel-ineffective', cancelRequested: false, next: 'continue' }, 'cannot_cancel');
        await judged(exec, task.id, ev('heartbeat', 1), { changed: false, reason: 'heartbeat', cancelRequested: false, next: 'continue', state: 'cancel_ineffective' }, 'a heartbeat in cancel_ineffective');
        await judged(exec, task.id, ev('cannot_cancel', 1), { changed: false, duplicate: true, reason: 'duplicate-cancel' }, 'cannot_cancel again');
        await judged(exec, task.id, ev('fail', 1, { error: 'stopped anyway', retryable: true }), { changed: true, notify: true, reason: 'cancelled', state: 'cancelled' }, 'a fail after the cancel');
        assertMatches(await a.task(task.id), { state: 'cancelled', error: 'stopped anyway' }, 'the task keeps the error');
      },
    },
    {
      // Misreadings caught: "the same decision" compared with the reason
      // or the actor (a second approver's identical decision re-applied),
      // or judged after the state (stale-decision once re-queued); and a
      // continuation counted against maxAttempts (the revision refused).
      name: '§Decisions: the same decision (decision, version, artifactHash; not the reason) is duplicate-decision even once the task runs again; a continuation grants a start past maxAttempts',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1), ev('hold', 1, { artifactRef: 'blob://v1', artifactHash: 'sha256:v1' })]);
        const changes = { decision: 'request_changes', artifactHash: 'sha256:v1', version: 2 };
        assertMatches(await a.acted(task.id, 'decisions', { ...changes, reason: 'shorter' }), { changed: true, reason: 'changes-requested', task: { state: 'queued', continuations: 1 } }, 'request_changes');
        assertMatches(await a.acted(task.id, 'decisions', { ...changes, reason: 'other words' }), { changed: false, duplicate: true, reason: 'duplicate-decision' }, 'the same decision with another reason');
        assertMatches(await a.acted(task.id, 'decisions', { ...changes, decision: 'approve' }), { changed: false, reason: 'stale-decision' }, 'another decision on the same version');
        await judged(exec, task.id, startOf(2), { changed: true, reason: 'started', attempts: undefined, attempt: 2, state: 'running' }, 'the revision: attempt 2 of maxAttempts 1');
        assertMatches(await a.acted(task.id, 'decisions', changes), { changed: false, duplicate: true, reason: 'duplicate-decision', task: { state: 'running' } }, 'the same decision while the revision runs');
      },
    },
  ],
};

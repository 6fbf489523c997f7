// PROTOCOL.md §Wire types › State machine rules, step 5 ("the clocks"):
// a late event past both the TTL and the execution deadline. No waiting:
// an event without `attempt` may carry any time (clock-skew judges only
// reports with `attempt`), so the event is simply sent late.
//
// Each check names the misreading it catches.

import assert from 'node:assert/strict';
import { assertMatches } from '../lib/match.mjs';
import { HOUR } from '../lib/lifecycle.mjs';

/** A task with a TTL of `ttlMs` and a deadline of `deadlineMs`, sent a heartbeat at `at(task)`. */
async function lateEvent({ a, exec }, ttlMs, deadlineMs, at) {
  const task = await a.createTask({ ttlMs, maxAttempts: 1, deadlineMs });
  const answer = await exec.apply(task.id, { type: 'heartbeat', atMs: at(task) });
  const entries = await a.answer(task.id, 0, { mode: 'delta' });
  return { task, answer, entry: entries.events[0] };
}

export default {
  section: 'State machine: the two clocks',
  protocol: 'Wire types › State machine rules',
  checks: [
    {
      // Misreading caught: the execution deadline always wins when both
      // clocks have run out (timed_out), even when the TTL fell first.
      name: 'a late event past a TTL that fell before the deadline expires the task (expire at expiresAtMs), never times it out',
      async run(ctx) {
        const { task, answer, entry } = await lateEvent(ctx, HOUR, 2 * HOUR, (t) => t.expiresAtMs + 2 * HOUR);
        assertMatches(answer, { changed: true, notify: true, reason: 'expired', state: 'expired', version: 1 }, 'the late event');
        assertMatches(entry, { version: 1, event: { type: 'expire', atMs: task.expiresAtMs } }, 'the entry');
      },
    },
    {
      // Misreading caught: the TTL always wins (seed 000 knew no other
      // clock), so a task past its deadline is expired instead.
      name: 'a late event past a deadline that fell before the TTL times the task out (timeout at deadlineAtMs)',
      async run(ctx) {
        const { task, answer, entry } = await lateEvent(ctx, 2 * HOUR, HOUR, (t) => t.expiresAtMs + HOUR);
        assertMatches(answer, { changed: true, notify: true, reason: 'timed-out', state: 'timed_out', version: 1 }, 'the late event');
        assertMatches(entry, { version: 1, event: { type: 'timeout', atMs: task.deadlineAtMs } }, 'the entry');
      },
    },
    {
      // Misreading caught: a tie goes to the deadline (it is checked
      // last, or "timed_out" is thought the more precise state).
      name: 'a tie between the TTL and the deadline goes to the TTL',
      async run(ctx) {
        const { task, answer, entry } = await lateEvent(ctx, HOUR, HOUR, (t) => Math.max(t.expiresAtMs, t.deadlineAtMs));
        assert.equal(task.deadlineAtMs, task.expiresAtMs, 'ttlMs and deadlineMs equal: deadlineAtMs = expiresAtMs');
        assertMatches(answer, { reason: 'expired', state: 'expired' }, 'an event exactly at both');
        assertMatches(entry, { event: { type: 'expire', atMs: task.expiresAtMs } }, 'the entry');
      },
    },
  ],
};

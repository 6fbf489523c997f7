// What the lifecycle's timing checks share: executor events on the
// server's clock, and waiting for the sweeper by a held resume (answered
// as soon as the task changes) instead of sleeping.

import assert from 'node:assert/strict';
import { assertResumeResponse } from './match.mjs';

export const HOUR = 3_600_000;
/** How late a backend's sweeper may be (as for the TTL). */
export const LAG_MS = 6000;

/** An executor event of `attempt`, at the suite's clock (within the 5 minutes `clock-skew` allows). */
export const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), ...(attempt !== undefined && { attempt }), ...extra });

/** The `start` of `attempt` with a lease of `leaseMs`. */
export const startOf = (attempt, leaseMs = 60_000) => ev('start', attempt, { worker: `w${attempt}`, leaseMs });

/**
 * A resume held from `cursor`: it must wake with a change within the
 * lag (`waitFor` ms more for a lease or grace period still to run).
 */
export async function nextChange(a, id, cursor, waitFor = 0) {
  const res = await a.resume(id, { cursor, waitMs: Math.min(30_000, LAG_MS + 2000 + waitFor) });
  const answer = assertResumeResponse(res, undefined, `held resume from ${cursor}`);
  assert.notEqual(answer.mode, 'caught-up', `nothing happened to the task within ${LAG_MS + waitFor} ms (the sweeper is late, or never ran)`);
  return answer;
}

/** Held resumes from `cursor` until the task is at `version`; every entry after `cursor`. */
export async function entriesUntil(a, id, cursor, version, waitFor = 0) {
  const events = [];
  let task;
  while (cursor < version) {
    const answer = await nextChange(a, id, cursor, waitFor);
    assert.equal(answer.mode, 'delta', `resume from ${cursor}: expected a delta, got ${answer.mode}`);
    events.push(...answer.events);
    cursor = answer.task.version;
    task = answer.task;
  }
  return { events, task };
}

/** The task's notifications after the feed position `feedStart`. */
export async function notificationsFor(a, feedStart, id) {
  return (await a.feedSince(feedStart)).filter((n) => n.taskId === id);
}

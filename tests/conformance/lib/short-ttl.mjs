// Tasks with a TTL short enough for the backend's own expiry to be seen
// within a check, built with events before that TTL runs out.
//
// Under the whole suite's load a debug build can take longer than a
// 1.5 s TTL to answer a handful of callbacks; the task would then expire
// half-built and the check would fail for a reason that is not the rule
// it checks. So a build the TTL overtook is started again on a new task
// with twice the TTL (three tries: 1.5, 3, 6 s by default).

import assert from 'node:assert/strict';

export const SHORT_TTL_MS = 1500;
const TRIES = 3;

/**
 * Creates a task (`{maxAttempts}` and the TTL) and drives `events` on it,
 * each of which must change it. Returns `{task, ttlMs, view}`: the task as
 * created, its TTL, and its view (GET) once built, still unexpired.
 */
export async function shortLivedTask({ a, exec }, { maxAttempts = 1, events = [], ttlMs = SHORT_TTL_MS } = {}) {
  for (let attempt = 1; ; attempt += 1) {
    const task = await a.createTask({ ttlMs, maxAttempts });
    let overtaken = false;
    for (const event of events) {
      const t = await exec.apply(task.id, event);
      if (event.type !== 'expire' && (t.state === 'expired' || t.reason === 'terminal-conflict')) {
        overtaken = true;
        break;
      }
      assert.equal(t.changed, true, `${event.type} should change the task (reason ${t.reason})`);
    }
    // The task as built, read before the TTL could run out too.
    const view = overtaken ? null : await a.task(task.id);
    const expiredByEvent = events.at(-1)?.type === 'expire';
    if (view && (view.state !== 'expired' || expiredByEvent)) return { task, ttlMs, view };
    assert.ok(attempt < TRIES, `the task expired before ${events.length} callbacks were answered, ${TRIES} times (last ttlMs ${ttlMs})`);
    ttlMs *= 2;
  }
}

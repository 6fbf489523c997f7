// Tasks with a TTL short enough for the backend's own expiry to be seen
// within a check, built with events before that TTL runs out.
//
// Under the whole suite's load a debug build can take longer than a
// 1.5 s TTL to answer a handful of callbacks (two instances on one
// PostgreSQL on a busy machine took 4 s a request); the task would then
// expire half-built and the check would fail for a reason that is not the
// rule it checks. So a build the TTL overtook is started again on a new
// task, with a TTL three times the larger of the last TTL and the time the
// build took, up to four tries. Checks that use this allow for it in
// their timeout (SHORT_TTL_TIMEOUT_MS).

import assert from 'node:assert/strict';

export const SHORT_TTL_MS = 1500;
const TRIES = 4;
/** A check timeout that leaves room for the retries. */
export const SHORT_TTL_TIMEOUT_MS = 120_000;

/**
 * Creates a task (`{maxAttempts}` and the TTL) and drives `events` on it,
 * each of which must change it. Returns `{task, ttlMs, view, createdAt}`:
 * the task as created, its TTL, its view (GET) once built, still
 * unexpired, and the local time just before it was created.
 */
export async function shortLivedTask({ a, exec }, { maxAttempts = 1, events = [], ttlMs = SHORT_TTL_MS } = {}) {
  for (let attempt = 1; ; attempt += 1) {
    const began = Date.now();
    const task = await a.createTask({ ttlMs, maxAttempts });
    let overtaken = false;
    for (const event of events) {
      const t = await exec.apply(task.id, event);
      // The TTL ran out first: the event was absorbed by the expired task,
      // or (not an expire itself) expired it.
      if (t.state === 'expired' && (!t.changed || event.type !== 'expire')) {
        overtaken = true;
        break;
      }
      assert.equal(t.changed, true, `${event.type} should change the task (reason ${t.reason})`);
    }
    // The task as built, read before the TTL could run out too.
    const view = overtaken ? null : await a.task(task.id);
    const expiredByEvent = events.at(-1)?.type === 'expire';
    if (view && (view.state !== 'expired' || expiredByEvent)) return { task, ttlMs, view, createdAt: began };
    assert.ok(attempt < TRIES, `the task expired before ${events.length} callbacks were answered, ${TRIES} times (last ttlMs ${ttlMs})`);
    ttlMs = 3 * Math.max(ttlMs, Date.now() - began);
  }
}

/**
 * Holds resumes on task `id` from `cursor` until it is expired, for up to
 * its TTL and 20 s more; returns the answer that showed it (or the last
 * one, for the caller's assertion).
 */
export async function awaitExpiry(a, id, cursor, ttlMs) {
  const deadline = Date.now() + ttlMs + 20_000;
  for (;;) {
    const res = await a.resume(id, { cursor, waitMs: 20_000 });
    assert.equal(res.status, 200, `held resume: expected 200, got ${res.status}`);
    const answer = res.json;
    if (answer?.task?.state === 'expired' || Date.now() >= deadline) return answer;
  }
}

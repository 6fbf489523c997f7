// Expiry by time: a task nobody calls back for still ends (taskwire-core
// fix 10). PROTOCOL.md's state machine expires a live task at expiresAtMs;
// the backend must do it by itself, with the task's one notification, and
// wake requests held on it. "By itself" is allowed a few seconds of lag.

import assert from 'node:assert/strict';
import { assertMatches, assertResumeResponse } from '../lib/match.mjs';
import { expire, start } from '../lib/events.mjs';
import { waitFor } from '../lib/scenarios.mjs';
import { shortLivedTask } from '../lib/short-ttl.mjs';

const TTL_MS = 1500;
const LAG_MS = 6000;

/**
 * Holds a resume on the task from `cursor` until it expires; returns the
 * answer. The hold must end within TTL + LAG of creation.
 */
async function awaitExpiry(a, task, cursor, createdAt, ttlMs = TTL_MS) {
  const res = await a.resume(task.id, { cursor, waitMs: 20_000 });
  const elapsed = Date.now() - createdAt;
  const answer = assertResumeResponse(res, undefined, 'held resume');
  assert.equal(answer.task.state, 'expired', `no expiry ${elapsed} ms after creation with ttlMs ${ttlMs} (the held request answered ${answer.mode})`);
  assert.ok(elapsed <= ttlMs + LAG_MS, `the held request woke ${elapsed} ms after creation; expected within ${ttlMs + LAG_MS} ms`);
  return answer;
}

async function notificationsFor(a, feedStart, id) {
  return (await a.feedSince(feedStart)).filter((n) => n.taskId === id);
}

export default {
  section: 'Expiry (TTL)',
  protocol: 'Wire types › State machine rules',
  checks: [
    {
      name: 'a queued task with a short ttl expires by itself, wakes a held request and notifies once',
      async run({ a, exec, feedStart }) {
        const createdAt = Date.now();
        const task = await a.createTask({ ttlMs: TTL_MS, maxAttempts: 1 });
        const answer = await awaitExpiry(a, task, 0, createdAt);
        assertMatches(answer, {
          mode: 'delta',
          events: [{ version: 1, event: { type: 'expire', atMs: task.expiresAtMs } }],
          task: { state: 'expired', version: 1 },
        }, 'the answer after expiry');
        const mine = await waitFor(async () => {
          const n = await notificationsFor(a, feedStart.a, task.id);
          return n.length > 0 && n;
        }, { timeoutMs: 2000 });
        assertMatches(mine, [{ taskId: task.id, state: 'expired', key: `${task.id}:expired:1` }], 'notifications for the task');

        const late = await exec.apply(task.id, expire(10));
        assertMatches(late, { changed: false, reason: 'duplicate-expire', version: 1 });
        const tooLate = await exec.apply(task.id, start(10));
        assertMatches(tooLate, { changed: false, reason: 'terminal-conflict', version: 1 });
        assert.equal((await notificationsFor(a, feedStart.a, task.id)).length, 1, 'still one notification');
      },
    },
    {
      name: 'a running task expires too',
      async run({ a, exec, feedStart }) {
        // Retried with a longer TTL when a busy backend let it expire
        // before the start was answered (lib/short-ttl.mjs).
        const { task, ttlMs, createdAt } = await shortLivedTask({ a, exec }, { ttlMs: TTL_MS, events: [start(10)] });
        const answer = await awaitExpiry(a, task, 1, createdAt, ttlMs);
        assertMatches(answer, {
          mode: 'delta',
          events: [{ version: 2, event: { type: 'expire', atMs: task.expiresAtMs } }],
          task: { state: 'expired', version: 2, attempts: 1 },
        }, 'the answer after expiry');
        const mine = await waitFor(async () => {
          const n = await notificationsFor(a, feedStart.a, task.id);
          return n.length > 0 && n;
        }, { timeoutMs: 2000 });
        assertMatches(mine, [{ state: 'expired', key: `${task.id}:expired:2` }], 'notifications for the task');
      },
    },
  ],
};

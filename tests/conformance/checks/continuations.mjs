// PROTOCOL.md §Lifecycle › Continuations over HTTP (issue 26): a re-queue
// after `approve` or `request_changes` is a continuation, not a failure.
// It spends no `maxAttempts`, progress does not fall, and a stale `error`
// is cleared when the task continues or its current attempt reports. The
// vector `lifecycle-17-a-continuation-is-not-a-failure` pins the same in
// core (it drives the sweeper's events directly, so vectors.mjs cannot
// replay it); these checks read what a page sees, the backend's own
// sweeper included. Each names the misreading it catches.

import { assertMatches } from '../lib/match.mjs';
import { waitFor } from '../lib/scenarios.mjs';

const HOUR = 3_600_000;
// Long enough that a loaded backend answers a report and the GET after
// it within one lease (at 300 ms, a cluster run at load 5, 330 ms per
// request, saw the recovered task lapse again before the GET).
const LEASE_MS = 1500;
const GRACE_MS = 1500;
/** How late the backend's sweeper may be (as in lifecycle.mjs). */
const LAG_MS = 6000;
const LAPSED = 'lease lapsed, no sign in the grace period';

/** An executor event of `attempt` (none for a seed executor), on the server's clock. */
const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), ...(attempt !== undefined && { attempt }), ...extra });
const startOf = (attempt, leaseMs = 60_000) => ev('start', attempt, { worker: `w${attempt ?? 0}`, ...(attempt !== undefined && { leaseMs }) });
const progressOf = (attempt, progress) => ev('progress', attempt, { progress, cursor: `c${progress}` });
const holdOf = (attempt, hash) => ev('hold', attempt, { artifactRef: `blob://${hash}`, artifactHash: hash });
const retryableFail = (attempt) => ev('fail', attempt, { error: 'timeout', retryable: true });

/** Holds the running task on `hash` and decides on it; returns the decision's answer. */
async function holdAndDecide(a, exec, id, attempt, hash, decision) {
  const held = await exec.drive(id, [holdOf(attempt, hash)]);
  return a.acted(id, 'decisions', { decision, artifactHash: hash, version: held.version });
}

/** Waits for the task to be in `state`, within the lag. */
async function stateOf(a, id, state) {
  const t = await waitFor(async () => {
    const task = await a.task(id);
    return task.state === state && task;
  }, { timeoutMs: LAG_MS, intervalMs: 50 });
  assertMatches(t || undefined, { state }, `the task within ${LAG_MS} ms`);
  return t;
}

export default {
  section: 'Continuations',
  protocol: 'Lifecycle › Continuations',
  checks: [
    {
      name: 'an approval spends no attempt: a task with maxAttempts 1, approved, starts attempt 2 and succeeds',
      // Misreading caught: counting every start against maxAttempts, so the
      // approved task cannot start again (not-startable) and sits queued
      // until its TTL.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1)]);
        const approved = await holdAndDecide(a, exec, task.id, 1, 'sha256:d1', 'approve');
        assertMatches(approved, { changed: true, reason: 'approved', task: { state: 'queued', attempts: 1, maxAttempts: 1, continuations: 1 } }, 'approve');
        assertMatches(await exec.apply(task.id, startOf(2)), { changed: true, reason: 'started', state: 'running' }, 'the start of attempt 2');
        await exec.drive(task.id, [ev('succeed', 2, { resultRef: 'blob://final', resultHash: 'sha256:f' })]);
        assertMatches(await a.task(task.id), { state: 'succeeded', attempts: 2, maxAttempts: 1, continuations: 1 }, 'the task');
      },
    },
    {
      name: 'progress does not fall across a decision and the next start; the continued attempt reports below it as stale-progress',
      // Misreading caught: resetting progress to 0 on the decision or on the
      // start that follows (the seed's start does), so a page's bar goes
      // 89 → 0 → 50 → 100 around an approval.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1), progressOf(1, 89)]);
        const changes = await holdAndDecide(a, exec, task.id, 1, 'sha256:v1', 'request_changes');
        assertMatches(changes, { reason: 'changes-requested', task: { state: 'queued', progress: 89 } }, 'request_changes');
        await exec.drive(task.id, [startOf(2)]);
        assertMatches(await a.task(task.id), { state: 'running', attempts: 2, progress: 89 }, 'after the next start');
        assertMatches(await exec.apply(task.id, progressOf(2, 50)), { changed: false, reason: 'stale-progress' }, 'a lower report');
        assertMatches(await exec.apply(task.id, progressOf(2, 95)), { changed: true, reason: 'progress' }, 'a higher report');
        assertMatches(await a.task(task.id), { progress: 95 }, 'the task');
      },
    },
    {
      name: "a retried failure's error survives the next start and the hold, not the decision to continue; the continuation grants a start, not a retry",
      // Misreadings caught: keeping the error until a success (the page
      // shows "timeout" on a task a person let go on), clearing it at the
      // start (vector fix-05 keeps it there), or granting the continued
      // attempt a retry beyond maxAttempts.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2 });
        await exec.drive(task.id, [startOf(1), retryableFail(1), startOf(2)]);
        assertMatches(await a.task(task.id), { state: 'running', error: 'timeout' }, 'after the retry starts');
        const approved = await holdAndDecide(a, exec, task.id, 2, 'sha256:b1', 'approve');
        assertMatches(approved, { reason: 'approved', task: { state: 'queued', error: null, continuations: 1 } }, 'approve');
        await exec.drive(task.id, [startOf(3)]);
        const failed = await exec.apply(task.id, ev('fail', 3, { error: 'timeout again', retryable: true }));
        assertMatches(failed, { changed: true, notify: true, reason: 'failed', state: 'failed' }, 'the continued attempt fails with maxAttempts spent');
      },
    },
    {
      name: "the current attempt's first report clears an earlier failure's error; a report without attempt keeps it (the seed's rule)",
      // Misreadings caught: keeping the error while the next attempt runs
      // fine, or clearing it on any report (a report without attempt may
      // be a late one from the attempt that failed: seed runs keep it).
      async run({ a, exec }) {
        const current = await a.createTask({ ttlMs: HOUR, maxAttempts: 2 });
        await exec.drive(current.id, [startOf(1), retryableFail(1), startOf(2)]);
        await exec.drive(current.id, [progressOf(2, 10)]);
        assertMatches(await a.task(current.id), { progress: 10, error: null }, 'after attempt 2 reports');

        const seed = await a.createTask({ ttlMs: HOUR, maxAttempts: 2 });
        await exec.drive(seed.id, [startOf(), retryableFail(), startOf(), progressOf(undefined, 10)]);
        assertMatches(await a.task(seed.id), { progress: 10, error: 'timeout' }, 'a seed executor after its retry reports');
      },
    },
    {
      name: "the backend's sweeper: a lapse keeps progress, the recovery clears the error, and after a give-up the next attempt's first report clears \"lease lapsed\"",
      // Misreadings caught: resetting progress on a lapse or a recovery,
      // keeping "timeout" on a recovered attempt, or keeping "lease
      // lapsed…" while the next attempt runs fine (the reported bug).
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, unknownGraceMs: 60_000 });
        await exec.drive(task.id, [startOf(1), retryableFail(1), startOf(2, LEASE_MS)]);
        assertMatches(await stateOf(a, task.id, 'unknown'), { progress: 0, error: 'timeout' }, 'after the lapse');
        assertMatches(await exec.apply(task.id, ev('heartbeat', 2)), { changed: true, reason: 'recovered', state: 'running' }, 'the heartbeat');
        assertMatches(await a.task(task.id), { error: null }, 'after the recovery');
        await exec.drive(task.id, [progressOf(2, 30)]);
        assertMatches(await stateOf(a, task.id, 'unknown'), { progress: 30 }, 'after the second lapse');
        assertMatches(await exec.apply(task.id, progressOf(2, 20)), { changed: true, reason: 'recovered' }, 'a lower report that recovers');
        assertMatches(await a.task(task.id), { state: 'running', progress: 30 }, 'never back across a lapse');

        const given = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, unknownGraceMs: GRACE_MS });
        await exec.drive(given.id, [startOf(1, LEASE_MS), progressOf(1, 40)]);
        assertMatches(await stateOf(a, given.id, 'queued'), { attempts: 1, progress: 0, error: LAPSED }, 'given up: the work starts over');
        await exec.drive(given.id, [startOf(2)]);
        assertMatches(await a.task(given.id), { error: LAPSED }, 'kept by the start');
        await exec.drive(given.id, [progressOf(2, 5)]);
        assertMatches(await a.task(given.id), { state: 'running', progress: 5, error: null }, 'attempt 2 runs fine');
      },
    },
  ],
};

// PROTOCOL.md §Lifecycle over HTTP: cancel, approval holds, leases that
// fence off a dead worker, `unknown`, the execution deadline, and what an
// executor may not send. The same scenarios as the reference server's own
// tests (server/tests/common/lifecycle.rs). Leases, grace periods and
// deadlines are a few hundred milliseconds, so the checks that wait for
// the sweeper cost about a second each (they run concurrently); the lag
// allowed is the TTL check's.
//
// Readings: the default lease of a `start` with `attempt` and no
// `leaseMs`, and the default grace period, are the backend's (30 s and
// 60 s in the reference server): a task shows its grace period, so that
// one is checked to be there; the default lease is not waited out.

import assert from 'node:assert/strict';
import { assertError, assertMatches, assertResumeResponse } from '../lib/match.mjs';
import { uid } from '../lib/client.mjs';
import { waitFor } from '../lib/scenarios.mjs';
import { HOUR, LAG_MS, ev, notificationsFor, startOf } from '../lib/lifecycle.mjs';

const LEASE_MS = 300;
const GRACE_MS = 300;
const DEADLINE_MS = 400;
/** TTLs long enough for a start and a hold to arrive first (the second for a slow machine). */
const HELD_TTL_MS = [3000, 10_000];
const ACTOR = /^\S/;

/** A held resume from `cursor`, which must wake with a change within the lag. */
async function held(a, id, cursor) {
  const res = await a.resume(id, { cursor, waitMs: LAG_MS + 2000 });
  const answer = assertResumeResponse(res, undefined, `held resume from ${cursor}`);
  assert.notEqual(answer.mode, 'caught-up', `nothing happened to the task within ${LAG_MS} ms (the sweeper is late, or never ran)`);
  return answer;
}

/** Waits for the task to be in `state`, within the lag. */
async function stateOf(a, id, state) {
  const t = await waitFor(async () => {
    const task = await a.task(id);
    return task.state === state && task;
  }, { timeoutMs: LAG_MS, intervalMs: 50 });
  assert.ok(t, `the task never became ${state} within ${LAG_MS} ms`);
  return t;
}

/** How far behind the server's clock the leased workers' clocks run (within the 5 minutes allowed). */
const SKEW_MS = 60_000;
/** How far the suite's clock and the backend's may disagree. */
const CLOCK_SLACK_MS = 2000;

/**
 * §Workers, "Leases run on the server's clock": a lease opened by a start
 * sent at `sent` (answered at `answered`) ends `LEASE_MS` after the
 * backend received it, whatever the start's own atMs said.
 */
function assertLeaseFromReceipt(lapseAt, sent, answered) {
  const [low, high] = [sent + LEASE_MS - CLOCK_SLACK_MS, answered + LEASE_MS + CLOCK_SLACK_MS];
  assert.ok(
    lapseAt >= low && lapseAt <= high,
    `the lapse is at ${lapseAt}: a lease runs from when the backend received the start (${sent}..${answered}) + ${LEASE_MS} ms, not from the start's atMs (${SKEW_MS} ms earlier)`,
  );
}

/** The actor is the caller's credential; atMs the server's clock. */
function assertRecordedByServer(event, what) {
  assert.match(String(event.actor), ACTOR, `${what}: the history entry must record the actor (the caller's credential)`);
  assert.ok(Math.abs(event.atMs - Date.now()) < 60_000, `${what}: atMs must be the server's clock, got ${event.atMs}`);
}

export default {
  section: 'Lifecycle',
  protocol: 'Lifecycle',
  checks: [
    {
      name: '§Cancel: a queued task is cancelled at once and notified once; a repeat is duplicate-cancel, no second version',
      async run({ a, exec, feedStart }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        const first = await a.acted(task.id, 'cancel', { reason: 'changed my mind' });
        assertMatches(first, { changed: true, duplicate: false, reason: 'cancelled', task: { id: task.id, state: 'cancelled', version: 1 } }, 'cancel');
        for (const body of [{}, undefined, { reason: 'again' }]) {
          const again = await a.acted(task.id, 'cancel', body);
          assertMatches(again, { changed: false, reason: 'duplicate-cancel', task: { state: 'cancelled', version: 1 } }, `cancel again (${JSON.stringify(body)})`);
        }
        const answer = await a.answer(task.id, 0, { mode: 'delta', events: [{ version: 1, event: { type: 'cancel', reason: 'changed my mind' } }] });
        assertRecordedByServer(answer.events[0].event, 'the cancel');
        assertMatches(await notificationsFor(a, feedStart.a, task.id), [{ state: 'cancelled', key: `${task.id}:cancelled:1` }], 'notifications');
        const late = { type: 'start', atMs: Date.now(), worker: 'w1' };
        assertMatches(await exec.apply(task.id, late), { changed: false, reason: 'terminal-conflict', version: 1 }, 'a start after the cancel');
      },
    },
    {
      name: '§Cancel: a running task is cancelling; the executor learns it from its next answer (cancelRequested) and acknowledges',
      async run({ a, exec, feedStart }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        const started = await exec.apply(task.id, startOf(1));
        assert.equal(started.cancelRequested, false, 'callback answer.cancelRequested: false while nobody asked');
        const asked = await a.acted(task.id, 'cancel', {});
        assertMatches(asked, { changed: true, reason: 'cancel-requested', task: { state: 'cancelling', version: 2 } }, 'cancel');
        const beat = await exec.apply(task.id, ev('heartbeat', 1));
        assertMatches(beat, { changed: false, reason: 'heartbeat', state: 'cancelling', version: 2, cancelRequested: true }, 'the heartbeat after the cancel');
        assertMatches(await a.acted(task.id, 'cancel', {}), { changed: false, reason: 'duplicate-cancel', task: { version: 2 } }, 'cancel again');
        const ack = await exec.apply(task.id, ev('ack_cancel', 1));
        assertMatches(ack, { changed: true, notify: true, reason: 'cancel-acknowledged', state: 'cancelled', version: 3, cancelRequested: false }, 'ack_cancel');
        assertMatches(await notificationsFor(a, feedStart.a, task.id), [{ state: 'cancelled', key: `${task.id}:cancelled:3` }], 'notifications');
      },
    },
    {
      name: '§Cancel: cannot_cancel shows cancel_ineffective (still live); a result that comes anyway ends it cancelled, kept, never delivered',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1)]);
        await a.acted(task.id, 'cancel', {});
        const no = await exec.apply(task.id, ev('cannot_cancel', 1, { reason: 'the remote job cannot be aborted' }));
        assertMatches(no, { changed: true, notify: false, reason: 'cancel-ineffective', state: 'cancel_ineffective', version: 3 }, 'cannot_cancel');
        assertMatches(await a.acted(task.id, 'cancel', {}), { changed: false, reason: 'duplicate-cancel' }, 'cancel again');
        const resultRef = `blob://${uid('r')}`;
        const late = await exec.apply(task.id, ev('succeed', 1, { resultRef, resultHash: 'sha256:late' }));
        assertMatches(late, { changed: true, notify: true, reason: 'succeeded-after-cancel', state: 'cancelled', version: 4 }, 'the result after the cancel');
        assertMatches(await a.task(task.id), { state: 'cancelled', resultRef, resultHash: 'sha256:late' }, 'the task keeps the result for compensation');
        assertError(await a.deliver(task.id, uid('d')), 409, 'not-succeeded');
      },
    },
    {
      name: '§Decisions: a hold waits for a person; stale and repeated decisions change nothing; approve re-queues, the actor recorded',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1)]);
        const hold = await exec.apply(task.id, ev('hold', 1, { artifactRef: 'blob://draft-1', artifactHash: 'sha256:d1', question: 'Publish this summary?' }));
        assertMatches(hold, { changed: true, reason: 'held', state: 'waiting_approval', version: 2 }, 'hold');
        assertMatches(await a.task(task.id), { artifactRef: 'blob://draft-1', artifactHash: 'sha256:d1', question: 'Publish this summary?' }, 'the held task');
        const decide = (body) => a.acted(task.id, 'decisions', body);
        assertMatches(await decide({ decision: 'approve', artifactHash: 'sha256:old', version: 2 }), { changed: false, reason: 'stale-decision', task: { version: 2 } }, 'a decision on another artifact');
        assertMatches(await decide({ decision: 'approve', artifactHash: 'sha256:d1', version: 1 }), { changed: false, reason: 'stale-decision', task: { version: 2 } }, 'a decision on an older version');
        const approved = await decide({ decision: 'approve', artifactHash: 'sha256:d1', version: 2, reason: 'looks right' });
        assertMatches(approved, {
          changed: true,
          reason: 'approved',
          task: { state: 'queued', version: 3, continuations: 1, decision: 'approve', decisionVersion: 2, decisionReason: 'looks right' },
        }, 'approve');
        assertMatches(await decide({ decision: 'approve', artifactHash: 'sha256:d1', version: 2, reason: 'looks right' }), { changed: false, reason: 'duplicate-decision', task: { version: 3 } }, 'the same decision again');
        const answer = await a.answer(task.id, 2, {
          mode: 'delta',
          events: [{ version: 3, event: { type: 'decide', decision: 'approve', artifactHash: 'sha256:d1', version: 2, reason: 'looks right' } }],
        });
        assertRecordedByServer(answer.events[0].event, 'the decision');
        // The next attempt goes on from the artifact; a continuation is not a failure's retry.
        await exec.drive(task.id, [startOf(2), ev('succeed', 2, { resultRef: 'blob://final', resultHash: 'sha256:f' })]);
        assertMatches(await a.task(task.id), { state: 'succeeded', attempts: 2, version: 5 }, 'the task');
      },
    },
    {
      name: '§Decisions: request_changes re-queues for a revision; reject fails the task, notified once',
      async run({ a, exec, feedStart }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1), ev('hold', 1, { artifactRef: 'blob://v1', artifactHash: 'sha256:v1' })]);
        const changes = await a.acted(task.id, 'decisions', { decision: 'request_changes', artifactHash: 'sha256:v1', version: 2, reason: 'shorter' });
        assertMatches(changes, { changed: true, reason: 'changes-requested', task: { state: 'queued', decision: 'request_changes', decisionReason: 'shorter' } }, 'request_changes');
        await exec.drive(task.id, [startOf(2), ev('hold', 2, { artifactRef: 'blob://v2', artifactHash: 'sha256:v2' })]);
        const rejected = await a.acted(task.id, 'decisions', { decision: 'reject', artifactHash: 'sha256:v2', version: 5 });
        assertMatches(rejected, { changed: true, reason: 'rejected', task: { state: 'failed', version: 6 } }, 'reject');
        assertMatches(await notificationsFor(a, feedStart.a, task.id), [{ state: 'failed', key: `${task.id}:failed:6` }], 'notifications');
      },
    },
    {
      name: '§Lifecycle, leases: a heartbeat renews the lease with no version and no history entry',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        const s = startOf(1);
        await exec.drive(task.id, [s]);
        for (const beat of [{ type: 'heartbeat', atMs: s.atMs + 100, attempt: 1 }, { type: 'heartbeat', atMs: s.atMs + 200, attempt: 1, leaseMs: 90_000 }]) {
          assertMatches(await exec.apply(task.id, beat), { changed: false, duplicate: false, reason: 'heartbeat', state: 'running', version: 1 }, 'heartbeat');
        }
        await a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1, state: 'running' } });
        await a.answer(task.id, 0, { mode: 'delta', events: [{ version: 1, event: s }] });
      },
    },
    {
      name: '§Lifecycle, leases and fencing: a silent worker lapses into unknown, the grace period re-queues the task, the zombie is fenced off',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, unknownGraceMs: GRACE_MS });
        assert.equal(task.unknownGraceMs, GRACE_MS, 'created task.unknownGraceMs');
        // A worker whose clock runs a minute behind: the lease runs on the server's.
        const s = { ...startOf(1, LEASE_MS), atMs: Date.now() - SKEW_MS };
        const sent = Date.now();
        await exec.drive(task.id, [s]);
        const answered = Date.now();
        // Silence: the lease lapses, recorded when it fell due, not when the sweeper saw it.
        const woke = await held(a, task.id, 1);
        assertMatches(woke.events[0], { version: 2, event: { type: 'lapse', attempt: 1 } }, 'the entry that woke the held resume');
        const lapseAt = woke.events[0].event.atMs;
        assertLeaseFromReceipt(lapseAt, sent, answered);
        await stateOf(a, task.id, 'queued');
        await a.answer(task.id, 1, {
          mode: 'delta',
          events: [{ version: 2, event: { type: 'lapse', atMs: lapseAt, attempt: 1 } }, { version: 3, event: { type: 'abandon', atMs: lapseAt + GRACE_MS } }],
          task: { state: 'queued', attempts: 1, version: 3 },
        });
        // The old worker comes back: fenced off, nothing recorded, not a duplicate.
        for (const zombie of [ev('succeed', 1, { resultRef: 'blob://old', resultHash: 'sha256:old' }), ev('progress', 1, { progress: 90, cursor: 'c90' }), ev('heartbeat', 1)]) {
          assertMatches(await exec.apply(task.id, zombie), { changed: false, duplicate: false, reason: 'stale-attempt', version: 3 }, `the zombie's ${zombie.type}`);
        }
        await exec.drive(task.id, [startOf(2), ev('succeed', 2, { resultRef: 'blob://new', resultHash: 'sha256:new' })]);
        assertMatches(await a.task(task.id), { state: 'succeeded', attempts: 2, resultRef: 'blob://new', version: 5 }, 'the task');
      },
    },
    {
      name: '§Lifecycle, leases: an unknown task recovers when its attempt reports again; autoRequeue false keeps no grace period',
      async run({ a, exec }) {
        const kept = await a.createTask({ ttlMs: HOUR, maxAttempts: 1, autoRequeue: false });
        assertMatches(kept, { unknownGraceMs: null }, 'a task created with autoRequeue false');
        const s = { ...startOf(1, LEASE_MS), atMs: Date.now() - SKEW_MS };
        const sent = Date.now();
        await exec.drive(kept.id, [s]);
        const answered = Date.now();
        const woke = await held(a, kept.id, 1);
        assertMatches(woke, { events: [{ version: 2, event: { type: 'lapse', attempt: 1 } }], task: { state: 'unknown' } }, 'the lapse');
        assertLeaseFromReceipt(woke.events[0].event.atMs, sent, answered);
        const back = await exec.apply(kept.id, ev('heartbeat', 1, { leaseMs: 60_000 }));
        assertMatches(back, { changed: true, reason: 'recovered', state: 'running', version: 3 }, 'a heartbeat of the unknown attempt');
        const fenced = await exec.apply(kept.id, ev('heartbeat', 2));
        assertMatches(fenced, { changed: false, reason: 'stale-attempt', version: 3 }, 'a heartbeat of another attempt');
      },
    },
    {
      name: '§Lifecycle, execution deadline: past deadlineAtMs a task is timed_out (recorded at it), notified once; the TTL is untouched',
      async run({ a, exec, feedStart }) {
        const [running, queued] = await Promise.all([0, 1].map(() => a.createTask({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: DEADLINE_MS })));
        for (const t of [running, queued]) assert.equal(t.deadlineAtMs, t.expiresAtMs - HOUR + DEADLINE_MS, 'deadlineAtMs: creation time + deadlineMs');
        // Started before its deadline (on a slow machine the start may come
        // after the sweeper timed the task out: then it is refused, and the
        // timeout is version 1).
        const started = await exec.apply(running.id, { ...startOf(1), atMs: running.deadlineAtMs - DEADLINE_MS });
        const v = started.changed ? 2 : 1;
        const [r, q] = await Promise.all([held(a, running.id, v - 1), held(a, queued.id, 0)]);
        assertMatches(r, { events: [{ version: v, event: { type: 'timeout', atMs: running.deadlineAtMs } }], task: { state: 'timed_out', expiresAtMs: running.expiresAtMs } }, 'the running task');
        assertMatches(q, { events: [{ version: 1, event: { type: 'timeout', atMs: queued.deadlineAtMs } }], task: { state: 'timed_out' } }, 'the queued task');
        assertMatches(await notificationsFor(a, feedStart.a, running.id), [{ state: 'timed_out', key: `${running.id}:timed_out:${v}` }], 'notifications');
        const late = { type: 'succeed', atMs: Date.now(), resultRef: 'blob://late', resultHash: 'sha256:late' };
        assertMatches(await exec.apply(running.id, late), { changed: false, reason: 'terminal-conflict' }, 'a result after the deadline');
      },
    },
    {
      name: '§Lifecycle: a held task still expires at its TTL (waiting is never an approval)',
      timeoutMs: 60_000,
      async run({ a, exec }) {
        // The start and the hold must arrive before the TTL: on a machine so
        // slow that they did not, the task expired first; try once more
        // with a longer TTL.
        for (const ttlMs of HELD_TTL_MS) {
          const task = await a.createTask({ ttlMs, maxAttempts: 1 });
          await exec.apply(task.id, startOf(1));
          const hold = await exec.apply(task.id, ev('hold', 1, { artifactRef: 'blob://a', artifactHash: 'sha256:a' }));
          const late = hold.state === 'expired' && ttlMs !== HELD_TTL_MS.at(-1);
          if (late) continue;
          assertMatches(hold, { changed: true, reason: 'held', state: 'waiting_approval', version: 2 }, 'hold');
          const woke = await held(a, task.id, 2);
          assertMatches(woke, { events: [{ version: 3, event: { type: 'expire', atMs: task.expiresAtMs } }], task: { state: 'expired' } }, 'the held task at its TTL');
          return;
        }
      },
    },
    {
      name: "§Executor callback, order of the checks: people's and the sweeper's events are 422 not-an-executor-event, nothing changes; expire is still accepted",
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1)]);
        const now = Date.now();
        for (const event of [
          { type: 'cancel', atMs: now },
          { type: 'decide', atMs: now, decision: 'approve', artifactHash: 'sha256:x', version: 1 },
          { type: 'lapse', atMs: now, attempt: 1 },
          { type: 'abandon', atMs: now },
          { type: 'timeout', atMs: now },
        ]) {
          assertError(await exec.send(task.id, event), 422, 'not-an-executor-event', 'event.type');
        }
        assertError(await exec.send(task.id, { type: 'cancel', atMs: -1 }), 400, 'invalid-request', 'atMs');
        assert.equal(await a.version(task.id), 1, 'nothing changed');
        // As in seed 000: an executor's expire ends the task, recorded at its TTL.
        const expire = await exec.apply(task.id, { type: 'expire', atMs: now });
        assertMatches(expire, { changed: true, reason: 'expired', state: 'expired', version: 2 }, 'an expire');
        await a.answer(task.id, 1, { mode: 'delta', events: [{ version: 2, event: { type: 'expire', atMs: task.expiresAtMs } }] });
      },
    },
    {
      name: '§Answers: a body with type, atMs or actor is 400 naming it; bad bodies 400; an unknown task 404; no token 401',
      async run({ a, b, anon }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        for (const [what, body] of [
          ['cancel', { type: 'cancel' }],
          ['cancel', { atMs: 1 }],
          ['cancel', { actor: 'someone-else' }],
          ['decisions', { decision: 'reject', artifactHash: 'sha256:x', version: 1, actor: 'someone-else' }],
          ['decisions', { decision: 'reject', artifactHash: 'sha256:x', version: 1, type: 'decide' }],
        ]) {
          const field = Object.keys(body).find((k) => ['type', 'atMs', 'actor'].includes(k));
          assertError(await a.act(task.id, what, body), 400, 'invalid-request', `body.${field}`);
        }
        assertError(await a.act(task.id, 'cancel', '[1]'), 400, 'invalid-request', 'body');
        assertError(await a.act(task.id, 'cancel', '{"reason":'), 400, 'invalid-request', 'body');
        assertError(await a.act(task.id, 'cancel', { reason: 5 }), 400, 'invalid-request', 'reason');
        assertError(await a.act(task.id, 'decisions', undefined), 400, 'invalid-request', 'body');
        assertError(await a.act(task.id, 'decisions', { decision: 'maybe', artifactHash: 'sha256:x', version: 1 }), 400, 'invalid-request', 'decision');
        assertError(await a.act(task.id, 'decisions', { decision: 'approve', version: 1 }), 400, 'invalid-request', 'artifactHash');
        assertError(await a.act(task.id, 'decisions', { decision: 'approve', artifactHash: 'sha256:x', version: '1' }), 400, 'invalid-request', 'version');
        assertError(await a.act(`tsk_${uid('missing')}`, 'cancel', {}), 404, 'not-found');
        if (b) assertError(await b.act(task.id, 'cancel', {}), 404, 'not-found');
        assertError(await anon.act(task.id, 'cancel', {}), 401, 'unauthorized');
        assertError(await a.http.request('GET', `/v1/tasks/${task.id}/cancel`), 405, 'method-not-allowed');
        assert.equal(await a.version(task.id), 0, 'nothing changed');
      },
    },
    {
      name: '§Create a task: deadlineMs, unknownGraceMs, autoRequeue validated naming the field, shown on the task, compared under a key only when sent',
      async run({ a }) {
        for (const [field, value] of [
          ['deadlineMs', 0],
          ['deadlineMs', -5],
          ['deadlineMs', '5000'],
          ['unknownGraceMs', -1],
          ['unknownGraceMs', 'soon'],
          ['autoRequeue', 'no'],
        ]) {
          assertError(await a.create({ ttlMs: HOUR, maxAttempts: 1, [field]: value }), 400, 'invalid-request', field);
        }
        const plain = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        assertMatches(plain, { deadlineAtMs: null }, 'a task without a deadline');
        assert.ok(typeof plain.unknownGraceMs === 'number' && plain.unknownGraceMs >= 0, `a task gets the server's default grace period, got ${plain.unknownGraceMs}`);
        const timed = await a.createTask({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: 5000, unknownGraceMs: 1000 });
        assertMatches(timed, { deadlineAtMs: timed.expiresAtMs - HOUR + 5000, unknownGraceMs: 1000 }, 'a task with both');
        const k1 = uid('key');
        const first = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 }, { key: k1 });
        assertError(await a.create({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: 5000 }, { key: k1 }), 422, 'idempotency-key-reused');
        const replay = await a.create({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: null }, { key: k1 });
        assert.equal(replay.status, 200, `a null lifecycle field is the same as none: expected 200, got ${replay.status}`);
        assert.equal(replay.json.id, first.id);
        const k2 = uid('key');
        const withDeadline = await a.createTask({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: 5000 }, { key: k2 });
        const same = await a.create({ deadlineMs: 5e3, maxAttempts: 1, ttlMs: HOUR }, { key: k2 });
        assert.equal(same.status, 200, `the same body again: expected 200, got ${same.status}`);
        assert.equal(same.json.id, withDeadline.id);
        assertError(await a.create({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: 6000 }, { key: k2 }), 422, 'idempotency-key-reused');
        assertError(await a.create({ ttlMs: HOUR, maxAttempts: 1, deadlineMs: 5000, autoRequeue: false }, { key: k2 }), 422, 'idempotency-key-reused');
      },
    },
    {
      name: '§Events stream: the lifecycle states stream as deltas, and a stream ends after cancelled',
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(task.id, [startOf(1)]);
        const res = await a.events(task.id, { lastEventId: 1 });
        assert.equal(res.status, 200, `events: expected 200, got ${res.status}`);
        const stream = res.stream;
        try {
          const read = async (what) => {
            const m = await stream.next(5000);
            assert.ok(m, `${what}: the stream ended instead`);
            return JSON.parse(m.data);
          };
          assertMatches(await read('first message'), { mode: 'caught-up', task: { version: 1 } }, 'first message');
          await a.acted(task.id, 'cancel', {});
          assertMatches(await read('after the cancel'), { mode: 'delta', events: [{ version: 2, event: { type: 'cancel' } }], task: { state: 'cancelling' } }, 'after the cancel');
          await exec.drive(task.id, [ev('ack_cancel', 1)]);
          assertMatches(await read('after ack_cancel'), { mode: 'delta', events: [{ version: 3, event: { type: 'ack_cancel' } }], task: { state: 'cancelled' } }, 'after ack_cancel');
          let end;
          try {
            end = await stream.next(3000);
          } catch {
            assert.fail('the stream is still open 3 s after the message with the cancelled (terminal) state');
          }
          assert.equal(end, null, 'no message may follow the terminal one');
        } finally {
          stream.close();
        }
      },
    },
  ],
};

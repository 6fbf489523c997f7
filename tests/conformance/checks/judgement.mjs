// PROTOCOL.md §Wire types › State machine rules: the order in which an
// executor's event is judged, which callback ids are remembered, what
// "the same event" is, which strings may be blank, and what each outcome
// keeps of `progress` and `error`.

import assert from 'node:assert/strict';
import { assertError, assertMatches } from '../lib/match.mjs';
import { expire, fail, progress, start, succeed } from '../lib/events.mjs';
import { runningTask, succeededTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';
import { nowSeconds } from '../lib/sign.mjs';

/** Sends and checks the transition answer's reason and version. */
async function judged(exec, taskId, event, expected, what, opts) {
  const t = await exec.apply(taskId, event, opts);
  assertMatches(t, expected, what);
  return t;
}

/** The task's last history entry, through resume. */
async function lastEntry(a, id) {
  const task = await a.task(id);
  const answer = await a.answer(id, task.version - 1);
  return answer.events.at(-1);
}

export default {
  section: 'State machine rules: order of judgement',
  protocol: 'Wire types › State machine rules',
  concurrency: 3,
  checks: [
    {
      name: '1. validation first: an invalid event is 400 even under a remembered callback id, and an invalid late event does not expire the task',
      async run(ctx) {
        const task = await runningTask(ctx);
        const id = uid('cb');
        await judged(ctx.exec, task.id, progress(200, 10), { reason: 'progress', version: 2 }, 'first use of the id', { id });
        assertError(await ctx.exec.send(task.id, progress(300, 101), { id }), 400, 'invalid-request', 'progress');
        const late = task.expiresAtMs + 1000;
        assertError(await ctx.exec.send(task.id, progress(late, 101)), 400, 'invalid-request', 'progress');
        assertError(await ctx.exec.send(task.id, { type: 'succeed', atMs: late, resultRef: ' ', resultHash: 'h' }), 400, 'invalid-request', 'resultRef');
        assertMatches(await ctx.a.task(task.id), { state: 'running', version: 2 }, 'the task after the invalid events');
      },
    },
    {
      name: '2. the callback id before terminal absorption: on a succeeded task a remembered id is duplicate-callback or callback-conflict',
      async run(ctx) {
        const task = await runningTask(ctx);
        const id = uid('cb');
        const s = succeed(200, 'blob://j', 'sha256:j');
        await judged(ctx.exec, task.id, s, { reason: 'succeeded', version: 2 }, 'the success', { id });
        await judged(ctx.exec, task.id, s, { reason: 'duplicate-callback', duplicateCallback: true, changed: false },
          'the same id and event (not duplicate-result)', { id });
        await judged(ctx.exec, task.id, succeed(200, 'blob://j', 'sha256:other'), { reason: 'callback-conflict', changed: false },
          'the same id, another result (not result-conflict)', { id });
        await judged(ctx.exec, task.id, start(300), { reason: 'callback-conflict', changed: false },
          'the same id, another event (not terminal-conflict)', { id });
      },
    },
    {
      name: '2. the callback id before expiry: a remembered id with a late event is callback-conflict, and the task does not expire',
      async run(ctx) {
        const task = await runningTask(ctx);
        const id = uid('cb');
        await judged(ctx.exec, task.id, progress(200, 10), { reason: 'progress', version: 2 }, 'first use of the id', { id });
        const late = task.expiresAtMs + 1000;
        await judged(ctx.exec, task.id, progress(late, 20), { reason: 'callback-conflict', changed: false, version: 2 },
          'the same id with a late event (not expired)', { id });
        assertMatches(await ctx.a.task(task.id), { state: 'running', version: 2 }, 'the task');
      },
    },
    {
      // Misreading caught: terminal absorption before fencing, so a
      // replaced worker's late result is duplicate-result or
      // result-conflict (it looks like a retry of the winner's).
      name: '3. fencing before terminal absorption: a replaced attempt\'s late succeed on a succeeded task is stale-attempt, not duplicate-result',
      async run(ctx) {
        const task = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 2 });
        const at = Date.now();
        const result = { resultRef: 'blob://r', resultHash: 'sha256:same' };
        await ctx.exec.drive(task.id, [
          { type: 'start', atMs: at, worker: 'w1', attempt: 1 },
          { type: 'fail', atMs: at, error: 'lost', retryable: true, attempt: 1 },
          { type: 'start', atMs: at, worker: 'w2', attempt: 2 },
          { type: 'succeed', atMs: at, attempt: 2, ...result },
        ]);
        await judged(ctx.exec, task.id, { type: 'succeed', atMs: at, attempt: 1, ...result }, { reason: 'stale-attempt', changed: false, duplicate: false, version: 4 },
          'attempt 1\'s succeed with the same hash');
        await judged(ctx.exec, task.id, { type: 'succeed', atMs: at, attempt: 1, resultRef: 'blob://o', resultHash: 'sha256:other' },
          { reason: 'stale-attempt', version: 4 }, 'attempt 1\'s succeed with another hash');
        await judged(ctx.exec, task.id, { type: 'succeed', atMs: at, attempt: 2, ...result }, { reason: 'duplicate-result', duplicate: true, version: 4 },
          'attempt 2\'s succeed again');
      },
    },
    {
      // Misreadings caught: only seed 000's absorption reasons (a repeated
      // cancel or decision on a finished task answered terminal-conflict),
      // or a cancelled task's kept result never compared.
      name: '4. terminal absorption, the lifecycle\'s reasons: duplicate-cancel, a result on a cancelled task that kept one, duplicate-decision after a reject',
      async run(ctx) {
        const at = () => Date.now();
        const kept = await runningTask(ctx);
        await ctx.a.acted(kept.id, 'cancel', {});
        await judged(ctx.exec, kept.id, succeed(at(), 'blob://k', 'sha256:k'), { reason: 'succeeded-after-cancel', state: 'cancelled', version: 3 }, 'the result after the cancel');
        await judged(ctx.exec, kept.id, succeed(at(), 'blob://k', 'sha256:k'), { reason: 'duplicate-result', duplicate: true, version: 3 }, 'the same result again');
        await judged(ctx.exec, kept.id, succeed(at(), 'blob://o', 'sha256:other'), { reason: 'result-conflict', duplicate: false, version: 3 }, 'another result');
        await judged(ctx.exec, kept.id, { type: 'ack_cancel', atMs: at() }, { reason: 'duplicate-cancel', duplicate: true, version: 3 }, 'an ack_cancel');
        assertMatches(await ctx.a.acted(kept.id, 'cancel', {}), { changed: false, duplicate: true, reason: 'duplicate-cancel' }, 'a cancel');
        const none = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 1 });
        await ctx.a.acted(none.id, 'cancel', {});
        await judged(ctx.exec, none.id, { type: 'start', atMs: at(), worker: 'w' }, { reason: 'terminal-conflict', version: 1 }, 'a start on a cancelled task');
        await judged(ctx.exec, none.id, succeed(at(), 'blob://k', 'sha256:k'), { reason: 'terminal-conflict', version: 1 }, 'a result on a cancelled task that kept none');
        const held = await runningTask(ctx);
        await ctx.exec.drive(held.id, [{ type: 'hold', atMs: at(), artifactRef: 'blob://d', artifactHash: 'sha256:d' }]);
        const reject = { decision: 'reject', artifactHash: 'sha256:d', version: 2 };
        assertMatches(await ctx.a.acted(held.id, 'decisions', { ...reject, reason: 'off-topic' }), { reason: 'rejected', task: { state: 'failed', error: 'rejected: off-topic' } }, 'the reject');
        assertMatches(await ctx.a.acted(held.id, 'decisions', reject), { changed: false, duplicate: true, reason: 'duplicate-decision' }, 'the same reject again (no reason)');
        assertMatches(await ctx.a.acted(held.id, 'decisions', { ...reject, decision: 'approve' }), { changed: false, reason: 'terminal-conflict' }, 'an approve after the reject');
      },
    },
    {
      name: '4. terminal absorption before expiry: a late event on a terminal task is absorbed, never expires it',
      async run(ctx) {
        const done = await succeededTask(ctx);
        const late = done.expiresAtMs + 1000;
        await judged(ctx.exec, done.id, succeed(late, done.resultRef, done.resultHash), { reason: 'duplicate-result', version: 2 },
          'a late duplicate success');
        await judged(ctx.exec, done.id, succeed(late, done.resultRef, 'sha256:other'), { reason: 'result-conflict', version: 2 },
          'a late other result');
        await judged(ctx.exec, done.id, progress(late, 50), { reason: 'terminal-conflict', version: 2 }, 'a late progress');
        await judged(ctx.exec, done.id, expire(late), { reason: 'terminal-conflict', version: 2 }, 'an expire event');
        assertMatches(await ctx.a.task(done.id), { state: 'succeeded', version: 2 }, 'the task');
      },
    },
    {
      name: "5. expiry before the event's own rule: any late event expires a live task, whatever it is",
      async run(ctx) {
        const queued = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 2 });
        await judged(ctx.exec, queued.id, progress(queued.expiresAtMs, 10), { reason: 'expired', changed: true, notify: true, state: 'expired' },
          'a progress at expiresAtMs on a queued task (not not-running)');
        const running = await runningTask(ctx);
        await judged(ctx.exec, running.id, succeed(running.expiresAtMs + 5, 'blob://late', 'sha256:late'),
          { reason: 'expired', state: 'expired', version: 2 }, 'a late success (not succeeded)');
        assertMatches(await ctx.a.task(running.id), { resultRef: null, resultHash: null }, 'no result kept from a late success');
      },
    },
    {
      name: 'then: only a callback that changed its task is remembered: its id, used first by a not-running event, applies later',
      async run(ctx) {
        const task = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 2 });
        const id = uid('cb');
        const s = succeed(300, 'blob://early', 'sha256:early');
        await judged(ctx.exec, task.id, s, { reason: 'not-running', changed: false }, 'a success before the start', { id });
        await judged(ctx.exec, task.id, start(100), { reason: 'started' }, 'the start');
        // Redelivered as a retry is: signed again, with a fresh timestamp.
        await judged(ctx.exec, task.id, s, { reason: 'succeeded', changed: true, duplicateCallback: false }, 'the redelivered success',
          { id, timestamp: nowSeconds(1) });
        await judged(ctx.exec, task.id, fail(400, 'x', false), { reason: 'callback-conflict' }, 'now the id is remembered', { id });
      },
    },
    {
      name: 'the same event: bodies that parse to equal events (key order, spacing, 1 vs 1.0, unknown fields) are one; any differing field is another',
      async run(ctx) {
        const task = await runningTask(ctx);
        const id = uid('cb');
        await judged(ctx.exec, task.id, progress(200, 10, 'c-10'), { reason: 'progress' }, 'the first delivery', { id });
        const bodies = [
          `{"cursor":"c-10","progress":10,"atMs":200,"type":"progress","taskId":${JSON.stringify(task.id)}}`,
          `{ "taskId" : ${JSON.stringify(task.id)} , "type":"progress", "atMs":200.0, "progress":1e1, "cursor":"c\\u002d10" }`,
          `{"taskId":${JSON.stringify(task.id)},"type":"progress","atMs":200.00000000000001,"progress":10,"cursor":"c-10","note":"x"}`,
        ];
        for (const body of bodies) {
          const res = await ctx.exec.send(task.id, null, { id, body });
          assert.equal(res.status, 200, `redelivery ${body}: expected 200, got ${res.status}`);
          assertMatches(res.json, { reason: 'duplicate-callback', duplicateCallback: true, changed: false, version: 2 }, `redelivery ${body}`);
        }
        for (const other of [progress(201, 10, 'c-10'), progress(200, 11, 'c-10'), progress(200, 10, 'c-11')]) {
          await judged(ctx.exec, task.id, other, { reason: 'callback-conflict', changed: false, version: 2 }, `another event ${JSON.stringify(other)}`, { id });
        }
      },
    },
    {
      name: 'worker, cursor and error are free text and may be empty or blank (kept as sent); resultRef and resultHash may not (400)',
      async run(ctx) {
        const task = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 3 });
        await judged(ctx.exec, task.id, start(100, ''), { reason: 'started', version: 1 }, 'start with worker ""');
        assertMatches(await lastEntry(ctx.a, task.id), { event: { worker: '' } }, 'the start entry');
        await judged(ctx.exec, task.id, progress(200, 10, ' '), { reason: 'progress', version: 2 }, 'progress with cursor " "');
        assertMatches(await lastEntry(ctx.a, task.id), { event: { cursor: ' ' } }, 'the progress entry');
        await judged(ctx.exec, task.id, fail(300, '', true), { reason: 'requeued', version: 3 }, 'fail with error ""');
        assertMatches(await ctx.a.task(task.id), { error: '' }, 'the task keeps error ""');
        await judged(ctx.exec, task.id, start(400, '  '), { reason: 'started', version: 4 }, 'start with worker "  "');
        for (const [field, body] of [['resultRef', succeed(500, '', 'h')], ['resultHash', succeed(500, 'r', ' \t')]]) {
          assertError(await ctx.exec.send(task.id, body), 400, 'invalid-request', field);
        }
      },
    },
    {
      name: 'fields: a start keeps error; a retryable fail requeues with progress 0; a final fail keeps progress and sets error; a success clears error',
      async run(ctx) {
        const task = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 2 });
        await ctx.exec.drive(task.id, [start(100), progress(200, 40)]);
        await ctx.exec.drive(task.id, [fail(300, 'quota', true)]);
        assertMatches(await ctx.a.task(task.id), { state: 'queued', progress: 0, error: 'quota', attempts: 1 }, 'after a retryable fail');
        await ctx.exec.drive(task.id, [start(400), progress(500, 30)]);
        assertMatches(await ctx.a.task(task.id), { state: 'running', progress: 30, error: 'quota', attempts: 2 }, 'the next attempt keeps error');
        await ctx.exec.drive(task.id, [fail(600, 'final', true)]);
        assertMatches(await ctx.a.task(task.id), { state: 'failed', progress: 30, error: 'final' }, 'a fail with no attempts left');
        const other = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 2 });
        await ctx.exec.drive(other.id, [start(100), fail(200, 'quota', true), start(300), progress(400, 60)]);
        await ctx.exec.drive(other.id, [succeed(500, 'blob://f', 'sha256:f')]);
        assertMatches(await ctx.a.task(other.id), { state: 'succeeded', progress: 100, error: null }, 'a success');
      },
    },
  ],
};

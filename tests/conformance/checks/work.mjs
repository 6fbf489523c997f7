// PROTOCOL.md §Workers › Claim work: a worker asks the backend for
// queued tasks of its kinds (POST /v1/work/claim, signed with its
// tenant's callback secret, the tenant named in `taskwire-tenant`).
//
// Required: a backend that offers no workers is run with --no-workers,
// which skips this group; a 404 on the route is a failure otherwise.
// Every check claims only kinds of its own (`uid('k')`), so that checks
// running at once, or a suite against another instance on the same
// database, never take each other's tasks; none claims the kind `""`
// (every task created without a kind, the other checks' too).
//
// Readings: the order is the time a task was queued (created, or
// re-queued by a retryable fail or a decision), so a task re-queued
// after another was created comes after it. A claim item is compared
// with GET of its task as JSON values, without `lease`.

import assert from 'node:assert/strict';
import { assertError, assertMatches } from '../lib/match.mjs';
import { assertClaimResponse, uid } from '../lib/client.mjs';
import { nowSeconds } from '../lib/sign.mjs';
import { sleep } from '../lib/scenarios.mjs';

const HOUR = 3_600_000;
/** How far the suite's clock and the backend's may disagree. */
const CLOCK_SLACK_MS = 2000;
/** How soon a held claim must answer once work is queued ("promptly", as a held long-poll). */
const WAKE_MS = 2000;
/** How long after waitMs an empty answer may come (as a long-poll's caught-up). */
const SLACK_MS = 5000;
/** A worker's event of `attempt`, on the server's clock. */
const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), attempt, ...extra });

const kind = () => uid('k');
const ids = (answer) => answer.tasks.map((t) => t.id);

/** Creates a task of `k` (one at a time: their order is the queue's). */
const createOf = (a, k, extra = {}) => a.createTask({ ttlMs: HOUR, maxAttempts: 2, kind: k, ...extra });

/** Asserts the task is still queued at `version`: nothing claimed it. */
async function stillQueued(a, id, version, what) {
  assertMatches(await a.task(id), { state: 'queued', version }, `${what}: the task must still be queued, unclaimed`);
}

export default {
  section: 'Workers: claim work',
  protocol: 'Workers › Claim work',
  checks: [
    {
      name: 'a claim takes the oldest queued tasks of its kinds, at most max, in queue order; other kinds and running tasks are left',
      needsWorkers: true,
      async run({ a, worker }) {
        const [k1, k2] = [kind(), kind()];
        const t1 = await createOf(a, k1);
        const t2 = await createOf(a, k2);
        const t3 = await createOf(a, k1);
        const t4 = await createOf(a, k1);
        const first = await worker.claim({ worker: 'w1', kinds: [k1], max: 2 });
        assert.deepEqual(ids(first), [t1.id, t3.id], 'max 2 of its kind: the two oldest, oldest first');
        await stillQueued(a, t2.id, 0, 'a task of a kind the claim did not name');
        const second = await worker.claim({ worker: 'w2', kinds: [k2, k1], max: 5 });
        assert.deepEqual(ids(second), [t2.id, t4.id], 'both kinds: every queued task, oldest first (across kinds)');
        const third = await worker.claim({ worker: 'w3', kinds: [k1, k2], max: 5 });
        assert.deepEqual(ids(third), [], 'every task is running: a task is claimed once per attempt');
        // `max` defaults to 1.
        const t5 = await createOf(a, k1);
        await createOf(a, k1);
        assert.deepEqual(ids(await worker.claim({ worker: 'w4', kinds: [k1] })), [t5.id], 'max defaults to 1');
      },
    },
    {
      name: 'a claim naming its workflowVersions takes tasks planned for those and tasks without a plan; one planned for another version is left, and does not hold back the rest',
      // Misreadings caught: new code taking over a task planned for older
      // code (PROTOCOL.md §Steps: the plan is fixed for the task's life),
      // or a skipped older task filling the claim's window so that the
      // new code's own tasks behind it are never claimed.
      needsWorkers: true,
      async run({ a, worker }) {
        const k = kind();
        const plan = (version) => ({ workflowVersion: version, steps: ['a', 'b'] });
        const old = await createOf(a, k, plan('v1'));
        const mine = await createOf(a, k, plan('v2'));
        const bare = await createOf(a, k);
        const first = await worker.claim({ worker: 'w-new', kinds: [k], max: 1, workflowVersions: ['v2', 'v3'] });
        assert.deepEqual(ids(first), [mine.id], 'max 1: its own task, though the older v1 task is first in the queue');
        const second = await worker.claim({ worker: 'w-new', kinds: [k], max: 5, workflowVersions: ['v2'] });
        assert.deepEqual(ids(second), [bare.id], 'a task without a plan is anyone\'s');
        await stillQueued(a, old.id, 0, 'a task planned for v1, after claims of v2 code');
        const third = await worker.claim({ worker: 'w-old', kinds: [k], max: 5, workflowVersions: ['v1'] });
        assert.deepEqual(ids(third), [old.id], 'a worker of its own version takes it');
      },
    },
    {
      name: 'each claimed task is as GET shows it, plus its lease (attempt = attempts, leaseMs, on the server clock); nowMs is the server clock; followers see the start with the worker',
      needsWorkers: true,
      async run({ a, worker, exec }) {
        const k = kind();
        const input = { doc: 'a claimed document', n: 7 };
        const task = await createOf(a, k, { input });
        const sent = Date.now();
        const answer = await worker.claim({ worker: 'gpu-7', kinds: [k], leaseMs: 45_000 });
        const answered = Date.now();
        assert.equal(answer.tasks.length, 1, `expected the one task of kind ${k}`);
        const item = answer.tasks[0];
        assert.ok(answer.nowMs >= sent - CLOCK_SLACK_MS && answer.nowMs <= answered + CLOCK_SLACK_MS, `nowMs (${answer.nowMs}) must be the server's clock (the suite's: ${sent}..${answered})`);
        assertMatches(item, { id: task.id, state: 'running', attempts: 1, version: 1, kind: k, input }, 'the claimed task');
        assertMatches(item.lease, { attempt: item.attempts, leaseMs: 45_000 }, 'its lease');
        const left = item.lease.expiresAtMs - answer.nowMs;
        assert.ok(left <= 45_000 + 1000 && left >= 45_000 - CLOCK_SLACK_MS, `lease.expiresAtMs must be leaseMs after the claim on the server's clock: ${left} ms after nowMs`);
        const { lease, ...shown } = item;
        assert.deepEqual(shown, await a.task(task.id), 'a claim item, without its lease, is the task as GET shows it');
        const history = await a.answer(task.id, 0, { mode: 'delta', task: { state: 'running', version: 1 } });
        assertMatches(history.events, [{ version: 1, event: { type: 'start', worker: 'gpu-7', attempt: 1, leaseMs: 45_000 } }], 'what the claim recorded');
        const at = history.events[0].event.atMs;
        assert.ok(at >= sent - CLOCK_SLACK_MS && at <= answered + CLOCK_SLACK_MS, `the start's atMs (${at}) is the server's clock at the claim`);
        // The worker reports through callbacks, with the attempt it was given.
        assertMatches(await exec.apply(task.id, ev('progress', item.attempts, { progress: 10, cursor: 'c10' })), { changed: true, reason: 'progress', next: 'continue', attempt: 1 }, "the worker's first report");
      },
    },
    {
      name: 'a task re-queued (a retryable fail, a decision) is claimed as its next attempt, after the tasks queued before it, with its error or decision',
      needsWorkers: true,
      async run({ a, worker, exec }) {
        const k = kind();
        const retried = await createOf(a, k);
        assert.deepEqual(ids(await worker.claim({ worker: 'w1', kinds: [k] })), [retried.id]);
        const waiting = await createOf(a, k);
        // Re-queued after `waiting` was created: it comes after it.
        assertMatches(await exec.apply(retried.id, ev('fail', 1, { error: 'vendor timeout', retryable: true })), { state: 'queued', next: 'stop' }, 'a retryable fail');
        const again = await worker.claim({ worker: 'w2', kinds: [k], max: 5 });
        assert.deepEqual(ids(again), [waiting.id, retried.id], 'oldest in the queue first: the re-queued task was queued last');
        assertMatches(again.tasks[1], { state: 'running', attempts: 2, error: 'vendor timeout', lease: { attempt: 2 } }, 'the re-queued task, as its second attempt');
        const stale = await exec.apply(retried.id, ev('heartbeat', 1));
        assertMatches(stale, { changed: false, reason: 'stale-attempt', next: 'stop', attempt: 2 }, "the first attempt's worker");

        const k2 = kind();
        const held = await createOf(a, k2, { maxAttempts: 1 });
        await worker.claim({ worker: 'w3', kinds: [k2] });
        await exec.drive(held.id, [ev('hold', 1, { artifactRef: 'blob://draft-1', artifactHash: 'sha256:d1' })]);
        const decided = await a.acted(held.id, 'decisions', { decision: 'request_changes', artifactHash: 'sha256:d1', version: 2, reason: 'shorter' });
        assertMatches(decided, { changed: true, task: { state: 'queued' } }, 'request_changes');
        const revision = await worker.claim({ worker: 'w4', kinds: [k2] });
        assertMatches(revision.tasks, [{
          id: held.id,
          state: 'running',
          attempts: 2,
          decision: 'request_changes',
          decisionReason: 'shorter',
          artifactRef: 'blob://draft-1',
          artifactHash: 'sha256:d1',
          lease: { attempt: 2 },
        }], 'the task re-queued by a decision carries it and the artifact it was made on');
      },
    },
    {
      name: 'a held claim is answered as soon as a task of its kinds is created (not for another kind), or re-queued',
      needsWorkers: true,
      async run({ a, worker, exec }) {
        const [k, other] = [kind(), kind()];
        const holding = worker.claim({ worker: 'w1', kinds: [k], waitMs: 10_000 });
        await sleep(300);
        await createOf(a, other);
        await sleep(300);
        const created = Date.now();
        const task = await createOf(a, k);
        const answer = await holding;
        const woke = Date.now() - created;
        assert.deepEqual(ids(answer), [task.id], 'the held claim takes the task of its kind, and no other');
        assert.ok(woke < WAKE_MS, `the held claim answered ${woke} ms after the create (at most ${WAKE_MS})`);

        // Re-queued by a retryable fail: the same wake.
        const holdingAgain = worker.claim({ worker: 'w2', kinds: [k], waitMs: 10_000 });
        await sleep(300);
        const failed = Date.now();
        await exec.drive(task.id, [ev('fail', 1, { error: 'again', retryable: true })]);
        const again = await holdingAgain;
        const wokeAgain = Date.now() - failed;
        assertMatches(again.tasks, [{ id: task.id, attempts: 2, lease: { attempt: 2 } }], 'the held claim takes the re-queued task');
        assert.ok(wokeAgain < WAKE_MS, `the held claim answered ${wokeAgain} ms after the re-queue (at most ${WAKE_MS})`);
      },
    },
    {
      name: 'with no work: an empty answer after waitMs, not before; at once with waitMs 0 (the default)',
      needsWorkers: true,
      async run({ worker }) {
        const k = kind();
        const waitMs = 1500;
        const started = Date.now();
        const answer = await worker.claim({ worker: 'w', kinds: [k], waitMs });
        const took = Date.now() - started;
        assert.deepEqual(answer.tasks, [], 'nothing to claim');
        assert.ok(took >= waitMs - 50, `a claim with waitMs ${waitMs} answered empty after ${took} ms: it is held while there is no work`);
        assert.ok(took <= waitMs + SLACK_MS, `a claim with waitMs ${waitMs} answered after ${took} ms, long after waitMs`);
        for (const body of [{ worker: 'w', kinds: [k] }, { worker: 'w', kinds: [k], waitMs: 0 }]) {
          const t0 = Date.now();
          assert.deepEqual((await worker.claim(body)).tasks, [], 'nothing to claim');
          const at = Date.now() - t0;
          assert.ok(at <= SLACK_MS, `${JSON.stringify(body)}: answered after ${at} ms; a claim without waitMs is not held`);
        }
      },
    },
    {
      name: 'the same signed bytes twice: 409 claim-replayed, and the second claims nothing; signed anew it claims',
      needsWorkers: true,
      async run({ a, worker }) {
        const k = kind();
        const [t1, t2] = [await createOf(a, k), await createOf(a, k)];
        const once = { id: uid('clm'), timestamp: nowSeconds() };
        const body = { worker: 'w', kinds: [k], max: 1 };
        const first = await worker.send(body, once);
        assert.deepEqual(ids(assertClaimResponse(first, 'the first claim')), [t1.id]);
        assertError(await worker.send(body, once), 409, 'claim-replayed');
        await stillQueued(a, t2.id, 0, 'after the replayed claim');
        // A claim that took nothing is used once too.
        const empty = { worker: 'w', kinds: [kind()] };
        const seen = { id: uid('clm'), timestamp: nowSeconds() };
        assertClaimResponse(await worker.send(empty, seen), 'a claim that found nothing');
        assertError(await worker.send(empty, seen), 409, 'claim-replayed');
        assert.deepEqual(ids(await worker.claim(body)), [t2.id], 'the same claim signed again (a new webhook-id)');
      },
    },
    {
      name: 'a malformed claim is 400 naming the field (claim.worker, claim.kinds, claim.max, claim.waitMs, claim.leaseMs, claim.workflowVersions) and claims nothing; the bounds are allowed',
      needsWorkers: true,
      async run({ a, worker }) {
        const k = kind();
        const task = await createOf(a, k);
        const ok = { worker: 'w', kinds: [k] };
        const cases = [
          [{ kinds: [k] }, 'claim.worker'],
          [{ ...ok, worker: '' }, 'claim.worker'],
          [{ ...ok, worker: '   ' }, 'claim.worker'],
          [{ ...ok, worker: 'w'.repeat(256) }, 'claim.worker'],
          [{ ...ok, worker: 7 }, 'claim.worker'],
          [{ worker: 'w' }, 'claim.kinds'],
          [{ ...ok, kinds: [] }, 'claim.kinds'],
          [{ ...ok, kinds: k }, 'claim.kinds'],
          [{ ...ok, kinds: [k, 5] }, 'claim.kinds'],
          [{ ...ok, kinds: [k, 'x'.repeat(65)] }, 'claim.kinds'],
          [{ ...ok, kinds: [k, ...Array.from({ length: 32 }, (_, i) => `k${i}`)] }, 'claim.kinds'],
          [{ ...ok, max: 0 }, 'claim.max'],
          [{ ...ok, max: 101 }, 'claim.max'],
          [{ ...ok, max: 1.5 }, 'claim.max'],
          [{ ...ok, max: '2' }, 'claim.max'],
          [{ ...ok, waitMs: -1 }, 'claim.waitMs'],
          [{ ...ok, waitMs: 30_001 }, 'claim.waitMs'],
          [{ ...ok, waitMs: 'soon' }, 'claim.waitMs'],
          [{ ...ok, leaseMs: 999 }, 'claim.leaseMs'],
          [{ ...ok, leaseMs: 3_600_001 }, 'claim.leaseMs'],
          [{ ...ok, leaseMs: '30000' }, 'claim.leaseMs'],
          [{ ...ok, workflowVersions: 'v1' }, 'claim.workflowVersions'],
          [{ ...ok, workflowVersions: [' '] }, 'claim.workflowVersions[0]'],
          [{ ...ok, workflowVersions: Array.from({ length: 17 }, (_, i) => `v${i}`) }, 'claim.workflowVersions'],
        ];
        for (const [body, field] of cases) {
          assertError(await worker.send(body), 400, 'invalid-request', field);
        }
        for (const text of ['{"worker":', '[1]', '"w"']) {
          assertError(await worker.send(text), 400, 'invalid-request');
        }
        await stillQueued(a, task.id, 0, 'after the malformed claims');
        // The bounds, each on kinds of their own (nothing to take).
        const longest = `${kind()}${'x'.repeat(64)}`.slice(0, 64);
        for (const body of [
          { worker: 'w'.repeat(255), kinds: [longest], max: 100, waitMs: 0, leaseMs: 1000 },
          { worker: 'w', kinds: Array.from({ length: 32 }, () => kind()), max: 1, leaseMs: 3_600_000 },
        ]) {
          assert.deepEqual((await worker.claim(body)).tasks, [], 'a claim at the bounds (nothing of its kinds queued)');
        }
        assert.deepEqual(ids(await worker.claim({ ...ok, leaseMs: 1000, max: 100 })), [task.id]);
      },
    },
    {
      name: "a claim not signed with the tenant's secret is 401 (another secret, an unknown tenant, a bearer token, a stale timestamp) and claims nothing",
      needsWorkers: true,
      async run({ a, worker, config }) {
        const k = kind();
        const task = await createOf(a, k);
        const body = { worker: 'w', kinds: [k] };
        const other = `whsec_${Buffer.from(uid('secret')).toString('base64')}`;
        const cases = [
          ['another secret', worker.send(body, { secret: other }), 'webhook-signature'],
          ['a tenant the backend does not know', worker.send(body, { tenant: uid('nobody') })],
          ['a stale webhook-timestamp', worker.send(body, { timestamp: nowSeconds(-600) }), 'webhook-timestamp'],
          [
            "tenant A's bearer token instead of a signature",
            worker.http.request('POST', '/v1/work/claim', { json: body, headers: { 'taskwire-tenant': config.tenant }, token: config.token }),
          ],
          ['no webhook-signature', worker.send(body, { headers: { 'webhook-signature': undefined } }), 'webhook-signature'],
        ];
        if (config.secretB) cases.push(["tenant B's secret", worker.send(body, { secret: config.secretB }), 'webhook-signature']);
        // With a secret per tenant, A's own secret signs no claim of the
        // shared fleet (one without taskwire-tenant).
        if (config.secretB) cases.push(["A's secret without taskwire-tenant", worker.send(body, { tenant: null })]);
        for (const [what, pending, field] of cases) {
          const res = await pending;
          try {
            assertError(res, 401, 'unauthorized', field);
          } catch (err) {
            err.message = `${what}: ${err.message}`;
            throw err;
          }
        }
        await stillQueued(a, task.id, 0, 'after the refused claims');
        assert.deepEqual(ids(await worker.claim(body)), [task.id], 'the same claim, signed by the tenant');
      },
    },
    {
      name: "a claim takes its own tenant's tasks only",
      needsWorkers: true,
      needsTokenB: true,
      async run({ a, b, worker }) {
        const k = kind();
        const theirs = await b.createTask({ ttlMs: HOUR, maxAttempts: 1, kind: k });
        const mine = await createOf(a, k);
        assert.deepEqual(ids(await worker.claim({ worker: 'w', kinds: [k], max: 5 })), [mine.id], "tenant A's claim");
        assertMatches(await b.task(theirs.id), { state: 'queued', version: 0 }, "tenant B's task of the same kind");
      },
    },
    {
      name: "the shared fleet (a claim without taskwire-tenant, signed with the shared secret) takes every tenant's first task before anyone's second",
      needsWorkers: true,
      needsTokenB: true,
      needsSharedSecret: true,
      async run({ a, b, worker }) {
        const k = kind();
        const a1 = await createOf(a, k);
        const a2 = await createOf(a, k);
        const b1 = await b.createTask({ ttlMs: HOUR, maxAttempts: 1, kind: k });
        const fair = await worker.claim({ worker: 'w', kinds: [k], max: 2 }, { tenant: null });
        assert.deepEqual(new Set(ids(fair)), new Set([a1.id, b1.id]), "A's backlog (a1, a2) must not come before B's first task");
        assert.deepEqual(ids(await worker.claim({ worker: 'w', kinds: [k], max: 2 }, { tenant: null })), [a2.id], 'then the rest');
      },
    },
  ],
};

// Budgets and side effects over HTTP (issue 26): a budget given at
// create; `reserve` before a paid call, granted only within the budget,
// and `settle` after it; a new attempt charging the open reservations of
// the one before in full; `effect` recording an external write once under
// (step, action), its answer naming the resource id recorded first; and
// `exhaust` ending the task failed with its partial result. The vectors
// `budget-01` and `effects-01` pin the rules in core; these check a
// backend passes the budget through at create, stores the ledger, shows
// it in the task and answers `resourceId`. Each names the misreading it
// catches.

import assert from 'node:assert/strict';
import { assertMatches } from '../lib/match.mjs';

const HOUR = 3_600_000;
const BUDGET = { maxTokens: 1000, maxCostCents: 50 };

const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), attempt, ...extra });
const startOf = (attempt) => ev('start', attempt, { worker: `w${attempt}`, leaseMs: 60_000 });
const reserveOf = (attempt, reservation, amount, extra = {}) => ev('reserve', attempt, { reservation, ...amount, ...extra });
const settleOf = (attempt, reservation, usage) => ev('settle', attempt, { reservation, ...usage });
const effectOf = (attempt, step, action, resourceId) => ev('effect', attempt, { step, action, resourceId });
/** `reserved` and `used` are absent (or null) while there is nothing to show. */
const nothing = (value) => value === undefined || value === null;

export default {
  section: 'Budgets and side effects',
  protocol: 'Lifecycle › Budgets and side effects',
  checks: [
    {
      name: 'a budget given at create is shown; a reserve within it is granted (budget-reserved, one version) and one past it is over-budget, changing nothing',
      // Misreadings caught: dropping the create's budget (every reserve
      // is then granted), or versioning a refused reservation.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, budget: BUDGET });
        assertMatches(task, { budget: BUDGET }, 'the created task');
        assert.ok(nothing(task.used) && nothing(task.reserved), `nothing used or reserved yet: ${JSON.stringify(task)}`);
        await exec.drive(task.id, [startOf(1)]);
        const granted = await exec.apply(task.id, reserveOf(1, '1:draft', { tokens: 600, costCents: 20 }));
        assertMatches(granted, { changed: true, duplicate: false, reason: 'budget-reserved', version: 2 }, 'a reserve within the budget');
        const again = await exec.apply(task.id, reserveOf(1, '1:draft', { tokens: 600, costCents: 20 }));
        assertMatches(again, { changed: false, duplicate: true, reason: 'duplicate-reservation', version: 2 }, 'the same reserve again');
        const over = await exec.apply(task.id, reserveOf(1, '1:polish', { tokens: 500, costCents: 0 }));
        assertMatches(over, { changed: false, duplicate: false, reason: 'over-budget', version: 2 }, 'a reserve past the budget');
        assertMatches(
          await a.task(task.id),
          { version: 2, budget: BUDGET, reserved: { tokens: 600, costCents: 20 }, reservations: [{ id: '1:draft', attempt: 1, tokens: 600, costCents: 20, settled: null }] },
          'the task after the refusal',
        );
      },
    },
    {
      name: 'settle records what the call used and releases the rest; a new attempt charges the open reservation of the one before in full',
      // Misreadings caught: keeping a settled reservation's estimate
      // reserved (the budget shrinks with every call), or forgetting a
      // dead attempt's open reservation, so each retry spends afresh.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, budget: BUDGET });
        await exec.drive(task.id, [startOf(1), reserveOf(1, '1:draft', { tokens: 600, costCents: 20 })]);
        const settled = await exec.apply(task.id, settleOf(1, '1:draft', { tokens: 400, costCents: 15, toolCalls: 2 }));
        assertMatches(settled, { changed: true, reason: 'budget-settled', version: 3 }, 'the settle');
        const after = await a.task(task.id);
        assertMatches(after, { used: { tokens: 400, costCents: 15, toolCalls: 2 }, reservations: [{ id: '1:draft', settled: { tokens: 400, costCents: 15, toolCalls: 2 } }] }, 'the task after the settle');
        assert.ok(nothing(after.reserved), `the rest is released: reserved ${JSON.stringify(after.reserved)}`);
        // Attempt 1 reserves again and dies before settling.
        await exec.drive(task.id, [reserveOf(1, '1:polish', { tokens: 500, costCents: 30 }), ev('fail', 1, { error: 'model timeout', retryable: true })]);
        assertMatches(await a.task(task.id), { state: 'queued', reserved: { tokens: 500, costCents: 30 } }, 'the open reservation outlives its attempt');
        await exec.drive(task.id, [startOf(2)]);
        const charged = await a.task(task.id);
        assertMatches(
          charged,
          { attempts: 2, used: { tokens: 900, costCents: 45, toolCalls: 2 }, reservations: [{ id: '1:draft' }, { id: '1:polish', settled: { tokens: 500, costCents: 30, toolCalls: 0 } }] },
          'after attempt 2 started',
        );
        assert.ok(nothing(charged.reserved), `charged, not reserved: ${JSON.stringify(charged.reserved)}`);
        // 45 of 50 cents spent: 6 more do not fit, 5 do.
        assertMatches(await exec.apply(task.id, reserveOf(2, '2:draft', { tokens: 10, costCents: 6 })), { changed: false, reason: 'over-budget' }, 'what is left of the budget');
        assertMatches(await exec.apply(task.id, reserveOf(2, '2:draft', { tokens: 10, costCents: 5 })), { changed: true, reason: 'budget-reserved' }, 'within what is left');
      },
    },
    {
      name: 'an effect is recorded once under (step, action): a second write is duplicate-effect and its answer names the FIRST resourceId, in a new attempt too',
      // Misreadings caught: recording a second resource for the same key
      // (two tickets, two charges), or answering the id sent instead of
      // the one recorded, so the worker goes on with a resource nobody keeps.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2 });
        await exec.drive(task.id, [startOf(1)]);
        const first = await exec.apply(task.id, effectOf(1, 'publish', 'ticket', 'T-1'));
        assertMatches(first, { changed: true, duplicate: false, reason: 'effect-recorded', resourceId: 'T-1', version: 2 }, 'the first write');
        const second = await exec.apply(task.id, effectOf(1, 'publish', 'ticket', 'T-2'));
        assertMatches(second, { changed: false, duplicate: true, reason: 'duplicate-effect', resourceId: 'T-1', version: 2 }, 'a second write under the same key');
        await exec.drive(task.id, [ev('fail', 1, { error: 'crashed', retryable: true }), startOf(2)]);
        const later = await exec.apply(task.id, effectOf(2, 'publish', 'ticket', 'T-3'));
        assertMatches(later, { changed: false, duplicate: true, reason: 'duplicate-effect', resourceId: 'T-1' }, "attempt 2's write");
        const other = await exec.apply(task.id, effectOf(2, 'publish', 'mail', 'M-1'));
        assertMatches(other, { changed: true, reason: 'effect-recorded', resourceId: 'M-1' }, 'another action of the step');
        assertMatches(
          await a.task(task.id),
          { effects: [{ step: 'publish', action: 'ticket', resourceId: 'T-1', attempt: 1 }, { step: 'publish', action: 'mail', resourceId: 'M-1', attempt: 2 }] },
          'the task',
        );
        const plain = await exec.apply(task.id, ev('heartbeat', 2));
        assert.equal('resourceId' in plain, false, `only an effect's answer names a resourceId: ${JSON.stringify(plain)}`);
      },
    },
    {
      name: 'exhaust ends the task failed with the error budget-exhausted, keeping the partial result; it is not retried',
      // Misreadings caught: requeueing an exhausted task (it would spend
      // again), or dropping the partial result the executor kept.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 3, budget: { maxTokens: 100 } });
        await exec.drive(task.id, [startOf(1), reserveOf(1, '1:draft', { tokens: 100 })]);
        assertMatches(await exec.apply(task.id, reserveOf(1, '1:more', { tokens: 1 })), { changed: false, reason: 'over-budget' }, 'the budget is spent');
        const ended = await exec.apply(task.id, ev('exhaust', 1, { resultRef: 'blob://partial', resultHash: 'sha256:partial' }));
        assertMatches(ended, { changed: true, reason: 'budget-exhausted', state: 'failed' }, 'the exhaust');
        assertMatches(await a.task(task.id), { state: 'failed', error: 'budget-exhausted', resultRef: 'blob://partial', resultHash: 'sha256:partial', attempts: 1 }, 'the task');
      },
    },
  ],
};

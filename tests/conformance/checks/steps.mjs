// PROTOCOL.md §Lifecycle › Steps over HTTP (issue 26): a plan given at
// create, fixed for the task's life; step reports through callbacks,
// versioned, idempotent and never going back; progress that follows the
// finished steps and holds across a retry; a second claim that carries
// the first attempt's checkpoints; a task with a plan followed by
// snapshots. The vectors `steps-01` … `steps-04` pin the rules in core;
// these check a backend parses, stores and shows them. Each names the
// misreading it catches.

import assert from 'node:assert/strict';
import { assertError, assertMatches } from '../lib/match.mjs';

const HOUR = 3_600_000;
const PLAN = { workflowVersion: '2026-09-17.1', steps: ['load', 'classify', 'publish'] };

const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), attempt, ...extra });
const startOf = (attempt, extra = {}) => ev('start', attempt, { worker: `w${attempt}`, leaseMs: 60_000, ...extra });
const stepOf = (attempt, name, status, extra = {}) => ev('step', attempt, { name, status, ...extra });
const checkpoint = (name, hash = name) => ({ outputRef: `blob://ck/${name}`, outputHash: `sha256:${hash}` });
let kinds = 0;
const kind = () => `steps-${process.pid}-${Date.now()}-${kinds++}`;

export default {
  section: 'Steps',
  protocol: 'Lifecycle › Steps',
  checks: [
    {
      name: 'a plan given at create is shown with every step pending and is fixed: a start naming another plan is plan-conflict; a task without one has no steps',
      // Misreadings caught: dropping the create's plan, letting a worker
      // with newer code replace it at start, or adding empty `steps` to
      // every task (seed-000 answers must keep their shape).
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, ...PLAN });
        assertMatches(task, { workflowVersion: PLAN.workflowVersion, steps: PLAN.steps.map((name) => ({ name, status: 'pending' })) }, 'the created task');
        const newer = await exec.apply(task.id, startOf(1, { workflowVersion: '2026-09-18.1', steps: PLAN.steps }));
        assertMatches(newer, { changed: false, reason: 'plan-conflict', state: 'queued', version: 0 }, 'a start with another plan');
        assertMatches(await exec.apply(task.id, startOf(1, PLAN)), { changed: true, reason: 'started' }, 'a start with the same plan');
        const plain = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        assert.equal('steps' in plain || 'workflowVersion' in plain, false, `a task without a plan has no steps: ${JSON.stringify(plain)}`);
      },
    },
    {
      name: 'a plan is checked field by field at create: 400 naming body.steps[i] or body.workflowVersion',
      // Misreading caught: accepting a plan with a blank or repeated step,
      // which no report could then name unambiguously.
      async run({ a }) {
        const base = { ttlMs: HOUR, maxAttempts: 1 };
        assertError(await a.create({ ...base, workflowVersion: 'v', steps: ['a', 'a'] }), 400, 'invalid-request', 'body.steps[1]');
        assertError(await a.create({ ...base, steps: ['a'] }), 400, 'invalid-request', 'body.workflowVersion');
      },
    },
    {
      name: 'step reports: one version per change, the same report again duplicate-step, another checkpoint step-conflict, an unknown name unknown-step; progress follows the finished steps',
      // Misreadings caught: versioning a redelivered report, letting a
      // succeeded step take another output, or leaving the bar at 0 for
      // an executor that reports steps and no progress.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, ...PLAN });
        await exec.drive(task.id, [startOf(1), stepOf(1, 'load', 'running', { label: '1/3: loading' })]);
        const done = await exec.apply(task.id, stepOf(1, 'load', 'succeeded', checkpoint('load')));
        assertMatches(done, { changed: true, reason: 'step-recorded', version: 3 }, 'load succeeded');
        assertMatches(await exec.apply(task.id, stepOf(1, 'load', 'succeeded', checkpoint('load'))), { changed: false, duplicate: true, reason: 'duplicate-step', version: 3 }, 'the same report again');
        assertMatches(await exec.apply(task.id, stepOf(1, 'load', 'succeeded', checkpoint('load', 'other'))), { changed: false, reason: 'step-conflict' }, 'another checkpoint');
        assertMatches(await exec.apply(task.id, stepOf(1, 'load', 'running')), { changed: false, reason: 'step-conflict' }, 'a succeeded step never goes back');
        assertMatches(await exec.apply(task.id, stepOf(1, 'nope', 'running')), { changed: false, reason: 'unknown-step' }, 'a name the plan lacks');
        assertMatches(await a.task(task.id), { progress: 33, steps: [{ name: 'load', status: 'succeeded', attempt: 1, label: '1/3: loading', ...checkpoint('load') }, { status: 'pending' }, { status: 'pending' }] }, 'the task');
      },
    },
    {
      name: "after a retry the next claim carries the first attempt's checkpoints and progress keeps the finished steps' share; the old attempt's reports are stale",
      needsWorkers: true,
      // Misreadings caught: resetting progress to 0 on a retry of a task
      // whose steps stay finished, or a claim that hides the checkpoints,
      // so attempt 2 runs every step again.
      async run({ a, exec, worker }) {
        const k = kind();
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, kind: k, ...PLAN });
        const first = await worker.claim({ worker: 'w1', kinds: [k], leaseMs: 60_000 });
        assertMatches(first.tasks, [{ id: task.id, attempts: 1 }], 'the first claim');
        await exec.drive(task.id, [
          stepOf(1, 'load', 'succeeded', checkpoint('load')),
          stepOf(1, 'classify', 'succeeded', checkpoint('classify')),
          ev('fail', 1, { error: 'quota', retryable: true }),
        ]);
        assertMatches(await a.task(task.id), { state: 'queued', progress: 66 }, 'after the retryable failure');
        const second = await worker.claim({ worker: 'w2', kinds: [k], leaseMs: 60_000 });
        assertMatches(second.tasks, [{ id: task.id, attempts: 2, progress: 66, steps: [
          { name: 'load', status: 'succeeded', attempt: 1, ...checkpoint('load') },
          { name: 'classify', status: 'succeeded', attempt: 1, ...checkpoint('classify') },
          { name: 'publish', status: 'pending' },
        ] }], 'the second claim');
        assertMatches(await exec.apply(task.id, stepOf(1, 'publish', 'running')), { changed: false, reason: 'stale-attempt' }, "attempt 1's report");
        assertMatches(await exec.apply(task.id, stepOf(2, 'load', 'succeeded', checkpoint('load'))), { changed: false, reason: 'duplicate-step' }, 'attempt 2 repeating a finished step');
        await exec.drive(task.id, [stepOf(2, 'publish', 'succeeded', checkpoint('publish')), ev('succeed', 2, { resultRef: 'blob://r', resultHash: 'sha256:r' })]);
        assertMatches(await a.task(task.id), { state: 'succeeded', progress: 100 }, 'the task');
      },
    },
    {
      name: 'a task with a plan is resumed with a snapshot carrying its steps, where a task without one gets a delta',
      // Misreading caught: a delta with step events, which the browser
      // page's build cannot read (it follows such tasks by snapshots).
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 1, ...PLAN });
        await exec.drive(task.id, [startOf(1), stepOf(1, 'load', 'succeeded', checkpoint('load'))]);
        const answer = await a.answer(task.id, 0);
        assertMatches(answer, { mode: 'snapshot', task: { version: 2, steps: [{ name: 'load', status: 'succeeded' }, {}, {}] } }, 'resume from 0');
        const plain = await a.createTask({ ttlMs: HOUR, maxAttempts: 1 });
        await exec.drive(plain.id, [startOf(1)]);
        assertMatches(await a.answer(plain.id, 0), { mode: 'delta' }, 'a task without a plan');
      },
    },
  ],
};

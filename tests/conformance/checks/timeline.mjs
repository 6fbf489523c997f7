// The timeline (issue 26, PROTOCOL.md §Timeline): GET
// /v1/tasks/{id}/timeline answers the task's whole history as a person
// reads it, each change named by what the state machine judged it to
// be, and for a cancelled task what the cancel did. Core writes the
// answer (`timeline_answer`); these check a backend serves it for the
// caller's task only, from the whole history (not the resume window).

import assert from 'node:assert/strict';
import { assertMatches } from '../lib/match.mjs';

const HOUR = 3_600_000;
const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), attempt, ...extra });
const step = (attempt, name, status, extra = {}) => ev('step', attempt, { name, status, ...extra });

export default {
  section: 'Timeline',
  protocol: 'Lifecycle › Timeline',
  checks: [
    {
      name: 'every change of a long history is one entry, named as judged, with its step, attempt and usage; a cancelled task carries its cancel report',
      // Misreadings caught: a timeline built from the resume window (the
      // first versions missing), a fail read as a failure although it
      // re-queued, or a cancel report typed in instead of derived.
      async run({ a, exec }) {
        const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 2, workflowVersion: 'v1', steps: ['draft', 'publish', 'notify'] });
        await exec.drive(task.id, [
          ev('start', 1, { worker: 'w1', leaseMs: 60_000 }),
          ev('reserve', 1, { reservation: '1:draft', step: 'draft', tokens: 300 }),
          ev('settle', 1, { reservation: '1:draft', tokens: 120, costCents: 2, toolCalls: 1 }),
          step(1, 'draft', 'succeeded', { outputRef: 'blob://draft', outputHash: 'sha256:d' }),
          ev('fail', 1, { error: 'vendor 503', retryable: true }),
          ev('start', 2, { worker: 'w2', leaseMs: 60_000 }),
          step(2, 'publish', 'running'),
          ev('effect', 2, { step: 'publish', action: 'post', resourceId: 'REP-1' }),
          ...Array.from({ length: 10 }, (_, i) => ev('progress', 2, { progress: 40 + i, cursor: '' })),
        ]);
        await a.acted(task.id, 'cancel', {});
        await exec.drive(task.id, [ev('ack_cancel', 2)]);
        const res = await a.http.request('GET', `/v1/tasks/${encodeURIComponent(task.id)}/timeline`);
        assert.equal(res.status, 200, `GET timeline: expected 200, got ${res.status} ${JSON.stringify(res.json)}`);
        const kinds = res.json.entries.map((e) => e.kind);
        assert.deepEqual(kinds, [
          'attempt.started', 'budget.reserved', 'model.completed', 'step.completed', 'retry.scheduled',
          'attempt.started', 'step.started', 'side_effect.completed', ...Array(10).fill('progress'),
          'cancel.requested', 'job.cancelled',
        ]);
        assert.deepEqual(res.json.entries.map((e) => e.version), kinds.map((_, i) => i + 1), 'one entry per version, from 1');
        assertMatches(res.json.entries.slice(0, 8), [
          { attempt: 1 }, { step: 'draft', detail: '1:draft' }, { usage: { tokens: 120, costCents: 2, toolCalls: 1 }, detail: '1:draft' },
          { step: 'draft' }, { detail: 'vendor 503', attempt: 1 }, { attempt: 2 }, { step: 'publish', attempt: 2 }, { detail: 'REP-1' },
        ], 'the first eight entries');
        assertMatches(res.json, {
          taskId: task.id, state: 'cancelled', version: kinds.length,
          cancelReport: {
            finished: ['draft'], interrupted: ['publish'], notRun: ['notify'],
            effects: [{ step: 'publish', action: 'post', resourceId: 'REP-1', attempt: 2 }],
            kept: [{ step: 'draft', outputRef: 'blob://draft', outputHash: 'sha256:d' }],
          },
        }, 'the timeline');
      },
    },
    {
      name: "another tenant's task and an unknown one are 404, a call without a token 401",
      async run({ a, b }) {
        const task = await a.createTask();
        const path = `/v1/tasks/${encodeURIComponent(task.id)}/timeline`;
        assert.equal((await b.http.request('GET', path)).status, 404, "another tenant's task");
        assert.equal((await a.http.request('GET', '/v1/tasks/no-such-task/timeline')).status, 404, 'an unknown task');
        const plain = await a.http.request('GET', path, { token: null });
        assert.equal(plain.status, 401, 'without a token');
      },
    },
  ],
};

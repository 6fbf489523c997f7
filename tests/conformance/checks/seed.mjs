// The seed's long-document summary (tests/vectors/seed-a-summary-timeline.json)
// played over HTTP.

import assert from 'node:assert/strict';
import { assertMatches, isCounter } from '../lib/match.mjs';
import { progress, start, succeed } from '../lib/events.mjs';

const FIVE_MINUTES = 5 * 60_000;
const REF = 'blob://summaries/doc-1';
const HASH = 'sha256:ab12';

const TIMELINE = [
  ['cb-1', start(1200, 'summarizer-1'), { reason: 'started', version: 1, state: 'running' }],
  ['cb-2', progress(6400, 25), { reason: 'progress', version: 2, state: 'running' }],
  ['cb-3', progress(13100, 55), { reason: 'progress', version: 3, state: 'running' }],
  ['cb-4', progress(20700, 82), { reason: 'progress', version: 4, state: 'running' }],
  ['cb-5', succeed(24300, REF, HASH), { reason: 'succeeded', version: 5, state: 'succeeded', notify: true }],
];

export default {
  section: 'Seed: the summary timeline',
  protocol: 'Resume',
  checks: [
    {
      name: 'create, signed callbacks to version 5, resume from 3, duplicates, one notification',
      async run({ a, exec, feedStart }) {
        const input = { doc: 'A long document to summarize.' };
        const before = Date.now();
        const created = await a.createTask({ ttlMs: 3_600_000, maxAttempts: 3, kind: 'summary', input });
        assertMatches(
          created,
          { state: 'queued', attempts: 0, maxAttempts: 3, progress: 0, version: 0, kind: 'summary', input },
          'created task',
        );
        const expected = before + 3_600_000;
        assert.ok(
          Math.abs(created.expiresAtMs - expected) < FIVE_MINUTES,
          `expiresAtMs (${created.expiresAtMs}) should be creation time + ttlMs on the server's clock (≈ ${expected})`,
        );
        const id = created.id;

        for (const [cb, event, outcome] of TIMELINE) {
          // Ids of this task's own (`{taskId}:cb-n`): a tenant's callback id is
          // refused on its other tasks, so fixed ids would fail a second run.
          const t = await exec.apply(id, event, { id: `${id}:${cb}` });
          assertMatches(
            t,
            { changed: true, duplicate: false, duplicateCallback: false, notify: false, ...outcome },
            `callback ${cb} (${event.type})`,
          );
        }

        await a.answer(id, 3, {
          mode: 'delta',
          versions: [4, 5],
          events: [
            { version: 4, event: TIMELINE[3][1] },
            { version: 5, event: TIMELINE[4][1] },
          ],
          task: {
            id,
            state: 'succeeded',
            expiresAtMs: created.expiresAtMs,
            attempts: 1,
            maxAttempts: 3,
            progress: 100,
            version: 5,
            resultRef: REF,
            resultHash: HASH,
            error: null,
          },
        });

        const again = await exec.apply(id, succeed(24900, REF, HASH), { id: `${id}:cb-6` });
        assertMatches(
          again,
          { changed: false, duplicate: true, duplicateCallback: false, notify: false, reason: 'duplicate-result', version: 5 },
          'a second success with the same hash',
        );
        const redelivered = await exec.apply(id, TIMELINE[4][1], { id: `${id}:cb-5` });
        assertMatches(
          redelivered,
          { changed: false, duplicate: true, duplicateCallback: true, notify: false, reason: 'duplicate-callback', version: 5 },
          'the success redelivered under cb-5',
        );
        await a.answer(id, 5, { mode: 'caught-up', task: { version: 5 } });

        assertMatches(
          await a.task(id),
          { id, state: 'succeeded', version: 5, progress: 100, resultRef: REF, resultHash: HASH, kind: 'summary', input },
          'GET task',
        );

        const mine = (await a.feedSince(feedStart.a)).filter((n) => n.taskId === id);
        assertMatches(
          mine,
          [{ key: `${id}:succeeded:5`, taskId: id, state: 'succeeded', atMs: 24300 }],
          'the notifications for the task',
        );
        assert.ok(isCounter(mine[0].seq), 'notification.seq: expected an integer counter');
      },
    },
  ],
};

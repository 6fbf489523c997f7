// PROTOCOL.md §Batches, following a batch with one held request: the
// long-poll (held until any task changes, at once when all ended), the
// event stream (`event: batch`, `id:` the batch cursor, the end after
// `open` 0, 204 at the end), and browser tokens with a `batch` claim.
// Time bounds as in long-poll.mjs: "promptly" is within 2 s of the change.

import assert from 'node:assert/strict';
import { assertError, assertNoStore } from '../lib/match.mjs';
import { fail, progress, start, succeed } from '../lib/events.mjs';
import { sleep } from '../lib/scenarios.mjs';
import { assertBatchResponse, batchAnswer, batchEvents, batchMessage, batchResume, createdBatch, cursorNow, items } from '../lib/batches.mjs';
import { claims, hs256 } from '../lib/tokens.mjs';

const PROMPT_MS = 2000;
const SLACK_MS = 5000;
const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Starts a held batch resume and records when it settled. */
function hold(http, id, params) {
  const started = Date.now();
  const held = { settledAt: null };
  held.promise = batchResume(http, id, params).then((res) => {
    held.settledAt = Date.now();
    held.elapsed = held.settledAt - started;
    return res;
  });
  held.promise.catch(() => {});
  return held;
}

/** Opens a batch stream and checks its head. */
async function open(http, id, opts) {
  const res = await batchEvents(http, id, opts);
  assert.equal(res.status, 200, `batch events: expected 200, got ${res.status} ${res.text ?? ''}`);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream\b/i, 'Content-Type: text/event-stream');
  assertNoStore(res, 'batch event stream');
  return res.stream;
}

/**
 * Reads messages from `cursor` on until `done(answer)`. Each answers the
 * previous message's id: a later cursor, and per task listed a delta of
 * exactly the versions after the one `known` holds (a snapshot only past
 * the window). `known` (task id → version) is kept up to date.
 */
async function follow(stream, cursor, known, retention, done) {
  let answer;
  do {
    answer = await batchMessage(stream, undefined, `message after id ${cursor}`);
    assert.ok(answer.cursor > cursor, `a later message is sent on a change: cursor ${answer.cursor} after id ${cursor}`);
    assert.notEqual(answer.mode, 'caught-up', 'only the first message may be caught-up');
    for (const t of answer.tasks) {
      const held = known.get(t.task.id) ?? 0;
      if (t.mode === 'delta') {
        assert.deepEqual(t.events.map((e) => e.version), range(held + 1, t.task.version), `task ${t.task.id}: the entries after version ${held}`);
      } else {
        assert.ok(answer.mode === 'snapshot' || t.task.version - held > retention, `task ${t.task.id}: a snapshot although ${t.task.version - held} entries passed`);
      }
      known.set(t.task.id, t.task.version);
    }
    cursor = answer.cursor;
  } while (!done(answer));
  return answer;
}

async function expectEnd(stream) {
  let m;
  try {
    m = await stream.next(5000);
  } catch {
    assert.fail('the stream is still open 5 s after the message with open 0');
  }
  assert.equal(m, null, `no message may follow the one with open 0, got ${JSON.stringify(m)}`);
}

/** Runs `body` with streams that are closed afterwards, whatever happens. */
async function withStreams(body) {
  const streams = [];
  try {
    return await body((s) => (streams.push(s), s));
  } finally {
    for (const s of streams) s.close();
  }
}

export default {
  section: 'Batches: long-poll, events, browser tokens',
  protocol: 'Batches › Follow a batch',
  checks: [
    {
      name: 'a held batch request answers promptly when one item changes, with only that task',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(3));
        const item = batch.tasks[1].id;
        const held = hold(ctx.a.http, batch.batchId, { cursor: 1, waitMs: 20_000 });
        await sleep(500);
        assert.equal(held.settledAt, null, `the batch request with nothing new answered after ${held.elapsed} ms instead of waiting`);
        const event = start(100);
        const sentAt = Date.now();
        await ctx.exec.drive(item, [event]);
        const answer = assertBatchResponse(await held.promise, {
          mode: 'delta', open: 3,
          tasks: [{ id: item, mode: 'delta', events: [{ version: 1, event }], task: { state: 'running' } }],
        }, 'held batch resume');
        assert.ok(answer.cursor > 1, `the cursor grows with the change: ${answer.cursor}`);
        const lag = held.settledAt - sentAt;
        assert.ok(lag <= PROMPT_MS, `the held batch request answered ${lag} ms after the callback was sent (bound: ${PROMPT_MS} ms)`);
      },
    },
    {
      name: 'nothing new: caught-up after about waitMs; something new, a cursor ahead or snapshot=1: at once',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(2));
        const waitMs = 1500;
        const idle = hold(ctx.a.http, batch.batchId, { cursor: 1, waitMs });
        assertBatchResponse(await idle.promise, { mode: 'caught-up', cursor: 1 });
        assert.ok(idle.elapsed >= waitMs - 50, `caught-up after ${idle.elapsed} ms, before waitMs (${waitMs}) ended`);
        assert.ok(idle.elapsed <= waitMs + SLACK_MS, `caught-up after ${idle.elapsed} ms, long after waitMs (${waitMs})`);
        for (const [params, mode] of [[{ cursor: 0 }, 'snapshot'], [{ cursor: 9 }, 'snapshot'], [{ cursor: 1, snapshot: 1 }, 'snapshot']]) {
          const held = hold(ctx.a.http, batch.batchId, { ...params, waitMs: 30_000 });
          assertBatchResponse(await held.promise, { mode, cursor: 1 });
          assert.ok(held.elapsed <= SLACK_MS, `${JSON.stringify(params)}: an answer that was ready took ${held.elapsed} ms`);
        }
      },
    },
    {
      name: 'open counts the tasks not terminal; a batch with open 0 answers caught-up at once, never held',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(2));
        const [t0, t1] = batch.tasks.map((t) => t.id);
        await ctx.exec.drive(t0, [start(100), fail(200, 'gave up', false)]);
        await batchAnswer(ctx.a.http, batch.batchId, 1, { mode: 'delta', open: 1, size: 2 });
        await ctx.exec.drive(t1, [start(100), succeed(300, 'blob://b', 'sha256:b')]);
        const cursor = await cursorNow(ctx.a.http, batch.batchId, 1);
        const held = hold(ctx.a.http, batch.batchId, { cursor, waitMs: 20_000 });
        assertBatchResponse(await held.promise, { mode: 'caught-up', cursor, open: 0, size: 2 });
        assert.ok(held.elapsed < 10_000, `the long-poll on an ended batch was held ${held.elapsed} ms; it never changes again`);
      },
    },
    {
      name: 'events: event: batch, id: the cursor; each change answers the previous id; the end after open 0; then 204',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(2));
        const [t0, t1] = batch.tasks.map((t) => t.id);
        const known = new Map([[t0, 0], [t1, 0]]);
        const reached = (versions) => () => versions.every((v, i) => known.get([t0, t1][i]) >= v);
        let last;
        let beforeLast;
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a.http, batch.batchId, { lastEventId: 1 }));
          await batchMessage(stream, { mode: 'caught-up', cursor: 1, open: 2, tasks: [] }, 'first message (Last-Event-ID: 1)');
          await ctx.exec.drive(t0, [start(100)]);
          let answer = await follow(stream, 1, known, ctx.retention, reached([1, 0]));
          assert.deepEqual(answer.tasks.map((t) => t.task.id), [t0], 'only the task that changed');
          await ctx.exec.drive(t1, [start(100), progress(150, 40)]);
          await ctx.exec.drive(t0, [fail(200, 'gave up', false)]);
          answer = await follow(stream, answer.cursor, known, ctx.retention, reached([2, 2]));
          assert.equal(answer.open, 1);
          beforeLast = answer.cursor;
          await ctx.exec.drive(t1, [succeed(300, 'blob://e', 'sha256:e')]);
          last = await follow(stream, answer.cursor, known, ctx.retention, (a) => a.open === 0);
          assert.deepEqual([known.get(t0), known.get(t1)], [2, 3], 'every entry arrived');
          await expectEnd(stream);
        });
        // What an EventSource sends next: the last id. Nothing will follow.
        const end = last.cursor;
        for (const opts of [{ lastEventId: end }, { cursor: end }, { cursor: 0, lastEventId: end }]) {
          const res = await batchEvents(ctx.a.http, batch.batchId, opts);
          assert.equal(res.status, 204, `batch events ${JSON.stringify(opts)} on an ended batch at its cursor: expected 204, got ${res.status}`);
          assert.equal(res.text, '', 'a 204 has no body');
        }
        // Any other cursor still gets its message, then the end.
        await withStreams(async (keep) => {
          const below = keep(await open(ctx.a.http, batch.batchId, { lastEventId: beforeLast }));
          const expected = { mode: 'delta', cursor: end, open: 0, tasks: [{ id: t1, mode: 'delta', versions: [3] }] };
          await batchMessage(below, expected, `Last-Event-ID: ${beforeLast}, the cursor before the last change`);
          await expectEnd(below);
          const fresh = keep(await open(ctx.a.http, batch.batchId, {}));
          await batchMessage(fresh, { mode: 'snapshot', cursor: end, open: 0 }, 'no cursor: from 0');
          await expectEnd(fresh);
        });
        assertError(await batchEvents(ctx.a.http, batch.batchId, { lastEventId: end, token: null }), 401, 'unauthorized');
      },
    },
    {
      name: 'events: ?cursor= without Last-Event-ID, Last-Event-ID over it, errors before the stream',
      async run(ctx) {
        const batch = await createdBatch(ctx.a.http, items(2));
        const [t0] = batch.tasks.map((t) => t.id);
        await ctx.exec.drive(t0, [start(100)]);
        const now = await cursorNow(ctx.a.http, batch.batchId, 1);
        await withStreams(async (keep) => {
          const byQuery = keep(await open(ctx.a.http, batch.batchId, { cursor: 1 }));
          await batchMessage(byQuery, { mode: 'delta', cursor: now, tasks: [{ id: t0, mode: 'delta', versions: [1] }] }, '?cursor=1');
          const byHeader = keep(await open(ctx.a.http, batch.batchId, { cursor: 1, lastEventId: now }));
          await batchMessage(byHeader, { mode: 'caught-up', cursor: now }, `Last-Event-ID: ${now}, ?cursor=1`);
        });
        assertError(await batchEvents(ctx.a.http, batch.batchId, { cursor: -1 }), 400, 'invalid-request', 'cursor');
        assertError(await batchEvents(ctx.a.http, batch.batchId, { cursor: 2 ** 53, lastEventId: 1 }), 400, 'invalid-request', 'cursor');
        assertError(await batchEvents(ctx.a.http, batch.batchId, { lastEventId: 'x' }), 400, 'invalid-request', 'Last-Event-ID');
        assertError(await batchEvents(ctx.a.http, 'no-such-batch-77c1', { lastEventId: 1 }), 404, 'not-found');
      },
    },
    {
      name: 'a browser token with a batch claim and watch follows that batch (also in ?access_token=), no other, and none of its items’ task routes',
      needsBrowserKey: true,
      async run(ctx) {
        const { browserAudience: aud, browserKeys: [key] } = ctx.config;
        const batch = await createdBatch(ctx.a.http, items(2));
        const other = await createdBatch(ctx.a.http, items(1));
        const forBatch = (id, rights) => hs256(key, { ...claims(aud, undefined, rights), batch: id });
        const token = forBatch(batch.batchId, ['watch']);
        const http = ctx.a.http;
        assertBatchResponse(await batchResume(http, batch.batchId, { cursor: 0 }, { token }), { mode: 'snapshot' }, 'with the batch token');
        const inUrl = `access_token=${encodeURIComponent(token)}`;
        const viaUrl = await http.request('GET', `/v1/batches/${batch.batchId}/resume?cursor=1&${inUrl}`, { token: null });
        assertBatchResponse(viaUrl, { mode: 'caught-up' }, 'access_token in the URL');
        await withStreams(async (keep) => {
          const res = await batchEvents(http, batch.batchId, { query: inUrl, token: null });
          assert.equal(res.status, 200, `batch events with access_token: expected 200, got ${res.status} ${res.text ?? ''}`);
          await batchMessage(keep(res.stream), { mode: 'snapshot' }, 'first message (access_token)');
        });
        assertError(await batchResume(http, other.batchId, { cursor: 0 }, { token }), 404, 'not-found');
        assertError(await batchEvents(http, other.batchId, { token }), 404, 'not-found');
        for (const item of batch.tasks) {
          for (const path of [`/v1/tasks/${item.id}`, `/v1/tasks/${item.id}/resume?cursor=0`, `/v1/tasks/${item.id}/events`]) {
            assertError(await http.request('GET', path, { token }), 404, 'not-found');
          }
          assertError(await http.request('POST', `/v1/tasks/${item.id}/cancel`, { token, body: '{}', headers: { 'content-type': 'application/json' } }), 404, 'not-found');
        }
        assertError(await batchResume(http, batch.batchId, { cursor: 0 }, { token: forBatch(batch.batchId, ['cancel']) }), 403, 'right-not-granted');
        const tenantInUrl = `/v1/batches/${batch.batchId}/resume?cursor=0&access_token=${encodeURIComponent(ctx.config.token)}`;
        assertError(await http.request('GET', tenantInUrl, { token: null }), 401, 'browser-token-required', 'access_token');
        assertError(await http.request('GET', `/v1/batches/${batch.batchId}/resume?cursor=0&${inUrl}`), 400, 'invalid-request', 'access_token');
        if (ctx.config.browserKeyB) {
          const foreign = hs256(ctx.config.browserKeyB, { ...claims(aud, undefined, ['watch']), batch: batch.batchId });
          assertError(await batchResume(http, batch.batchId, { cursor: 0 }, { token: foreign }), 404, 'not-found');
        }
      },
    },
  ],
};

// PROTOCOL.md §Events stream (SSE), read with fetch streaming as the
// taskwire client reads it. (A standard EventSource, the browser's and
// the `eventsource` package, is driven in tests/e2e/eventsource.test.mjs.)

import assert from 'node:assert/strict';
import { assertAnswer, assertError, assertMatches, assertNoStore, TERMINAL } from '../lib/match.mjs';
import { fail, progress, succeed } from '../lib/events.mjs';
import { runningTask, succeededTask, taskAt } from '../lib/scenarios.mjs';

const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Opens the stream and checks the response head. */
async function open(a, id, opts) {
  const res = await a.events(id, opts);
  assert.equal(res.status, 200, `events: expected 200, got ${res.status}`);
  const type = res.headers.get('content-type') ?? '';
  assert.match(type, /^text\/event-stream\b/i, `Content-Type: expected text/event-stream, got ${JSON.stringify(type)}`);
  assertNoStore(res, 'event stream');
  return res.stream;
}

/** The next message: `event: resume`, a resume answer, `id:` = its task version. */
async function message(stream, expected, what) {
  const m = await stream.next(5000);
  assert.ok(m, `${what}: the stream ended instead`);
  assert.equal(m.event, 'resume', `${what}: expected "event: resume", got ${JSON.stringify(m.event)}`);
  let answer;
  try {
    answer = JSON.parse(m.data);
  } catch {
    assert.fail(`${what}: data is not JSON: ${m.data}`);
  }
  assertAnswer(answer, expected, what);
  assert.equal(m.id, String(answer.task.version), `${what}: "id:" must be the task version after the message`);
  return answer;
}

/**
 * Reads messages until the task reaches `target`. Each answers the
 * previous message's id: a delta of exactly the versions in between, or a
 * snapshot when more than `retention` passed.
 */
async function follow(stream, fromId, target, retention) {
  let prev = fromId;
  let answer;
  const entries = [];
  while (prev < target) {
    answer = await message(stream, undefined, `message after id ${prev}`);
    const v = answer.task.version;
    assert.ok(v > prev, `a later message must be sent on a change: version ${v} after id ${prev}`);
    if (answer.mode === 'delta') {
      assert.deepEqual(answer.events.map((e) => e.version), range(prev + 1, v), `delta after id ${prev}`);
      entries.push(...answer.events);
    } else {
      assert.equal(answer.mode, 'snapshot', `a later message is a delta or a snapshot, got ${answer.mode}`);
      assert.ok(v - prev > retention, `snapshot although only ${v - prev} versions passed (retention ${retention})`);
    }
    prev = v;
  }
  return { answer, entries };
}

async function expectEnd(stream) {
  let m;
  try {
    m = await stream.next(5000);
  } catch {
    assert.fail('the stream is still open 5 s after the message with a terminal state');
  }
  assert.equal(m, null, `no message may follow the terminal one, got ${JSON.stringify(m)}`);
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
  section: 'Events stream (SSE)',
  protocol: 'Events stream (SSE)',
  checks: [
    {
      name: 'Last-Event-ID starts the stream; each change follows as a delta; the stream ends after a terminal state',
      async run(ctx) {
        const { task } = await taskAt(ctx, 2);
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a, task.id, { lastEventId: 1 }));
          await message(stream, { mode: 'delta', versions: [2], task: { version: 2 } }, 'first message (Last-Event-ID: 1)');
          const p = progress(3000, 20);
          await ctx.exec.drive(task.id, [p]);
          const second = await follow(stream, 2, 3, ctx.retention);
          assertMatches(second.entries, [{ version: 3, event: p }], 'entries after id 2');
          const s = succeed(4000, 'blob://sse', 'sha256:sse');
          await ctx.exec.drive(task.id, [s]);
          const third = await follow(stream, 3, 4, ctx.retention);
          assertMatches(third.entries, [{ version: 4, event: s }], 'entries after id 3');
          assert.equal(third.answer.task.state, 'succeeded');
          await expectEnd(stream);
        });
      },
    },
    {
      name: 'a burst of changes arrives as a consistent chain of messages up to the terminal state',
      async run(ctx) {
        const task = await runningTask(ctx);
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a, task.id, { lastEventId: 1 }));
          await message(stream, { mode: 'caught-up', task: { version: 1 } }, 'first message');
          await ctx.exec.drive(task.id, [progress(300, 10), progress(400, 20), progress(500, 30), fail(600, 'gave up', false)]);
          const { answer } = await follow(stream, 1, 5, ctx.retention);
          assert.equal(answer.task.state, 'failed');
          await expectEnd(stream);
        });
      },
    },
    {
      name: '?cursor= starts the stream when there is no Last-Event-ID',
      async run(ctx) {
        const { task } = await taskAt(ctx, 2);
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a, task.id, { cursor: 1 }));
          await message(stream, { mode: 'delta', versions: [2] }, 'first message (?cursor=1)');
        });
      },
    },
    {
      name: 'Last-Event-ID wins over ?cursor=; a current cursor gets caught-up first',
      async run(ctx) {
        const { task } = await taskAt(ctx, 2);
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a, task.id, { cursor: 0, lastEventId: 2 }));
          await message(stream, { mode: 'caught-up', task: { version: 2 } }, 'first message (Last-Event-ID: 2, ?cursor=0)');
        });
      },
    },
    {
      name: 'no cursor at all starts from 0',
      async run(ctx) {
        const { task } = await taskAt(ctx, 2);
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a, task.id, {}));
          await message(stream, { mode: 'delta', versions: [1, 2] }, 'first message (no cursor)');
        });
      },
    },
    {
      name: 'the first message is a snapshot when the gap exceeds retention or the cursor is ahead',
      async run(ctx) {
        const n = ctx.retention + 2;
        const { task } = await taskAt(ctx, n);
        await withStreams(async (keep) => {
          const far = keep(await open(ctx.a, task.id, { lastEventId: 0 }));
          await message(far, { mode: 'snapshot', task: { version: n } }, 'first message (gap > retention)');
          const ahead = keep(await open(ctx.a, task.id, { lastEventId: n + 5 }));
          await message(ahead, { mode: 'snapshot', task: { version: n } }, 'first message (cursor ahead)');
        });
      },
    },
    {
      name: 'a stream on a task already terminal sends one message and ends',
      async run(ctx) {
        const task = await succeededTask(ctx);
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a, task.id, { lastEventId: 1 }));
          const answer = await message(stream, { mode: 'delta', versions: [2], task: { version: 2 } }, 'first message');
          assert.ok(TERMINAL.includes(answer.task.state));
          await expectEnd(stream);
        });
      },
    },
    {
      name: 'a stream request at the terminal version is answered 204 No Content, so a standard EventSource stops',
      async run(ctx) {
        const task = await runningTask(ctx);
        await withStreams(async (keep) => {
          const stream = keep(await open(ctx.a, task.id, { lastEventId: 1 }));
          await message(stream, { mode: 'caught-up', task: { version: 1 } }, 'first message');
          await ctx.exec.drive(task.id, [fail(700, 'gave up', false)]);
          const { answer } = await follow(stream, 1, 2, ctx.retention);
          assert.equal(answer.task.state, 'failed');
          await expectEnd(stream);
        });
        // What an EventSource sends next: the terminal message's id.
        for (const opts of [{ lastEventId: 2 }, { cursor: 2 }, { cursor: 0, lastEventId: 2 }]) {
          const res = await ctx.a.events(task.id, opts);
          const what = `events with ${JSON.stringify(opts)} on a task terminal at version 2`;
          assert.equal(res.status, 204,
            `${what}: expected 204 No Content (the HTML standard's "stop reconnecting"), got ${res.status}`);
          assert.equal(res.text, '', `${what}: a 204 has no body`);
        }
        // Any other cursor still gets its message: below the end a delta,
        // past it (a view the server never had) a snapshot.
        await withStreams(async (keep) => {
          const below = keep(await open(ctx.a, task.id, { lastEventId: 1 }));
          await message(below, { mode: 'delta', versions: [2], task: { version: 2 } }, 'first message (Last-Event-ID: 1)');
          const ahead = keep(await open(ctx.a, task.id, { lastEventId: 7 }));
          await message(ahead, { mode: 'snapshot', task: { version: 2 } }, 'first message (Last-Event-ID: 7)');
        });
        // The 204 comes after authentication and ownership.
        assertError(await ctx.a.events(task.id, { lastEventId: 2, token: null }), 401, 'unauthorized');
        assertError(await ctx.a.events('no-such-task-204', { lastEventId: 2 }), 404, 'not-found');
      },
    },
    {
      name: 'errors come before the stream: 404 unknown task, 401 without a bearer, 400 bad cursor (even next to a Last-Event-ID)',
      async run(ctx) {
        const task = await runningTask(ctx);
        assertError(await ctx.a.events('no-such-task-5d1e', {}), 404, 'not-found');
        assertError(await ctx.a.events(task.id, { token: null }), 401, 'unauthorized');
        assertError(await ctx.a.events(task.id, { cursor: -1 }), 400, 'invalid-request', 'cursor');
        // Judged even when Last-Event-ID wins over it.
        assertError(await ctx.a.events(task.id, { cursor: 2 ** 53, lastEventId: 1 }), 400, 'invalid-request', 'cursor');
      },
    },
  ],
};

// PROTOCOL.md §Create a task and §Get a task.

import assert from 'node:assert/strict';
import { assertError, assertJsonType, assertMatches, assertTaskView, MAX_SAFE } from '../lib/match.mjs';
import { start } from '../lib/events.mjs';
import { uid } from '../lib/client.mjs';

const FIVE_MINUTES = 5 * 60_000;

export default {
  section: 'Create a task / Get a task',
  protocol: 'Create a task',
  checks: [
    {
      name: '201 with a TaskView at version 0 plus kind and input; GET answers the same',
      async run({ a }) {
        const input = { doc: 'text', n: [1, 2.5, { deep: null }], flag: true };
        const before = Date.now();
        const res = await a.create({ ttlMs: 60_000, maxAttempts: 2, kind: 'summary', input });
        assert.equal(res.status, 201, `expected 201, got ${res.status}`);
        assertJsonType(res);
        const task = res.json;
        assertTaskView(task, 'created task');
        assertMatches(task, { state: 'queued', attempts: 0, maxAttempts: 2, progress: 0, version: 0, kind: 'summary', resultRef: null, resultHash: null, error: null });
        assert.deepEqual(task.input, input, 'input is stored as given');
        assert.ok(Buffer.byteLength(task.id) <= 255, 'a task id is at most 255 bytes');
        assert.ok(Math.abs(task.expiresAtMs - (before + 60_000)) < FIVE_MINUTES, `expiresAtMs ${task.expiresAtMs}: expected creation time + ttlMs`);

        const got = await a.get(task.id);
        assert.equal(got.status, 200, `GET: expected 200, got ${got.status}`);
        assertJsonType(got);
        assertTaskView(got.json, 'GET task');
        const { input: gotInput, ...rest } = got.json;
        assertMatches(rest, { id: task.id, state: 'queued', version: 0, expiresAtMs: task.expiresAtMs, attempts: 0, maxAttempts: 2, progress: 0, kind: 'summary' }, 'GET task');
        assert.deepEqual(gotInput, input, 'GET task: input');
      },
    },
    {
      name: 'kind and input are optional; unknown request fields are ignored',
      async run({ a }) {
        await a.createTask({ ttlMs: 1000, maxAttempts: 1 });
        await a.createTask({ ttlMs: 1000, maxAttempts: 1, futureField: { x: 1 } });
        // The server assigns the id and the starting state, whatever the body says.
        const chosen = `chosen-${uid('id')}`;
        const t = await a.createTask({ ttlMs: 60_000, maxAttempts: 1, id: chosen, state: 'succeeded', version: 7 });
        assert.notEqual(t.id, chosen, 'a client cannot choose the task id');
        assertMatches(t, { state: 'queued', version: 0 });
        await a.createTask({ ttlMs: 0.5, maxAttempts: MAX_SAFE, kind: 'k'.repeat(64) });
        await a.createTask({ ttlMs: 1000, maxAttempts: 1, kind: 'é'.repeat(32), input: null });
      },
    },
    {
      name: 'bad values: 400 naming the field',
      async run({ a }) {
        const cases = [
          [{ maxAttempts: 1 }, 'ttlMs'],
          [{ ttlMs: 0, maxAttempts: 1 }, 'ttlMs'],
          [{ ttlMs: -5, maxAttempts: 1 }, 'ttlMs'],
          [{ ttlMs: '1000', maxAttempts: 1 }, 'ttlMs'],
          [{ ttlMs: null, maxAttempts: 1 }, 'ttlMs'],
          [{ ttlMs: 1000 }, 'maxAttempts'],
          [{ ttlMs: 1000, maxAttempts: 0 }, 'maxAttempts'],
          [{ ttlMs: 1000, maxAttempts: 1.5 }, 'maxAttempts'],
          [{ ttlMs: 1000, maxAttempts: '3' }, 'maxAttempts'],
          [{ ttlMs: 1000, maxAttempts: MAX_SAFE + 1 }, 'maxAttempts'],
          [{ ttlMs: 1000, maxAttempts: 1, kind: 7 }, 'kind'],
          [{ ttlMs: 1000, maxAttempts: 1, kind: 'k'.repeat(65) }, 'kind'],
          [{ ttlMs: 1000, maxAttempts: 1, kind: 'é'.repeat(33) }, 'kind'],
        ];
        for (const [body, field] of cases) {
          assertError(await a.create(body), 400, 'invalid-request', field);
        }
      },
    },
    {
      name: 'malformed bodies: 400 invalid-request',
      async run({ a }) {
        for (const raw of ['{"ttlMs":', '', 'null', '[]', '"task"', '{"ttlMs":1e400,"maxAttempts":1}', '{"ttlMs":1000,"maxAttempts":1} x']) {
          assertError(await a.create(raw), 400, 'invalid-request');
        }
      },
    },
    {
      name: 'Idempotency-Key: the same body answers 200 with the same task as it is now',
      async run({ a, exec }) {
        const key = uid('create');
        const body = { ttlMs: 3_600_000, maxAttempts: 2, kind: 'report', input: { a: 1, b: [1, 2] } };
        const first = await a.createTask(body, { key });
        await exec.drive(first.id, [start(10)]);
        const again = await a.create(body, { key });
        assert.equal(again.status, 200, `the same key and body: expected 200, got ${again.status}`);
        assertMatches(again.json, { id: first.id, version: 1, state: 'running', attempts: 1 }, 'replayed create');
      },
    },
    {
      name: 'Idempotency-Key: bodies are compared as JSON values (key order and whitespace do not matter)',
      async run({ a }) {
        const key = uid('create');
        const first = await a.createTask({ ttlMs: 60_000, maxAttempts: 2, input: { a: 1, b: { c: [1, 2] } } }, { key });
        const reordered = ' {\n  "input" : { "b" : {"c":[1, 2]}, "a":1 },\t"maxAttempts":2,  "ttlMs":60000 }\n';
        const again = await a.create(reordered, { key });
        assert.equal(again.status, 200, `the same JSON value: expected 200, got ${again.status}`);
        assert.equal(again.json?.id, first.id, 'the same task');
      },
    },
    {
      name: 'Idempotency-Key: a different body answers 422 idempotency-key-reused and changes nothing',
      async run({ a }) {
        const key = uid('create');
        const first = await a.createTask({ ttlMs: 60_000, maxAttempts: 2 }, { key });
        assertError(await a.create({ ttlMs: 60_000, maxAttempts: 3 }, { key }), 422, 'idempotency-key-reused');
        assertError(await a.create({ ttlMs: 60_000, maxAttempts: 2, input: { x: 1 } }, { key }), 422, 'idempotency-key-reused');
        assertMatches(await a.task(first.id), { version: 0, maxAttempts: 2, input: null }, 'the first task');
      },
    },
    {
      name: 'input keeps its numbers exactly: 2^53 + 1 comes back as sent, in create, replay and GET',
      async run({ a }) {
        const key = uid('exact');
        const body = '{"ttlMs":60000,"maxAttempts":1,"input":{"n":9007199254740993,"big":123456789012345678901234567890,"f":0.30000000000000000001}}';
        const exact = (res, what) => {
          // JSON.parse would round these, so the raw answer text is checked.
          for (const [name, digits] of [['n', '9007199254740993'], ['big', '123456789012345678901234567890'], ['f', '0.30000000000000000001']]) {
            assert.match(res.text, new RegExp(`"${name}"\\s*:\\s*${digits.replace('.', '\\.')}(?![0-9])`), `${what}: input.${name} must come back as ${digits}`);
          }
        };
        const created = await a.create(body, { key });
        assert.equal(created.status, 201, `expected 201, got ${created.status}`);
        exact(created, 'create');
        exact(await a.get(created.json.id), 'GET');
        const replay = await a.create(body, { key });
        assert.equal(replay.status, 200, `the same body: expected 200, got ${replay.status}`);
        exact(replay, 'replayed create');
      },
    },
    {
      name: 'Idempotency-Key: numbers are compared exactly (bodies differing only beyond double precision are different)',
      async run({ a }) {
        const key = uid('exact');
        const first = await a.createTask('{"ttlMs":60000,"maxAttempts":1,"input":{"n":9007199254740993}}', { key });
        // 2^53 and 2^53 + 1 are the same double, and different numbers.
        assertError(await a.create('{"ttlMs":60000,"maxAttempts":1,"input":{"n":9007199254740992}}', { key }), 422, 'idempotency-key-reused');
        // The same number written another way is the same body.
        const again = await a.create('{"ttlMs":6e4,"maxAttempts":1.0,"input":{"n":9007199254740993.0}}', { key });
        assert.equal(again.status, 200, `the same values: expected 200, got ${again.status}`);
        assert.equal(again.json?.id, first.id, 'the same task');
      },
    },
    {
      name: 'ids and keys over 255 bytes are invalid-request (255 is fine)',
      async run({ a }) {
        const body = { ttlMs: 60_000, maxAttempts: 1 };
        await a.createTask(body, { key: `k${uid('x')}`.padEnd(255, 'k') });
        assertError(await a.create(body, { key: 'k'.repeat(256) }), 400, 'invalid-request');
        assertError(await a.get('t'.repeat(256)), 400, 'invalid-request');
      },
    },
    {
      name: 'GET of an unknown task: 404 not-found',
      async run({ a }) {
        assertError(await a.get('no-such-task-91c2'), 404, 'not-found');
      },
    },
  ],
};

// PROTOCOL.md §Conventions: authentication, the error shape and status
// codes, body size, and no 500 for anything a client sends.

import assert from 'node:assert/strict';
import { assertError } from '../lib/match.mjs';
import { start } from '../lib/events.mjs';
import { runningTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';

const LIMIT = 64 * 1024;

/** A create body of exactly `size` bytes. */
function createBodyOfSize(size) {
  const head = '{"ttlMs":60000,"maxAttempts":1,"input":"';
  const tail = '"}';
  return head + 'x'.repeat(size - head.length - tail.length) + tail;
}

/** The client endpoints, as [method, path] for a task id. */
const clientEndpoints = (id) => [
  ['POST', '/v1/tasks'],
  ['GET', `/v1/tasks/${id}`],
  ['GET', `/v1/tasks/${id}/resume?cursor=0`],
  ['GET', `/v1/tasks/${id}/events`],
  ['POST', `/v1/tasks/${id}/deliveries`],
  ['GET', '/v1/notifications'],
];

export default {
  section: 'Conventions: authentication and errors',
  protocol: 'Conventions',
  checks: [
    {
      name: '401 unauthorized on every client endpoint without a valid bearer token',
      async run(ctx) {
        const task = await runningTask(ctx);
        const http = ctx.a.http;
        const badAuth = [
          {},
          { authorization: 'Bearer not-a-real-token' },
          { authorization: 'Bearer' },
          { authorization: `Basic ${Buffer.from(`${ctx.config.token}:`).toString('base64')}` },
          { authorization: ctx.config.token },
        ];
        for (const [method, path] of clientEndpoints(task.id)) {
          const body = method === 'POST' && path === '/v1/tasks' ? '{"ttlMs":1000,"maxAttempts":1}' : undefined;
          for (const headers of badAuth) {
            const res = await http.request(method, path, {
              token: null,
              body,
              headers: { 'content-type': 'application/json', 'idempotency-key': uid('k'), ...headers },
            });
            assertError(res, 401, 'unauthorized');
          }
          // Tenant tokens never go in the URL: the watch routes, which take
          // a browser token there (§Credentials), say so; elsewhere the URL
          // is not read at all.
          const sep = path.includes('?') ? '&' : '?';
          const watchRoute = /\/(resume|events)(\?|$)/.test(path);
          for (const q of ['access_token', 'token']) {
            const res = await http.request(method, `${path}${sep}${q}=${encodeURIComponent(ctx.config.token)}`, {
              token: null,
              body,
              headers: { 'content-type': 'application/json', 'idempotency-key': uid('k') },
            });
            assertError(res, 401, q === 'access_token' && watchRoute ? 'browser-token-required' : 'unauthorized');
          }
        }
      },
    },
    {
      name: '404 not-found for unknown routes and unknown tasks',
      async run(ctx) {
        const task = await runningTask(ctx);
        const http = ctx.a.http;
        for (const path of ['/', '/v1', '/v1/nope', `/v1/tasks/${task.id}/nope`, `/v2/tasks/${task.id}`, `/v1/tasks/${task.id}/resume/extra?cursor=0`]) {
          assertError(await http.request('GET', path), 404, 'not-found');
        }
        const unknown = 'no-such-task-e404';
        assertError(await ctx.a.get(unknown), 404, 'not-found');
        assertError(await ctx.a.resume(unknown, { cursor: 0 }), 404, 'not-found');
        assertError(await ctx.a.events(unknown), 404, 'not-found');
        assertError(await ctx.a.deliver(unknown, uid('k')), 404, 'not-found');
      },
    },
    {
      name: '405 method-not-allowed for a known path with the wrong method',
      async run(ctx) {
        const task = await runningTask(ctx);
        const http = ctx.a.http;
        const id = task.id;
        const cases = [
          ['GET', '/v1/tasks'],
          ['PUT', '/v1/tasks'],
          ['DELETE', `/v1/tasks/${id}`],
          ['PATCH', `/v1/tasks/${id}`],
          ['POST', `/v1/tasks/${id}`],
          ['POST', `/v1/tasks/${id}/resume?cursor=0`],
          ['POST', `/v1/tasks/${id}/events`],
          ['GET', `/v1/tasks/${id}/callbacks`],
          ['GET', `/v1/tasks/${id}/deliveries`],
          ['POST', '/v1/notifications'],
          ['DELETE', '/v1/notifications'],
        ];
        for (const [method, path] of cases) {
          assertError(await http.request(method, path), 405, 'method-not-allowed');
        }
      },
    },
    {
      name: '413 payload-too-large for a body over 64 KiB (exactly 64 KiB is fine)',
      async run(ctx) {
        const created = await ctx.a.create(createBodyOfSize(LIMIT));
        assert.equal(created.status, 201, `a create body of exactly 65536 bytes: expected 201, got ${created.status}`);
        assertError(await ctx.a.create(createBodyOfSize(LIMIT + 1)), 413, 'payload-too-large');
        assertError(await ctx.a.create(createBodyOfSize(4 * LIMIT)), 413, 'payload-too-large');
        const task = await runningTask(ctx);
        const big = JSON.stringify({ ...start(10), worker: 'w'.repeat(LIMIT) });
        assertError(await ctx.exec.send(task.id, null, { body: big }), 413, 'payload-too-large');
        await ctx.a.answer(task.id, 1, { mode: 'caught-up' });
      },
    },
    {
      name: 'a streamed (chunked) body over 64 KiB: 413',
      async run(ctx) {
        const chunk = new TextEncoder().encode(createBodyOfSize(LIMIT + 1024));
        const body = new ReadableStream({
          start(controller) {
            for (let i = 0; i < chunk.length; i += 8192) controller.enqueue(chunk.slice(i, i + 8192));
            controller.close();
          },
        });
        const res = await ctx.a.http.request('POST', '/v1/tasks', { body, headers: { 'content-type': 'application/json' } });
        assertError(res, 413, 'payload-too-large');
      },
    },
    {
      name: 'hostile bodies are 400, never a 500',
      async run(ctx) {
        const task = await runningTask(ctx);
        const deep = (n) => `${'['.repeat(n)}${']'.repeat(n)}`;
        // [body, statuses allowed]: deep nesting and lone surrogates inside
        // `input` are valid JSON that a parser may or may not accept.
        const creates = [
          ['{"ttlMs":{},"maxAttempts":[]}', [400]],
          ['{"ttlMs":1e999999,"maxAttempts":1}', [400]],
          ['{"ttlMs":1000,"maxAttempts":1e20}', [400]],
          ['{"ttlMs":1000,"maxAttempts":18446744073709551616}', [400]],
          ['{"ttlMs":1000,"maxAttempts":-0.0}', [400]],
          [`{"ttlMs":1000,"maxAttempts":1,"kind":"${'a'.repeat(70)}\\u0000"}`, [400]],
          ['\ufeff{"ttlMs":1000}', [400]],
          [Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), [400]],
          [deep(10_000), [400]],
          [`{"ttlMs":1000,"maxAttempts":1,"input":${deep(5000)}}`, [201, 400]],
          ['{"ttlMs":1000,"maxAttempts":1,"input":"\\ud800"}', [201, 400]],
        ];
        for (const [body, allowed] of creates) {
          const res = await ctx.a.http.request('POST', '/v1/tasks', { body, headers: { 'content-type': 'application/json' } });
          assert.ok(allowed.includes(res.status), `create with a hostile body: expected ${allowed.join(' or ')}, got ${res.status}`);
          if (res.status === 400) assertError(res, 400, 'invalid-request');
        }
        // The JSON ones name their task, so that the event itself is judged.
        const named = (fields) => `{"taskId":${JSON.stringify(task.id)},${fields}}`;
        const callbacks = [
          named('"type":"progress","atMs":{},"progress":[],"cursor":1'),
          named('"type":"progress","atMs":1e999999,"progress":10,"cursor":"c"'),
          named('"type":"progress","atMs":10,"progress":18446744073709551616,"cursor":"c"'),
          named('"type":"progress","atMs":10,"progress":100.5,"cursor":"c"'),
          named('"type":{"nested":true},"atMs":10'),
          deep(10_000),
          Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
        ];
        for (const body of callbacks) {
          assertError(await ctx.exec.send(task.id, null, { body }), 400, 'invalid-request');
        }
        await ctx.a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1 } });
        for (const cursor of ['1e400', 'NaN', 'Infinity', '0x10', '99999999999999999999', '%00']) {
          const res = await ctx.a.http.request('GET', `/v1/tasks/${task.id}/resume?cursor=${cursor}`);
          assertError(res, 400, 'invalid-request', 'cursor');
        }
      },
    },
  ],
};

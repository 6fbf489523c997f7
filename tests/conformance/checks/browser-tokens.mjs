// PROTOCOL.md §Credentials: the token matrix. Every client endpoint ×
// {no token, tenant token, browser token in scope, out of scope, missing
// right, expired, wrong audience, alg none, tampered, old key after
// rotation} gives the documented status and code; cancel and decisions
// need their right and record the token's user; browser tokens in the
// URL of the watch routes, never a tenant token there.

import assert from 'node:assert/strict';
import { assertError } from '../lib/match.mjs';
import { succeededTask, runningTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';
import { rawPost } from '../lib/raw.mjs';
import { algNone, claims, expiredAgo, hs256, notBefore, retiredKey, tampered } from '../lib/tokens.mjs';

const ALL = ['watch', 'cancel', 'decide', 'deliver'];
const TENANT_ONLY = [403, 'tenant-token-required'];
const OUT = [404, 'not-found'];
const NO_RIGHT = [403, 'right-not-granted'];
const OK = [200, null];
const all = (answer) => Array(6).fill(answer);

/** The client endpoints, in the matrix's column order. */
const endpoints = (id) => [
  ['create', 'POST', '/v1/tasks', '{"ttlMs":60000,"maxAttempts":1}'],
  ['get', 'GET', `/v1/tasks/${id}`],
  ['resume', 'GET', `/v1/tasks/${id}/resume?cursor=0`],
  ['events', 'GET', `/v1/tasks/${id}/events`],
  ['deliver', 'POST', `/v1/tasks/${id}/deliveries`],
  ['notifications', 'GET', '/v1/notifications'],
];

async function send(http, [, method, path, body], token) {
  return http.request(method, path, {
    token,
    body,
    headers: { 'content-type': 'application/json', 'idempotency-key': uid('k') },
  });
}

function expect(res, [status, code], what) {
  if (code === null) {
    // 200 or 201: a create or a first delivery is 201.
    assert.ok(res.status === status || res.status === status + 1, `${what}: expected ${status}/${status + 1}, got ${res.status} ${res.text}`);
  } else {
    try {
      assertError(res, status, code);
    } catch (err) {
      err.message = `${what}: ${err.message}`;
      throw err;
    }
  }
}

export default {
  section: 'Credentials: browser tokens',
  protocol: 'Credentials',
  checks: [
    {
      name: 'the token matrix: every endpoint × every kind of credential',
      needsBrowserKey: true,
      async run(ctx) {
        const { audience, key } = { audience: ctx.config.browserAudience, key: ctx.config.browserKeys[0] };
        const task = await succeededTask(ctx);
        const elsewhere = await runningTask(ctx);
        const good = hs256(key, claims(audience, [task.id], ALL));
        const cases = [
          ['no token', null, all([401, 'unauthorized'])],
          ['tenant token', ctx.config.token, all(OK)],
          ['browser token in scope', good, [TENANT_ONLY, OK, OK, OK, OK, TENANT_ONLY]],
          ['out of scope', hs256(key, claims(audience, [elsewhere.id], ALL)), [TENANT_ONLY, OUT, OUT, OUT, OUT, TENANT_ONLY]],
          ['missing right', hs256(key, claims(audience, [task.id], ['cancel', 'decide'])), [TENANT_ONLY, NO_RIGHT, NO_RIGHT, NO_RIGHT, NO_RIGHT, TENANT_ONLY]],
          ['only watch, delivering', hs256(key, claims(audience, [task.id], ['watch'])), [TENANT_ONLY, OK, OK, OK, NO_RIGHT, TENANT_ONLY]],
          ['expired (10 min ago)', hs256(key, claims(audience, [task.id], ALL, expiredAgo(600))), all([401, 'token-expired'])],
          ['not valid yet (nbf in 10 min)', hs256(key, claims(audience, [task.id], ALL, notBefore(600))), all([401, 'unauthorized'])],
          ['wrong audience', hs256(key, claims(`not-${audience}`, [task.id], ALL)), all([401, 'unauthorized'])],
          ['alg none', algNone(key, claims(audience, [task.id], ALL)), all([401, 'unauthorized'])],
          ['tampered (scope widened)', tampered(good, claims(audience, [task.id, elsewhere.id], ALL)), all([401, 'unauthorized'])],
          ['old key after rotation (a retired kid)', hs256(retiredKey(), claims(audience, [task.id], ALL)), all([401, 'unauthorized'])],
          ['a configured kid with a retired secret', hs256({ kid: key.kid, secret: retiredKey().secret }, claims(audience, [task.id], ALL)), all([401, 'unauthorized'])],
          ['no kid', hs256({ kid: undefined, secret: key.secret }, claims(audience, [task.id], ALL)), all([401, 'unauthorized'])],
          ['HS512 with the key', hs256(key, claims(audience, [task.id], ALL), { alg: 'HS512' }), all([401, 'unauthorized'])],
        ];
        for (const [name, token, row] of cases) {
          const columns = endpoints(task.id);
          for (let i = 0; i < columns.length; i++) {
            expect(await send(ctx.a.http, columns[i], token), row[i], `${name} × ${columns[i][0]}`);
          }
        }
      },
    },
    {
      name: "cancel and decisions need the token's right on the task, and record its user as the actor",
      needsBrowserKey: true,
      async run(ctx) {
        const { browserAudience: aud, browserKeys: [key] } = ctx.config;
        const token = (tasks, rights) => hs256(key, claims(aud, tasks, rights));
        const post = (id, what, t, body = {}) =>
          ctx.a.http.request('POST', `/v1/tasks/${id}/${what}`, { token: t, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
        const actorOfLast = async (id) => {
          // The last entry alone, a delta whatever the window (at least 2):
          // from 0 a task at version 3 is a snapshot under --retention 2.
          const { version } = await ctx.a.task(id);
          const res = await ctx.a.http.request('GET', `/v1/tasks/${id}/resume?cursor=${version - 1}`);
          const events = JSON.parse(res.text).events;
          return events[events.length - 1].event.actor;
        };
        const running = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 3 });
        await ctx.exec.apply(running.id, { type: 'start', atMs: Date.now(), worker: 'w1', attempt: 1, leaseMs: 60_000 });
        const elsewhere = await runningTask(ctx);
        expect(await post(running.id, 'cancel', token([running.id], ['watch'])), NO_RIGHT, 'cancel with watch only');
        expect(await post(running.id, 'cancel', token([elsewhere.id], ['cancel'])), OUT, 'cancel of a task out of scope');
        const cancelled = await post(running.id, 'cancel', token([running.id], ['cancel']));
        assert.equal(cancelled.status, 200, `cancel with the right: ${cancelled.text}`);
        assert.equal(JSON.parse(cancelled.text).task.state, 'cancelling');
        assert.equal(await actorOfLast(running.id), 'user:conformance-user', 'the token\'s subject is the actor');

        const held = await ctx.a.createTask({ ttlMs: 3_600_000, maxAttempts: 3 });
        await ctx.exec.apply(held.id, { type: 'start', atMs: Date.now(), worker: 'w1', attempt: 1, leaseMs: 60_000 });
        const hold = await ctx.exec.apply(held.id, { type: 'hold', atMs: Date.now(), attempt: 1, artifactRef: 'blob://d', artifactHash: 'sha256:d' });
        const decision = { decision: 'approve', artifactHash: 'sha256:d', version: hold.version };
        expect(await post(held.id, 'decisions', token([held.id], ['cancel']), decision), NO_RIGHT, 'a decision with cancel only');
        const approved = await post(held.id, 'decisions', token([held.id], ['decide']), decision);
        assert.equal(JSON.parse(approved.text).reason, 'approved', approved.text);
        assert.equal(await actorOfLast(held.id), 'user:conformance-user');
      },
    },
    {
      // Misreading caught: reading (and buffering) the body first, then
      // judging the token, so a watch-only page can hold 1 MiB per
      // connection until the body timeout (issue 24, N1).
      name: 'rights are judged from the headers: a browser token without the right is refused before its body is read',
      needsBrowserKey: true,
      async run(ctx) {
        const { browserAudience: aud, browserKeys: [key] } = ctx.config;
        const task = await runningTask(ctx);
        const elsewhere = await runningTask(ctx);
        const watchOnly = hs256(key, claims(aud, [task.id], ['watch']));
        const cases = [
          ['a batch', '/v1/batches', 1 << 20, TENANT_ONLY],
          ['a create', '/v1/tasks', 60_000, TENANT_ONLY],
          ['a cancel without the right', `/v1/tasks/${task.id}/cancel`, 60_000, NO_RIGHT],
          ['a decision without the right', `/v1/tasks/${task.id}/decisions`, 60_000, NO_RIGHT],
          ['a delivery without the right', `/v1/tasks/${task.id}/deliveries`, 60_000, NO_RIGHT],
          ['a cancel out of scope', `/v1/tasks/${elsewhere.id}/cancel`, 60_000, OUT],
        ];
        for (const [label, path, length, [status, code]] of cases) {
          // The body is announced and never sent: a backend that waits for
          // it answers nothing in time, or 408 after its body timeout.
          const headers = [['authorization', `Bearer ${watchOnly}`], ['idempotency-key', uid('k')]];
          const res = await rawPost(ctx.a.http, path, { headers, body: '{', length, waitMs: 4000 });
          assert.equal(res.status, status, `${label}: expected ${status} before the body, got ${res.status ?? 'no answer'} ${res.text ?? ''}`);
          assert.equal(res.json?.error?.code, code, `${label}: ${res.text}`);
        }
      },
    },
    {
      name: 'a rotation: tokens of every configured key are accepted at once',
      needsBrowserKeys: true,
      async run(ctx) {
        const task = await runningTask(ctx);
        for (const key of ctx.config.browserKeys) {
          const token = hs256(key, claims(ctx.config.browserAudience, [task.id], ['watch']));
          const res = await ctx.a.http.request('GET', `/v1/tasks/${task.id}`, { token });
          assert.equal(res.status, 200, `kid ${key.kid}: ${res.text}`);
        }
      },
    },
    {
      name: "another tenant's key grants nothing here: its token naming this task is 404",
      needsBrowserKey: true,
      needsBrowserKeyB: true,
      async run(ctx) {
        const task = await runningTask(ctx);
        const token = hs256(ctx.config.browserKeyB, claims(ctx.config.browserAudience, [task.id], ALL));
        for (const column of endpoints(task.id).slice(1, 5)) {
          expect(await send(ctx.a.http, column, token), OUT, column[0]);
        }
      },
    },
    {
      name: 'the watch routes take a browser token in ?access_token=, never a tenant token',
      needsBrowserKey: true,
      async run(ctx) {
        const task = await succeededTask(ctx);
        const token = hs256(ctx.config.browserKeys[0], claims(ctx.config.browserAudience, [task.id], ['watch']));
        const http = ctx.a.http;
        for (const route of [`/v1/tasks/${task.id}/resume?cursor=0&`, `/v1/tasks/${task.id}/events?`]) {
          const ok = await http.request('GET', `${route}access_token=${encodeURIComponent(token)}`, { token: null });
          assert.equal(ok.status, 200, `${route}: ${ok.text}`);
          const tenant = await http.request('GET', `${route}access_token=${encodeURIComponent(ctx.config.token)}`, { token: null });
          assertError(tenant, 401, 'browser-token-required', 'access_token');
          const both = await http.request('GET', `${route}access_token=${encodeURIComponent(token)}`);
          assertError(both, 400, 'invalid-request', 'access_token');
        }
        // Other routes do not read the URL.
        const res = await http.request('GET', `/v1/tasks/${task.id}?access_token=${encodeURIComponent(token)}`, { token: null });
        assertError(res, 401, 'unauthorized');
      },
    },
  ],
};

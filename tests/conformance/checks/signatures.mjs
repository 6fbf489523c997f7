// PROTOCOL.md §Executor callback: Standard Webhooks signatures. A rejected
// callback is 401 and touches nothing: the version stays and the callback
// id is still free afterwards.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { assertError, assertMatches } from '../lib/match.mjs';
import { progress } from '../lib/events.mjs';
import { runningTask } from '../lib/scenarios.mjs';
import { uid } from '../lib/client.mjs';
import { callbackBody, nowSeconds, sign } from '../lib/sign.mjs';

const MINUTE = 60;
const otherSecret = () => `whsec_${randomBytes(24).toString('base64')}`;

/**
 * Each case turns (secret, id, body, timestamp) into the request options
 * of a callback (by default signed with them, at that timestamp).
 */
const REJECTED = [
  ['missing webhook-id', () => ({ headers: { 'webhook-id': undefined } })],
  ['missing webhook-timestamp', () => ({ headers: { 'webhook-timestamp': undefined } })],
  ['missing webhook-signature', () => ({ headers: { 'webhook-signature': undefined } })],
  ['signed with another secret', () => ({ secret: otherSecret() })],
  ['body changed after signing', (s, id, body, ts) => ({ headers: { 'webhook-signature': sign(s, id, ts, body.replace('"atMs":500', '"atMs":501')) } })],
  ['signed for another webhook-id', (s, id, body, ts) => ({ headers: { 'webhook-signature': sign(s, `${id}x`, ts, body) } })],
  ['signed for another timestamp', (s, id, body, ts) => ({ headers: { 'webhook-signature': sign(s, id, ts - 1, body) } })],
  ['timestamp 6 minutes old (a late replay)', () => ({ timestamp: nowSeconds(-6 * MINUTE) })],
  ['timestamp 6 minutes ahead', () => ({ timestamp: nowSeconds(6 * MINUTE) })],
  ['timestamp not a number', (s, id, body, ts) => ({ headers: { 'webhook-timestamp': 'yesterday', 'webhook-signature': sign(s, id, 'yesterday', body) } })],
  ['signature without the v1, scheme', (s, id, body, ts) => ({ headers: { 'webhook-signature': sign(s, id, ts, body).slice(3) } })],
  ['signature under another scheme', (s, id, body, ts) => ({ headers: { 'webhook-signature': sign(s, id, ts, body).replace(/^v1,/, 'v2,') } })],
  ['signature not base64', () => ({ headers: { 'webhook-signature': 'v1,***not-base64***' } })],
  ['several signatures, none valid', (s, id, body, ts) => ({ headers: { 'webhook-signature': `${sign(otherSecret(), id, ts, body)} v1,AAAA ${sign(otherSecret(), id, ts, body)}` } })],
];

const ACCEPTED = [
  ['several signatures, the last one valid', (s, id, body, ts) => ({ headers: { 'webhook-signature': `${sign(otherSecret(), id, ts, body)} ${sign(s, id, ts, body)}` } })],
  ['several signatures, the first one valid', (s, id, body, ts) => ({ headers: { 'webhook-signature': `${sign(s, id, ts, body)} v1,AAAA` } })],
  ['timestamp 4 minutes old', () => ({ timestamp: nowSeconds(-4 * MINUTE) })],
  ['timestamp 4 minutes ahead', () => ({ timestamp: nowSeconds(4 * MINUTE) })],
];

const rejectionCheck = ([label, make]) => ({
  name: `${label}: 401, no state touched, the callback id still free`,
  async run(ctx) {
    const task = await runningTask(ctx);
    const id = uid('cb');
    const event = progress(500, 10);
    const body = callbackBody(task.id, event);
    const timestamp = nowSeconds();
    const res = await ctx.exec.send(task.id, event, { id, body, timestamp, ...make(ctx.config.secret, id, body, timestamp) });
    assertError(res, 401, 'unauthorized');
    await ctx.a.answer(task.id, 1, { mode: 'caught-up', task: { version: 1, progress: 0 } });
    const t = await ctx.exec.apply(task.id, event, { id });
    assertMatches(t, { changed: true, reason: 'progress', version: 2 }, 'the same callback, correctly signed');
  },
});

const acceptanceCheck = ([label, make]) => ({
  name: `${label}: accepted`,
  async run(ctx) {
    const task = await runningTask(ctx);
    const id = uid('cb');
    const event = progress(500, 10);
    const body = callbackBody(task.id, event);
    const timestamp = nowSeconds();
    const res = await ctx.exec.send(task.id, event, { id, body, timestamp, ...make(ctx.config.secret, id, body, timestamp) });
    assert.equal(res.status, 200, `expected 200, got ${res.status}`);
    assertMatches(res.json, { changed: true, reason: 'progress', version: 2 });
  },
});

export default {
  section: 'Executor callback: signatures',
  protocol: 'Executor callback',
  checks: [
    ...REJECTED.map(rejectionCheck),
    ...ACCEPTED.map(acceptanceCheck),
    {
      name: 'the signature is checked before the body is parsed: a badly signed malformed body is 401',
      async run(ctx) {
        const task = await runningTask(ctx);
        const res = await ctx.exec.send(task.id, null, { body: '{"type":', secret: otherSecret() });
        assertError(res, 401, 'unauthorized');
      },
    },
    {
      name: 'a replayed callback (same id, body and signature) is duplicate-callback within the window',
      async run(ctx) {
        const task = await runningTask(ctx);
        const id = uid('cb');
        const timestamp = nowSeconds(-60);
        const event = progress(500, 10);
        await ctx.exec.apply(task.id, event, { id, timestamp });
        const t = await ctx.exec.apply(task.id, event, { id, timestamp });
        assertMatches(t, { changed: false, reason: 'duplicate-callback', duplicateCallback: true, version: 2 });
      },
    },
  ],
};

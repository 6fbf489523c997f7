// Tests of the suite's own helpers, without a backend:
//   node --test tests/conformance/self.test.mjs

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sign } from './lib/sign.mjs';
import { SseParser } from './lib/sse.mjs';
import { assertAnswer, assertMatches } from './lib/match.mjs';
import { changes } from './lib/events.mjs';
import { checkConfig } from './lib/config.mjs';

test('sign: the Standard Webhooks reference vector', () => {
  // From the Standard Webhooks reference libraries' tests.
  const sig = sign('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
  assert.equal(sig, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
});

test('SseParser: messages, comments, CRLF, multi-line data, split chunks', () => {
  const p = new SseParser();
  const text = ': hb\r\nevent: resume\r\nid: 5\r\ndata: {"a":\r\ndata: 1}\r\n\r\n: hb\n\nevent:resume\nid:6\ndata:x\n\n';
  const out = [];
  for (const ch of text) out.push(...p.push(ch));
  assert.deepEqual(out, [
    { event: 'resume', id: '5', data: '{"a":\n1}' },
    { event: 'resume', id: '6', data: 'x' },
  ]);
  assert.deepEqual(p.comments, ['hb', 'hb']);
});

test('assertMatches: null means absent, arrays by length, extra keys allowed', () => {
  assertMatches({ a: 1, b: { c: 2, d: 3 } }, { b: { c: 2 }, e: null });
  assert.throws(() => assertMatches({ e: 1 }, { e: null }), /expected absent/);
  assert.throws(() => assertMatches([1, 2], [1]), /expected 1 elements/);
});

test('assertAnswer: a delta must end at the task version, consecutively', () => {
  const task = { id: 't', state: 'running', expiresAtMs: 1, attempts: 1, maxAttempts: 1, progress: 0, version: 3 };
  const e = (version) => ({ version, event: { type: 'start', atMs: 1, worker: 'w' } });
  assertAnswer({ mode: 'delta', events: [e(2), e(3)], task }, { versions: [2, 3] });
  assert.throws(() => assertAnswer({ mode: 'delta', events: [e(1), e(3)], task }), /consecutive/);
  assert.throws(() => assertAnswer({ mode: 'delta', events: [e(2)], task }), /task's version/);
  assert.throws(() => assertAnswer({ mode: 'caught-up', events: [], task: { ...task, history: [] } }), /history/);
});

test('changes(n): one changing event per version, retrying past progress 99', () => {
  const evs = changes(203);
  assert.equal(evs.length, 203);
  assert.equal(evs[0].type, 'start');
  assert.equal(evs[100].type, 'fail');
  assert.equal(evs[101].type, 'start');
  assert.equal(evs[102].progress, 1);
});

test('checkConfig: defaults and refusals', () => {
  const base = { baseUrl: 'http://127.0.0.1:8080/', token: 't', secret: 'whsec_c2VjcmV0', tenant: 'acme' };
  assert.deepEqual(checkConfig(base), { baseUrl: 'http://127.0.0.1:8080', token: 't', tokenB: null, secret: 'whsec_c2VjcmV0', secretB: null, retention: 8, corsOrigin: null, concurrency: 32, browserKeys: [], browserKeyB: null, browserAudience: 'taskwire', tenant: 'acme', noWorkers: false, noOutput: false, sharedSecret: false, tokenSkewSecs: 30, tokenMaxLifetimeSecs: 3600, strict: false, only: null });
  // The token checks' skew and lifetime, --only and --strict.
  assert.deepEqual(
    [checkConfig({ ...base, tokenSkewSecs: '0', tokenMaxLifetimeSecs: '60', strict: true, only: 'leases' })].map((c) => [c.tokenSkewSecs, c.tokenMaxLifetimeSecs, c.strict, c.only.test('Lifecycle: leases: x')]),
    [[0, 60, true, true]],
  );
  assert.throws(() => checkConfig({ ...base, tokenSkewSecs: '301' }), /--token-skew-secs/);
  assert.throws(() => checkConfig({ ...base, tokenMaxLifetimeSecs: '1.5' }), /--token-max-lifetime-secs/);
  assert.throws(() => checkConfig({ ...base, only: '(' }), /--only/);
  // The worker checks are required: they need tenant A's name, unless the
  // backend is declared to offer no workers.
  assert.throws(() => checkConfig({ ...base, tenant: undefined }), /--tenant.*--no-workers/s);
  assert.deepEqual(
    [checkConfig({ ...base, tenant: undefined, noWorkers: true })].map((c) => [c.tenant, c.noWorkers]),
    [[null, true]],
  );
  assert.throws(() => checkConfig({ ...base, tenant: '  ' }), /--tenant/);
  assert.throws(() => checkConfig({ ...base, sharedSecret: true }), /--shared-secret/);
  assert.throws(() => checkConfig({ ...base, sharedSecret: true, tokenB: 'u', secretB: 'whsec_Yg==' }), /--shared-secret/);
  assert.equal(checkConfig({ ...base, sharedSecret: true, tokenB: 'u' }).sharedSecret, true);
  assert.throws(() => checkConfig({ ...base, secretB: 'whsec_Yg==' }), /--token-b/);
  assert.throws(() => checkConfig({ ...base, tokenB: 'u', secretB: base.secret }), /another secret/);
  assert.equal(checkConfig({ ...base, tokenB: 'u', secretB: 'whsec_Yg==' }).secretB, 'whsec_Yg==');
  assert.throws(() => checkConfig({ ...base, secret: 'nope' }), /whsec_/);
  assert.throws(() => checkConfig({ ...base, retention: '1' }), /retention/);
  assert.equal(checkConfig({ ...base, retention: '2' }).retention, 2);
  assert.throws(() => checkConfig({ ...base, tokenB: 't' }), /another tenant/);
  // Browser-token keys: KID=BASE64 of at least 32 bytes; B's needs tenant B.
  const key = `k1=${Buffer.alloc(32, 7).toString('base64')}`;
  assert.deepEqual(checkConfig({ ...base, browserKeys: [key] }).browserKeys, [{ kid: 'k1', secret: Buffer.alloc(32, 7) }]);
  assert.throws(() => checkConfig({ ...base, browserKeys: ['k1=c2hvcnQ='] }), /at least 32 bytes/);
  assert.throws(() => checkConfig({ ...base, browserKeys: ['no-secret'] }), /KID=BASE64SECRET/);
  assert.throws(() => checkConfig({ ...base, browserKeyB: key }), /--token-b/);
  assert.equal(checkConfig({ ...base, concurrency: '4' }).concurrency, 4);
  assert.throws(() => checkConfig({ ...base, concurrency: '0' }), /concurrency/);
});

test('configFrom: --tenant, --no-workers and --shared-secret, as flags or environment', async () => {
  const { configFrom, UsageError } = await import('./lib/config.mjs');
  const argv = ['http://127.0.0.1:8080', '--token', 't', '--callback-secret', 'whsec_c2VjcmV0'];
  assert.throws(() => configFrom(argv, {}), UsageError);
  assert.equal(configFrom([...argv, '--tenant', 'acme'], {}).tenant, 'acme');
  assert.equal(configFrom(argv, { TASKWIRE_TENANT: 'acme' }).tenant, 'acme');
  assert.equal(configFrom([...argv, '--no-workers'], {}).noWorkers, true);
  assert.equal(configFrom(argv, { TASKWIRE_NO_WORKERS: '1' }).noWorkers, true);
  assert.equal(configFrom([...argv, '--no-workers', '--no-output'], {}).noOutput, true);
  assert.equal(configFrom(argv, { TASKWIRE_NO_WORKERS: '1', TASKWIRE_NO_OUTPUT: '1' }).noOutput, true);
  assert.throws(() => configFrom(argv, { TASKWIRE_NO_WORKERS: '0' }), /--no-workers/);
  assert.throws(() => configFrom(argv, { TASKWIRE_NO_WORKERS: 'yes' }), /TASKWIRE_NO_WORKERS/);
  const shared = configFrom([...argv, '--tenant', 'acme', '--token-b', 'u', '--shared-secret'], {});
  assert.equal(shared.sharedSecret, true);
  assert.equal(configFrom([...argv, '--tenant', 'acme'], { TASKWIRE_SHARED_SECRET: '' }).sharedSecret, false);
});

test('Slots: at most n at once, in arrival order', async () => {
  const { Slots } = await import('./suite.mjs');
  const slots = new Slots(2);
  const order = [];
  let running = 0;
  let peak = 0;
  await Promise.all([1, 2, 3, 4, 5].map(async (n) => {
    await slots.acquire();
    running += 1;
    peak = Math.max(peak, running);
    order.push(n);
    await new Promise((r) => setTimeout(r, 5));
    running -= 1;
    slots.release();
  }));
  assert.equal(peak, 2);
  assert.deepEqual(order, [1, 2, 3, 4, 5]);
});

test('every section names a PROTOCOL.md heading that exists (the rule a failing check prints)', async () => {
  const { readFileSync } = await import('node:fs');
  const { SECTIONS } = await import('./suite.mjs');
  const text = readFileSync(new URL('../../PROTOCOL.md', import.meta.url), 'utf8');
  const paths = new Set();
  let top = null;
  for (const line of text.split('\n')) {
    const h2 = /^## (.+)$/.exec(line);
    const h3 = /^### (.+)$/.exec(line);
    if (h2) paths.add((top = h2[1].trim()));
    else if (h3 && top) paths.add(`${top} › ${h3[1].trim()}`);
  }
  for (const section of SECTIONS) {
    assert.ok(paths.has(section.protocol), `section "${section.section}" names PROTOCOL.md §${section.protocol}, which is not a heading`);
  }
});

test('transitions: literal tasks are built with events when some sequence reaches them', async () => {
  const { recipe } = await import('./checks/transitions.mjs');
  const task = (fields) => ({ id: 'f', expiresAtMs: 1000, maxAttempts: 2, progress: 0, attempts: 0, version: 0, ...fields });
  assert.deepEqual(recipe(task({ state: 'queued' })), []);
  assert.deepEqual(recipe(task({ state: 'running', attempts: 2, progress: 40 })).map((e) => e.type), ['start', 'fail', 'start', 'progress']);
  assert.deepEqual(recipe(task({ state: 'expired' })).map((e) => e.type), ['expire']);
  // A queued task out of attempts (what not-startable needs) is out of reach.
  assert.equal(recipe(task({ state: 'queued', attempts: 2 })), null);
  assert.equal(recipe(task({ state: 'succeeded', attempts: 1, progress: 40 })), null);
});

test('Http: an idempotent request whose connection closed unanswered is sent once more; a POST is not', async () => {
  const { createServer } = await import('node:http');
  const { Http, Transcript } = await import('./lib/http.mjs');
  const seen = [];
  // Each method's first request loses its connection before any answer
  // (as a keep-alive connection the server closes while it is reused).
  const server = createServer((req, res) => {
    const first = !seen.includes(req.method);
    seen.push(req.method);
    if (first) return req.socket.destroy();
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const transcript = new Transcript();
    const http = new Http(`http://127.0.0.1:${server.address().port}`, { transcript });
    const res = await http.request('DELETE', '/v1/tasks/t');
    assert.equal(res.status, 200);
    assert.deepEqual(seen, ['DELETE', 'DELETE']);
    assert.equal(transcript.entries.length, 2);
    assert.match(transcript.entries[0].error, /socket hang up|other side closed|ECONNRESET/);
    await assert.rejects(http.request('POST', '/v1/tasks', { json: {} }), /POST \/v1\/tasks: request failed/);
    assert.deepEqual(seen, ['DELETE', 'DELETE', 'POST']);
  } finally {
    server.close();
  }
});

// PROTOCOL.md §CORS: what every answer to a configured origin carries
// (not only preflights), and the methods a preflight allows. Runs only
// with --cors-origin.

import assert from 'node:assert/strict';

const OTHER_ORIGIN = 'https://not-configured.invalid';
const list = (value) => (value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);

function assertAllowed(res, origin, what) {
  const allowOrigin = res.headers.get('access-control-allow-origin');
  assert.ok(allowOrigin === origin || allowOrigin === '*',
    `${what}: Access-Control-Allow-Origin must be the origin on an actual response, got ${JSON.stringify(allowOrigin)}`);
  if (allowOrigin !== '*') {
    assert.ok(list(res.headers.get('vary')).includes('origin'), `${what}: Vary must include Origin, got ${JSON.stringify(res.headers.get('vary'))}`);
  }
  const exposed = list(res.headers.get('access-control-expose-headers'));
  assert.ok(exposed.includes('retry-after') || exposed.includes('*'),
    `${what}: Access-Control-Expose-Headers must include Retry-After (the client reads it on 503), got ${JSON.stringify(exposed)}`);
}

export default {
  section: 'CORS: actual responses and methods',
  protocol: 'CORS',
  checks: [
    {
      name: 'every answer to a configured origin carries Access-Control-Allow-Origin, Vary: Origin and exposes Retry-After, errors included',
      needsCorsOrigin: true,
      async run({ a, anon, config }) {
        const origin = config.corsOrigin;
        const headers = { origin };
        const task = await a.createTask({ ttlMs: 60_000, maxAttempts: 1 }, { headers });
        const cases = [
          ['GET task (200)', await a.http.request('GET', `/v1/tasks/${task.id}`, { headers })],
          ['create (201)', await a.create({ ttlMs: 60_000, maxAttempts: 1 }, { headers })],
          ['resume (200)', await a.http.request('GET', `/v1/tasks/${task.id}/resume?cursor=0`, { headers })],
          ['no bearer (401)', await anon.http.request('GET', '/v1/notifications', { headers })],
          ['unknown task (404)', await a.http.request('GET', '/v1/tasks/no-such-task-cors', { headers })],
          ['bad cursor (400)', await a.http.request('GET', `/v1/tasks/${task.id}/resume?cursor=x`, { headers })],
          ['delivery without result (409)', await a.http.request('POST', `/v1/tasks/${task.id}/deliveries`, { headers: { ...headers, 'idempotency-key': 'k-cors' } })],
        ];
        for (const [what, res] of cases) assertAllowed(res, origin, what);
      },
    },
    {
      name: 'a preflight allows GET, POST and OPTIONS on any path; another origin gets no allowance on actual responses',
      needsCorsOrigin: true,
      async run({ a, config }) {
        const res = await a.http.request('OPTIONS', '/v1/tasks/any/resume?cursor=0', {
          token: null,
          headers: { origin: config.corsOrigin, 'access-control-request-method': 'GET' },
        });
        assert.ok(res.status >= 200 && res.status < 300, `preflight: expected 2xx, got ${res.status}`);
        const methods = list(res.headers.get('access-control-allow-methods'));
        for (const m of ['get', 'post', 'options']) {
          assert.ok(methods.includes(m) || methods.includes('*'), `preflight: Access-Control-Allow-Methods ${JSON.stringify(methods)} lacks ${m.toUpperCase()}`);
        }
        if (config.corsOrigin === '*') return;
        const other = await a.http.request('GET', '/v1/notifications', { headers: { origin: OTHER_ORIGIN } });
        assert.equal(other.status, 200);
        const allowOrigin = other.headers.get('access-control-allow-origin');
        assert.ok(allowOrigin !== OTHER_ORIGIN && allowOrigin !== '*', `a request from ${OTHER_ORIGIN}: Access-Control-Allow-Origin ${JSON.stringify(allowOrigin)}`);
      },
    },
  ],
};

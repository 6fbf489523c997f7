// PROTOCOL.md §CORS: preflights for configured origins allow the four
// request headers the client sends. Runs only with --cors-origin (an
// origin the backend was configured to allow).

import assert from 'node:assert/strict';

const REQUEST_HEADERS = ['authorization', 'content-type', 'idempotency-key', 'last-event-id'];
const OTHER_ORIGIN = 'https://not-configured.invalid';

const list = (value) => (value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);

function preflight(http, path, origin, method) {
  return http.request('OPTIONS', path, {
    token: null,
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': REQUEST_HEADERS.join(','),
    },
  });
}

export default {
  section: 'CORS',
  protocol: 'CORS',
  checks: [
    {
      name: 'preflights from a configured origin allow the method and Authorization, Content-Type, Idempotency-Key, Last-Event-ID',
      needsCorsOrigin: true,
      async run({ a, config }) {
        const origin = config.corsOrigin;
        const id = 'any-task-id';
        for (const [method, path] of [
          ['POST', '/v1/tasks'],
          ['GET', `/v1/tasks/${id}`],
          ['GET', `/v1/tasks/${id}/resume?cursor=0`],
          ['GET', `/v1/tasks/${id}/events`],
          ['POST', `/v1/tasks/${id}/deliveries`],
          ['GET', '/v1/notifications'],
        ]) {
          const res = await preflight(a.http, path, origin, method);
          const what = `preflight ${method} ${path}`;
          assert.ok(res.status >= 200 && res.status < 300, `${what}: expected 2xx, got ${res.status}`);
          const allowOrigin = res.headers.get('access-control-allow-origin');
          assert.ok(allowOrigin === origin || allowOrigin === '*', `${what}: Access-Control-Allow-Origin ${JSON.stringify(allowOrigin)}`);
          const methods = list(res.headers.get('access-control-allow-methods'));
          assert.ok(methods.includes(method.toLowerCase()) || methods.includes('*'), `${what}: Access-Control-Allow-Methods ${JSON.stringify(methods)}`);
          const allowed = list(res.headers.get('access-control-allow-headers'));
          for (const h of REQUEST_HEADERS) {
            // A wildcard never covers Authorization (Fetch standard).
            const ok = allowed.includes(h) || (h !== 'authorization' && allowed.includes('*'));
            assert.ok(ok, `${what}: Access-Control-Allow-Headers ${JSON.stringify(allowed)} lacks ${h}`);
          }
        }
        const res = await a.http.request('GET', '/v1/notifications', { headers: { origin } });
        assert.equal(res.status, 200);
        const allowOrigin = res.headers.get('access-control-allow-origin');
        assert.ok(allowOrigin === origin || allowOrigin === '*', `a request from the origin: Access-Control-Allow-Origin ${JSON.stringify(allowOrigin)}`);
      },
    },
    {
      name: 'an origin that is not configured is not allowed',
      needsCorsOrigin: true,
      async run({ a, config }) {
        if (config.corsOrigin === '*') return;
        const res = await preflight(a.http, '/v1/notifications', OTHER_ORIGIN, 'GET');
        const allowOrigin = res.headers.get('access-control-allow-origin');
        assert.ok(allowOrigin !== OTHER_ORIGIN && allowOrigin !== '*', `preflight from ${OTHER_ORIGIN}: Access-Control-Allow-Origin ${JSON.stringify(allowOrigin)}`);
      },
    },
  ],
};

// The suite fails every deliberate misreading, naming the rule:
//
//   node --test tests/conformance/misreadings.test.mjs
//
// Starts the Node backend once per misreading (TASKWIRE_MISREAD, see
// examples/node-backend/misread.mjs) through local.mjs, runs only the
// checks of that rule (--only), and asserts that the run fails and that
// the failing check is the one that names the rule: its PROTOCOL.md
// section and its name. A first run with no misreading, over every
// selected check at once, proves that they pass when the rule is kept,
// so each failure below is the misreading's. --strict: a known deviation
// of the reference server counts here (the Node backend keeps that rule).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { MISREADINGS } from '../../examples/node-backend/misread.mjs';

const LOCAL = fileURLToPath(new URL('./local.mjs', import.meta.url));
const BACKEND = `node ${fileURLToPath(new URL('../../examples/node-backend/server.mjs', import.meta.url))}`;

/** Each misreading: the PROTOCOL.md section and the name of the check that must fail. */
const CAUGHT_BY = {
  'token-no-max-lifetime': ['Credentials', 'the maximum lifetime: an exp up to lifetime + skew ahead is accepted'],
  'token-no-exp-skew': ['Credentials', 'exp and nbf allow the skew'],
  'token-exactly-one-scope': ['Credentials', 'scope: a token with both tasks and batch covers each on its own routes'],
  'token-no-claim-limits': ['Credentials', 'claim limits: more than 100 task ids'],
  'authorization-last-wins': ['Credentials', 'Authorization sent twice: the first counts'],
  'sse-outlives-token': ['Credentials', 'an SSE stream opened with a browser token ends when the token stops being accepted'],
  'start-recovers-unknown': ['Lifecycle › Leases', 'in unknown, a start of the current attempt is already-running'],
  'stale-progress-no-renew': ['Lifecycle › Leases', 'a stale progress of the current attempt still renews the lease'],
  'sweeper-notifies-at-now': ['Lifecycle › The sweeper', 'the notification of a task the sweeper ended'],
  'cancel-requested-in-ineffective': ['Lifecycle › Fencing', '§Cancel: cancelRequested is true only in cancelling'],
  'resume-task-with-input': ['Resume', 'every answer carries the task: exactly the fields GET shows'],
  'callback-task-id-optional': ['Executor callback › Secrets and binding', 'a body that names no task, or names it with a non-string'],
};

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Runs local.mjs against the Node backend with `misread` ('' for none) and the checks matching `only`. */
function runSuite(misread, only) {
  return new Promise((resolve, reject) => {
    const args = [LOCAL, '--server', BACKEND, '--no-workers', '--memory-only', '--strict', '--only', only];
    // Without NODE_TEST_CONTEXT, which node --test sets for its children:
    // the suite's own runner would answer in node:test's wire format
    // instead of the spec reporter's text.
    const { NODE_TEST_CONTEXT, ...env } = process.env;
    const child = spawn(process.execPath, args, {
      env: { ...env, TASKWIRE_MISREAD: misread, TASKWIRE_CONCURRENCY: '8' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c) => (output += c));
    child.stderr.on('data', (c) => (output += c));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}

test('every misreading of misread.mjs has a check that catches it', () => {
  assert.deepEqual(Object.keys(CAUGHT_BY).sort(), Object.keys(MISREADINGS).sort());
});

test('without a misreading, every selected check passes against the Node backend', { timeout: 120_000 }, async () => {
  const only = Object.values(CAUGHT_BY).map(([, name]) => escape(name)).join('|');
  const { code, output } = await runSuite('', only);
  assert.equal(code, 0, `the checks fail against the Node backend as it is:\n${output.slice(-4000)}`);
  for (const [, name] of Object.values(CAUGHT_BY)) assert.match(output, new RegExp(`✔ ${escape(name)}`), `${name}: did not run`);
});

// Four backends at a time: each run mostly waits (leases, a token's expiry).
describe('each misreading fails the check of its rule', { concurrency: 4 }, () => {
  for (const [misread, [protocol, name]] of Object.entries(CAUGHT_BY)) {
    test(`${misread} (${MISREADINGS[misread]}) fails "${name}"`, { timeout: 120_000 }, async () => {
      const { code, output } = await runSuite(misread, escape(name));
      assert.match(output, new RegExp(`TASKWIRE_MISREAD=${misread}`), 'the backend did not announce the misreading');
      assert.notEqual(code, 0, `the suite passed against a backend that misreads ${MISREADINGS[misread]}:\n${output.slice(-3000)}`);
      assert.ok(
        output.includes(`PROTOCOL.md §${protocol}: ${name}`),
        `the failure does not name the rule (PROTOCOL.md §${protocol}: ${name}…):\n${output.slice(-3000)}`,
      );
    });
  }
});

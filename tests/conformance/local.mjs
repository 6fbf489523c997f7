#!/usr/bin/env node
// Starts a backend on a free port with a fresh data directory, runs the
// conformance suite against it, stops it, and exits with the suite's code:
//
//   node tests/conformance/local.mjs --server target/debug/taskwire-server
//   node tests/conformance/local.mjs --server "node examples/node-backend/server.mjs"
//
// The backend is started as
//   <server> --listen 127.0.0.1:PORT --data DIR --token TA=tenant-a
//            --token TB=tenant-b --callback-secret tenant-a=whsec_…
//            --callback-secret tenant-b=whsec_… --retention N
//            --browser-token-key tenant-a:ka1=HS256:… (and ka2, a rotation)
//            --browser-token-key tenant-b:kb1=HS256:…
// with fresh random tokens, secrets and keys (per tenant), DIR an empty
// directory (--shared-secret: one bare --callback-secret whsec_… shared by
// both tenants instead). The suite is told tenant A's name (the claim's
// taskwire-tenant); --no-workers is passed on to it. Its output goes to server.log next to DIR, printed on failure.
// Before the suite, the backend is restarted once on its data: the epoch
// of a task created before must be the same after (PROTOCOL.md §Epoch).
// A memory-only backend (--memory-only: started without --data) keeps
// nothing across a restart, so that check is skipped, saying so.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const USAGE = `usage: node tests/conformance/local.mjs --server "<command>" [--retention N] [--no-workers] [--no-output] [--memory-only] [--keep]

  --server CMD     the backend command (split on spaces), started with
                   --listen/--data/--token/--callback-secret/--retention/
                   --browser-token-key
  --retention N    passed to the backend and the suite (default 8)
  --cors-origin O  passed to the backend and the suite (runs the CORS checks)
  --no-workers     the backend offers no workers (no POST /v1/work/claim):
                   the suite skips the claim checks (required otherwise)
  --no-output      the backend offers no live output (no POST
                   /v1/tasks/{id}/output/{stream}): the suite skips its checks
  --shared-secret  one callback secret shared by both tenants, none of
                   their own (runs the shared fleet's claim check)
  --memory-only    the backend keeps its data in memory only: started
                   without --data, and the restart check (the epoch kept
                   across a restart) is skipped, saying so
  --token-skew-secs N, --token-max-lifetime-secs N
                   the browser tokens' skew and maximum lifetime, passed
                   to the backend (--browser-token-leeway-secs,
                   --browser-token-max-ttl-secs) and the suite
                   (default 30 and 3600)
  --only REGEX     run only the checks whose "section: name" matches
  --strict         known deviations of the reference server fail too
  --keep           keep the temporary directory (data and server.log)
  --startup-ms N   how long the backend may take to answer (default 20000)`;

function options() {
  try {
    const { values } = parseArgs({
      options: {
        server: { type: 'string' },
        retention: { type: 'string', default: '8' },
        'cors-origin': { type: 'string' },
        'no-workers': { type: 'boolean', default: false },
        'no-output': { type: 'boolean', default: false },
        'shared-secret': { type: 'boolean', default: false },
        'memory-only': { type: 'boolean', default: false },
        'token-skew-secs': { type: 'string', default: '30' },
        'token-max-lifetime-secs': { type: 'string', default: '3600' },
        only: { type: 'string' },
        strict: { type: 'boolean', default: false },
        keep: { type: 'boolean', default: false },
        'startup-ms': { type: 'string', default: '20000' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help || !values.server) throw new Error(values.help ? '' : '--server is required');
    return values;
  } catch (err) {
    if (err.message) console.error(`error: ${err.message}\n`);
    console.error(USAGE);
    process.exit(2);
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Hex after a prefix: a value starting with '-' would read as a flag.
const token = () => `tok_${randomBytes(16).toString('hex')}`;

/** Waits until the backend answers an authenticated request (any HTTP status). */
async function waitUntilUp(baseUrl, auth, server, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.exitCode !== null || server.signalCode !== null) {
      throw new Error(`the backend exited during startup (${server.exitCode ?? server.signalCode})`);
    }
    try {
      await fetch(`${baseUrl}/v1/notifications`, {
        headers: { authorization: `Bearer ${auth}` },
        signal: AbortSignal.timeout(1000),
      });
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`the backend did not answer within ${timeoutMs} ms`);
}

function stop(child, graceMs = 5000) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Creates a task; its id and the epoch of the create answer. */
async function epochAfterCreate(baseUrl, auth) {
  const res = await fetch(`${baseUrl}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ttlMs: 3_600_000, maxAttempts: 1 }),
  });
  const task = await res.json();
  if (res.status !== 201 || typeof task.epoch !== 'string') {
    throw new Error(`PROTOCOL.md §Epoch: a create answer carries the epoch; got ${res.status} ${JSON.stringify(task)}`);
  }
  return { id: task.id, epoch: task.epoch };
}

/** The epoch of GET task `id`. */
async function epochOf(baseUrl, auth, id) {
  const res = await fetch(`${baseUrl}/v1/tasks/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${auth}` } });
  return (await res.json()).epoch;
}

/**
 * PROTOCOL.md §Epoch: a restart keeps the store's history, so its epoch.
 * Checked here, where the backend can be restarted. `launch` starts the
 * backend again (and records the new process, so that it is stopped
 * whatever happens next).
 */
async function restartKeepsEpoch(baseUrl, auth, server, launch, startupMs) {
  const before = await epochAfterCreate(baseUrl, auth);
  await stop(server);
  const restarted = launch();
  await waitUntilUp(baseUrl, auth, restarted, startupMs);
  const after = await epochOf(baseUrl, auth, before.id);
  if (after !== before.epoch) {
    throw new Error(
      `PROTOCOL.md §Epoch: a restart must keep the epoch: ${JSON.stringify(before.epoch)} before, ${JSON.stringify(after)} after ` +
        '(a backend that keeps its data in memory only: pass --memory-only)',
    );
  }
  console.log(`epoch ${before.epoch} survived a restart`);
}

async function main() {
  const opts = options();
  const [command, ...commandArgs] = opts.server.trim().split(/\s+/);
  const port = await freePort();
  const root = await mkdtemp(join(tmpdir(), 'taskwire-conformance-'));
  const data = join(root, 'data');
  await mkdir(data);
  const baseUrl = `http://127.0.0.1:${port}`;
  const config = {
    TASKWIRE_TOKEN: token(),
    TASKWIRE_TOKEN_B: token(),
    TASKWIRE_CALLBACK_SECRET: `whsec_${randomBytes(32).toString('base64')}`,
    TASKWIRE_CALLBACK_SECRET_B: `whsec_${randomBytes(32).toString('base64')}`,
    TASKWIRE_RETENTION: opts.retention,
    TASKWIRE_TENANT: 'tenant-a',
  };
  config.TASKWIRE_NO_WORKERS = opts['no-workers'] ? '1' : '0';
  config.TASKWIRE_NO_OUTPUT = opts['no-output'] ? '1' : '0';
  config.TASKWIRE_SHARED_SECRET = opts['shared-secret'] ? '1' : '0';
  config.TASKWIRE_TOKEN_SKEW_SECS = opts['token-skew-secs'];
  config.TASKWIRE_TOKEN_MAX_LIFETIME_SECS = opts['token-max-lifetime-secs'];
  config.TASKWIRE_STRICT = opts.strict ? '1' : '0';
  if (opts.only) config.TASKWIRE_ONLY = opts.only;
  const secrets = opts['shared-secret']
    ? ['--callback-secret', config.TASKWIRE_CALLBACK_SECRET]
    : [
        '--callback-secret', `tenant-a=${config.TASKWIRE_CALLBACK_SECRET}`,
        '--callback-secret', `tenant-b=${config.TASKWIRE_CALLBACK_SECRET_B}`,
      ];
  // Empty rather than absent: the suite's environment is this one's plus these.
  if (opts['shared-secret']) config.TASKWIRE_CALLBACK_SECRET_B = '';
  // Browser-token keys: two of tenant A's at once (a rotation), one of B's.
  const keys = { ka1: randomBytes(32), ka2: randomBytes(32), kb1: randomBytes(32) };
  config.TASKWIRE_BROWSER_KEY = ['ka1', 'ka2'].map((kid) => `${kid}=${keys[kid].toString('base64')}`).join(',');
  config.TASKWIRE_BROWSER_KEY_B = `kb1=${keys.kb1.toString('base64')}`;
  const args = [
    ...commandArgs,
    '--listen', `127.0.0.1:${port}`,
    ...(opts['memory-only'] ? [] : ['--data', data]),
    '--token', `${config.TASKWIRE_TOKEN}=tenant-a`,
    '--token', `${config.TASKWIRE_TOKEN_B}=tenant-b`,
    ...secrets,
    '--retention', opts.retention,
    '--browser-token-key', `tenant-a:ka1=HS256:${keys.ka1.toString('base64')}`,
    '--browser-token-key', `tenant-a:ka2=HS256:${keys.ka2.toString('base64')}`,
    '--browser-token-key', `tenant-b:kb1=HS256:${keys.kb1.toString('base64')}`,
    '--browser-token-leeway-secs', opts['token-skew-secs'],
    '--browser-token-max-ttl-secs', opts['token-max-lifetime-secs'],
    ...(opts['cors-origin'] ? ['--cors-origin', opts['cors-origin']] : []),
  ];
  if (opts['cors-origin']) config.TASKWIRE_CORS_ORIGIN = opts['cors-origin'];
  const logPath = join(root, 'server.log');
  const log = createWriteStream(logPath);
  console.log(`starting ${command} on ${baseUrl} (${opts['memory-only'] ? 'memory only' : `data ${data}`})`);
  const launch = () => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    return child;
  };
  let server = launch();
  // Interrupted: do not leave the backend running.
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      server.kill('SIGKILL');
      process.exit(130);
    });
  }
  const spawned = new Promise((resolve, reject) => {
    server.once('spawn', resolve);
    server.once('error', reject);
  });

  let code = 1;
  let started = false;
  try {
    await spawned;
    started = true;
    await waitUntilUp(baseUrl, config.TASKWIRE_TOKEN, server, Number(opts['startup-ms']));
    if (opts['memory-only']) {
      console.log('restart check skipped: --memory-only (the backend keeps nothing across a restart, so its epoch is new at every start: PROTOCOL.md §Epoch)');
    } else {
      const relaunch = () => (server = launch());
      await restartKeepsEpoch(baseUrl, config.TASKWIRE_TOKEN, server, relaunch, Number(opts['startup-ms']));
    }
    // The suite runs as its own process (run.mjs), exactly as it runs
    // against any backend, configured by environment as a CI job would.
    const run = fileURLToPath(new URL('./run.mjs', import.meta.url));
    const suite = spawn(process.execPath, [run, baseUrl], {
      stdio: 'inherit',
      env: { ...process.env, ...config },
    });
    code = await new Promise((resolve) => suite.on('exit', (c) => resolve(c ?? 1)));
  } catch (err) {
    console.error(`error: ${err.message}`);
  } finally {
    const exitedEarly = started && (server.exitCode !== null || server.signalCode !== null);
    await stop(server);
    await new Promise((r) => log.end(r));
    if (started && (code !== 0 || exitedEarly)) {
      const text = await readFile(logPath, 'utf8').catch(() => '');
      const tail = text.split('\n').slice(-40).join('\n');
      console.error(`\n── backend output (last 40 lines of ${logPath}) ──\n${tail}`);
      if (exitedEarly) {
        console.error(`the backend exited before the end (${server.exitCode ?? server.signalCode})`);
        code = code || 1;
      }
    }
    if (opts.keep) console.error(`kept ${root}`);
    else await rm(root, { recursive: true, force: true });
  }
  process.exit(code);
}

await main();

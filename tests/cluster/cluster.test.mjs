// Two taskwire-server instances on one PostgreSQL database, as a
// deployment runs them behind one address:
//
//   - the conformance suite passes against each instance (both at once,
//     each with its own two tenants);
//   - a browser client (the npm package's TaskClient, through a small
//     round-robin TCP proxy) whose instance is SIGKILLed reconnects to the
//     other and resumes by delta, long-poll and SSE.
//
// PostgreSQL comes from scripts/pg.sh (a throwaway server in a temp dir).
// Needs the server binary (TASKWIRE_SERVER, else
// $CARGO_TARGET_DIR/debug/taskwire-server) and the package build
// (dist/client/node.js: `npm run build`).
//
//   node --test tests/cluster/

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { callbackBody, signedHeaders } from '../conformance/lib/sign.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SERVER =
  process.env.TASKWIRE_SERVER ??
  join(resolve(ROOT, process.env.CARGO_TARGET_DIR ?? 'target'), 'debug', 'taskwire-server');
const CLIENT = join(ROOT, 'dist', 'client', 'node.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const token = () => `tok_${randomBytes(12).toString('hex')}`;
const TOKENS = { a: token(), b: token(), c: token(), d: token() };
// Each tenant signs its callbacks with its own secret.
const SECRETS = Object.fromEntries(Object.keys(TOKENS).map((t) => [t, `whsec_${randomBytes(32).toString('base64')}`]));
const CORS = 'http://127.0.0.1:5173';

function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

/** Resolves with the first line a stream prints. */
function firstLine(stream) {
  return new Promise((resolveLine, reject) => {
    let text = '';
    const onData = (chunk) => {
      text += chunk;
      const nl = text.indexOf('\n');
      if (nl >= 0) {
        stream.off('data', onData);
        stream.resume(); // keep draining
        resolveLine(text.slice(0, nl));
      }
    };
    stream.setEncoding('utf8');
    stream.on('data', onData);
    stream.once('end', () => reject(new Error(`ended before a line: ${text}`)));
  });
}

/** scripts/pg.sh run: the server lives until we close its stdin. */
async function startPostgres() {
  const port = await freePort();
  const dir = join(tmpdir(), `taskwire-pg-cluster-${process.pid}-${Date.now()}`);
  const child = spawn('bash', [join(ROOT, 'scripts', 'pg.sh'), 'run', dir, String(port)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await firstLine(child.stdout);
  assert.match(line, /^ready postgres:\/\//, 'scripts/pg.sh started PostgreSQL');
  return {
    url: line.slice('ready '.length),
    stop: () =>
      new Promise((done) => {
        if (child.exitCode !== null) return done();
        child.once('exit', done);
        child.stdin.end();
      }),
  };
}

/** One taskwire-server instance on `port` against `url`. */
async function startInstance(url, port) {
  const child = spawn(
    SERVER,
    [
      '--listen', `127.0.0.1:${port}`,
      '--data', url,
      '--token', `${TOKENS.a}=tenant-a`,
      '--token', `${TOKENS.b}=tenant-b`,
      '--token', `${TOKENS.c}=tenant-c`,
      '--token', `${TOKENS.d}=tenant-d`,
      ...Object.entries(SECRETS).flatMap(([t, s]) => ['--callback-secret', `tenant-${t}=${s}`]),
      '--retention', '8',
      '--cors-origin', CORS,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const line = await firstLine(child.stdout);
  assert.match(line, /listening on/, `instance on ${port} started`);
  return { child, port, base: `http://127.0.0.1:${port}` };
}

function stopInstance(inst, signal = 'SIGTERM') {
  if (!inst || inst.child.exitCode !== null || inst.child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    inst.child.once('exit', done);
    inst.child.kill(signal);
  });
}

/**
 * A round-robin TCP proxy over the instances: each new connection goes to
 * the next instance that accepts it. `live()` tells which instances the
 * open connections are on, `latest()` where the last request went.
 */
async function roundRobinProxy(ports) {
  let next = 0;
  const open = new Map();
  const server = createServer((down) => {
    down.on('error', () => {});
    const attempt = (tries) => {
      const i = next++ % ports.length;
      const up = connect(ports[i], '127.0.0.1');
      let connected = false;
      up.once('connect', () => {
        connected = true;
        const conn = { i, lastRequest: 0 };
        open.set(down, conn);
        down.on('data', () => (conn.lastRequest = performance.now()));
        down.pipe(up);
        up.pipe(down);
        up.on('close', () => down.destroy());
        down.on('close', () => {
          open.delete(down);
          up.destroy();
        });
      });
      up.on('error', () => {
        // A dead instance refuses: try the next one.
        if (!connected && tries < ports.length) attempt(tries + 1);
        else down.destroy();
      });
    };
    attempt(1);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    live: () => [...new Set([...open.values()].map((c) => c.i))],
    /** The instance of the connection that carried the latest request. */
    latest: () => [...open.values()].sort((x, y) => y.lastRequest - x.lastRequest)[0]?.i,
    close: () => {
      for (const s of open.keys()) s.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

/**
 * A callback for one of tenant A's tasks; `id` is made the task's own (a
 * tenant's callback id is refused on its other tasks).
 */
async function callback(base, taskId, id, event) {
  const body = callbackBody(taskId, event);
  const res = await fetch(`${base}/v1/tasks/${taskId}/callbacks`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...signedHeaders(SECRETS.a, `${taskId}:${id}`, body) },
    body,
  });
  assert.equal(res.status, 200, await res.clone().text());
  return res.json();
}

async function until(what, cond, ms = 10_000, detail = () => '') {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} ${detail()}`);
    await sleep(10);
  }
}

/** The environment without node:test's own markers (the suite runs as a
 * separate node:test process with its usual output). */
function childEnv() {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

function runConformance(base, [a, b]) {
  return new Promise((done) => {
    const child = spawn(process.execPath, [join(ROOT, 'tests', 'conformance', 'run.mjs'), base], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...childEnv(),
        TASKWIRE_TOKEN: TOKENS[a],
        TASKWIRE_TENANT: `tenant-${a}`,
        TASKWIRE_TOKEN_B: TOKENS[b],
        TASKWIRE_CALLBACK_SECRET: SECRETS[a],
        TASKWIRE_CALLBACK_SECRET_B: SECRETS[b],
        TASKWIRE_RETENTION: '8',
        TASKWIRE_CORS_ORIGIN: CORS,
      },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => done({ code, out }));
  });
}

describe('two instances on one PostgreSQL', { timeout: 120_000 }, () => {
  let pg;
  const instances = [];

  before(async () => {
    assert.ok(existsSync(SERVER), `server binary ${SERVER} (cargo build -p taskwire-server)`);
    pg = await startPostgres();
    const ports = [await freePort(), await freePort()];
    for (const port of ports) instances.push(await startInstance(pg.url, port));
  });

  after(async () => {
    for (const inst of instances) await stopInstance(inst);
    await pg?.stop();
  });

  test('the conformance suite passes against each instance', async () => {
    const [ra, rb] = await Promise.all([
      runConformance(instances[0].base, ['a', 'b']),
      runConformance(instances[1].base, ['c', 'd']),
    ]);
    for (const [name, r] of [['A', ra], ['B', rb]]) {
      const summary = r.out.split('\n').filter((l) => /^ℹ (tests|pass|fail|skipped)/.test(l));
      console.log(`instance ${name}: ${summary.join(', ')}`);
      assert.equal(r.code, 0, `conformance against instance ${name}:\n${r.out.slice(-6000)}`);
      assert.match(r.out, /ℹ fail 0/);
    }
  });

  for (const transport of ['long-poll', 'sse']) {
    test(`a client whose instance dies resumes on the other by delta (${transport})`, async () => {
      assert.ok(existsSync(CLIENT), `${CLIENT} (npm run build)`);
      const { TaskClient } = await import(CLIENT);
      // Both instances up (the previous case killed one).
      for (let i = 0; i < instances.length; i++) {
        const inst = instances[i];
        if (inst.child.exitCode !== null || inst.child.signalCode !== null) {
          instances[i] = await startInstance(pg.url, inst.port);
        }
      }
      const proxy = await roundRobinProxy(instances.map((i) => i.port));
      let watch;
      try {
        const client = new TaskClient({
          baseUrl: proxy.base,
          headers: { Authorization: `Bearer ${TOKENS.a}` },
          backoff: { initialMs: 20, maxMs: 200 },
          transport,
          waitMs: 10_000,
        });
        // Created directly (not through the proxy), so that the only
        // connection through the proxy is the watch's.
        const created = await fetch(`${instances[0].base}/v1/tasks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKENS.a}`, 'content-type': 'application/json' },
          body: JSON.stringify({ ttlMs: 3_600_000, maxAttempts: 1, kind: 'failover' }),
        });
        assert.equal(created.status, 201);
        const task = await created.json();
        const updates = [];
        const statuses = [];
        let killedAt = Infinity;
        watch = client.watch(task.id, {
          onUpdate: (u) => updates.push({ ...u, after: Date.now() > killedAt }),
          onStatus: (st) => statuses.push(st),
        });
        const detail = () => JSON.stringify({ updates, statuses, victim: proxy.latest() });
        // Changes committed through both instances reach the watch.
        await callback(instances[0].base, task.id, 'start', { type: 'start', atMs: 1, worker: 'w' });
        await callback(instances[1].base, task.id, 'p1', { type: 'progress', atMs: 2, progress: 10, cursor: 'c1' });
        await until('version 2', () => watch.version === 2, 10_000, detail);
        await sleep(100); // the watch holds its next request now
        // The instance holding the watch's request dies.
        const victim = proxy.latest();
        assert.ok(victim === 0 || victim === 1, 'the watch goes through the proxy');
        const survivor = instances[1 - victim];

        killedAt = Date.now();
        await stopInstance(instances[victim], 'SIGKILL');
        // Committed while the client is cut off: it must catch up by delta.
        await callback(survivor.base, task.id, 'p2', { type: 'progress', atMs: 3, progress: 20, cursor: 'c2' });
        await callback(survivor.base, task.id, 'p3', { type: 'progress', atMs: 4, progress: 30, cursor: 'c3' });
        await until('version 4', () => watch.version === 4, 10_000, detail);
        await callback(survivor.base, task.id, 'ok', {
          type: 'succeed',
          atMs: 5,
          resultRef: 'blob://r',
          resultHash: 'sha256:ab12',
        });
        const done = await watch.done;
        assert.equal(done.state, 'succeeded');
        assert.equal(done.version, 5);

        const afterKill = updates.filter((u) => u.after);
        assert.ok(afterKill.length >= 2, JSON.stringify(updates));
        assert.equal(afterKill[0].mode, 'delta', `first update after the kill: ${JSON.stringify(afterKill[0])}`);
        assert.ok(afterKill[0].applied.includes(3), JSON.stringify(afterKill[0]));
        assert.ok(afterKill.every((u) => u.mode === 'delta'), JSON.stringify(afterKill));
        assert.deepEqual(
          updates.flatMap((u) => u.applied),
          [1, 2, 3, 4, 5],
          'every version applied once, in order',
        );
        assert.ok(proxy.live().every((i) => i !== victim), 'nothing left on the dead instance');
      } finally {
        watch?.stop();
        await proxy.close();
      }
    });
  }
});

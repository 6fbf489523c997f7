// A standard EventSource follows a task to its end, then stops
// (PROTOCOL.md §Events stream): the `eventsource` npm package in Node and
// Chromium's own EventSource, against both backends (taskwire-server and
// examples/node-backend).
//
// After the terminal message the server ends the stream; a spec-following
// EventSource reconnects once with `Last-Event-ID` set to the terminal
// version, gets 204 No Content, and is CLOSED: no further request, ever.
//
// Each backend sits behind a small HTTP proxy that serves a blank page
// (so Chromium's EventSource is same-origin), adds the bearer token (a
// native EventSource cannot send one) and records every events request.
//
//   node --test tests/e2e/eventsource.test.mjs
//
// Needs: dist/ (npm run build, for the node backend), a built
// taskwire-server (debug, or TASKWIRE_SERVER), Chromium (CHROME_BIN).
// `eventsource` is a dev dependency only, pinned (5.1.5 and its one
// dependency, eventsource-parser: 2 packages, 372 KB in node_modules,
// under a second of `npm ci`); it never ships (package.json `files`).
// How a page authenticates a native EventSource is PROTOCOL.md's
// credentials matter; this test only needs one that reaches the stream.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { EventSource } from "eventsource";
import { callbackBody, signedHeaders } from "../conformance/lib/sign.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const TOKEN = `tok_${randomBytes(8).toString("hex")}`;
const SECRET = `whsec_${randomBytes(32).toString("base64")}`;
/** EventSource reconnects 3 s after a stream ends (both clients' default). */
const CLOSED_WITHIN_MS = 10_000;
/** How long "no further request" is watched for after CLOSED. */
const QUIET_MS = 1_500;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function referenceServer() {
  if (process.env.TASKWIRE_SERVER) return process.env.TASKWIRE_SERVER;
  const target = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target");
  const found = ["debug", "release"].map((p) => join(target, p, "taskwire-server")).find(existsSync);
  if (!found) throw new Error(`no taskwire-server under ${target}: cargo build -p taskwire-server (or set TASKWIRE_SERVER)`);
  return found;
}

const BACKENDS = {
  "taskwire-server": () => [referenceServer()],
  "node backend": () => [process.execPath, join(root, "examples/node-backend/server.mjs")],
};

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = http.createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Starts a backend with one tenant on a free port and waits until it answers. */
async function startBackend(command) {
  const [bin, ...args] = command;
  const port = await freePort();
  const data = mkdtempSync(join(tmpdir(), "taskwire-eventsource-"));
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(bin, [
    ...args,
    "--listen", `127.0.0.1:${port}`,
    "--data", data,
    "--token", `${TOKEN}=tenant-a`,
    "--callback-secret", `tenant-a=${SECRET}`,
  ], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c) => (stderr += c));
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${bin} exited (${child.exitCode}):\n${stderr}`);
    try {
      await fetch(`${base}/v1/notifications`, { headers: { authorization: `Bearer ${TOKEN}` } });
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`${bin} did not answer within 20 s:\n${stderr}`);
      await sleep(100);
    }
  }
  return {
    base,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(data, { recursive: true, force: true });
    },
  };
}

/**
 * The proxy in front of a backend: `/` is a blank page, everything else
 * is forwarded with the bearer token added. `requests(taskId)` lists the
 * events requests for a task: {lastEventId, status}.
 */
async function startProxy(backendBase) {
  const target = new URL(backendBase);
  const seen = [];
  const server = http.createServer((req, res) => {
    if (req.url === "/") {
      res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>eventsource</title>");
      return;
    }
    const record = { url: req.url, lastEventId: req.headers["last-event-id"] ?? null, status: null };
    if (/\/events(\?|$)/.test(req.url)) seen.push(record);
    const upstream = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url,
        headers: { ...req.headers, authorization: `Bearer ${TOKEN}` } },
      (answer) => {
        record.status = answer.statusCode;
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    origin: `http://127.0.0.1:${server.address().port}`,
    requests: (taskId) => seen.filter((r) => r.url.startsWith(`/v1/tasks/${taskId}/events`)),
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

/** The backend, as an executor and a client: create, then signed callbacks. */
function driver(base) {
  return {
    async create() {
      const res = await fetch(`${base}/v1/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ ttlMs: 600_000, maxAttempts: 1 }),
      });
      assert.equal(res.status, 201, await res.clone().text());
      return (await res.json()).id;
    },
    async callback(taskId, event) {
      const body = callbackBody(taskId, event);
      const res = await fetch(`${base}/v1/tasks/${taskId}/callbacks`, {
        method: "POST",
        headers: { "content-type": "application/json", ...signedHeaders(SECRET, `cb_${randomBytes(8).toString("hex")}`, body) },
        body,
      });
      const answer = await res.json();
      assert.equal(res.status, 200, JSON.stringify(answer));
      assert.equal(answer.changed, true, JSON.stringify(answer));
    },
  };
}

/** Waits until `probe()` is truthy; fails with `describe()` after `ms`. */
async function until(probe, ms, describe) {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) assert.fail(await describe());
    await sleep(50);
  }
}

/**
 * Follows a task to its end with some EventSource. `client` opens one
 * on `url` and reports {readyState, ids} on `state()`.
 */
async function followsToTheEndThenStops(backend, proxy, client) {
  const exec = driver(backend.base);
  const id = await exec.create();
  await exec.callback(id, { type: "start", atMs: 1000, worker: "w" });
  const source = await client.open(`${proxy.origin}/v1/tasks/${id}/events`);
  try {
    await until(async () => (await source.state()).ids.length === 1, 5000, async () =>
      `no first message: ${JSON.stringify(await source.state())}`);
    await exec.callback(id, { type: "progress", atMs: 2000, progress: 50, cursor: "c50" });
    await exec.callback(id, { type: "succeed", atMs: 3000, resultRef: "blob://r", resultHash: "sha256:r" });
    const stopped = async () => (await source.state()).readyState === 2;
    await until(stopped, CLOSED_WITHIN_MS, async () =>
      `the EventSource is not CLOSED ${CLOSED_WITHIN_MS} ms after the task ended: ` +
      `state ${JSON.stringify(await source.state())}, requests ${JSON.stringify(proxy.requests(id))}`);
    const { ids } = await source.state();
    assert.equal(ids.at(-1), "3", `the last message is the terminal version: ${ids}`);
    await sleep(QUIET_MS);
    const requests = proxy.requests(id);
    assert.deepEqual(
      requests.map((r) => [r.lastEventId, r.status]),
      [[null, 200], ["3", 204]],
      "one stream, then one reconnect at the terminal version answered 204, then nothing",
    );
    assert.equal((await source.state()).readyState, 2, "still CLOSED");
  } finally {
    await source.close();
  }
}

/** The `eventsource` npm package, in this process. */
const npmEventSource = {
  async open(url) {
    const es = new EventSource(url);
    const ids = [];
    es.addEventListener("resume", (e) => ids.push(e.lastEventId));
    es.addEventListener("error", () => {});
    return { state: async () => ({ readyState: es.readyState, ids }), close: async () => es.close() };
  },
};

/** Chromium's own EventSource, in a page of the proxy's origin. */
function chromiumEventSource(browser) {
  return {
    async open(url) {
      const page = await browser.newPage();
      await page.goto(new URL("/", url).href);
      await page.evaluate((u) => {
        const es = new EventSource(u);
        window.followed = { es, ids: [] };
        es.addEventListener("resume", (e) => window.followed.ids.push(e.lastEventId));
      }, url);
      return {
        state: () => page.evaluate(() => ({ readyState: window.followed.es.readyState, ids: window.followed.ids })),
        close: () => page.close(),
      };
    },
  };
}

describe("a standard EventSource stops at the end of a task (PROTOCOL.md §Events stream)", { concurrency: true }, () => {
  let browser;
  const running = [];

  before(async () => {
    const chrome = process.env.CHROME_BIN ?? "/usr/bin/chromium";
    assert.ok(existsSync(chrome), `no Chromium at ${chrome}: run scripts/setup.sh browser, or set CHROME_BIN`);
    assert.ok(existsSync(join(root, "dist/full/node.js")), "dist/ is missing (the node backend needs it): npm run build");
    const { chromium } = await import("playwright-core");
    browser = await chromium.launch({
      executablePath: chrome,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    });
  });

  after(async () => {
    await browser?.close();
    for (const stop of running) await stop();
  });

  for (const [name, command] of Object.entries(BACKENDS)) {
    describe(name, { concurrency: true }, () => {
      let backend;
      let proxy;
      before(async () => {
        backend = await startBackend(command());
        running.push(() => backend.stop());
        proxy = await startProxy(backend.base);
        running.push(() => proxy.close());
      });

      it("the eventsource npm package: one 204 reconnect, then CLOSED and quiet", () =>
        followsToTheEndThenStops(backend, proxy, npmEventSource));

      it("Chromium's EventSource: one 204 reconnect, then CLOSED and quiet", () =>
        followsToTheEndThenStops(backend, proxy, chromiumEventSource(browser)));
    });
  }
});

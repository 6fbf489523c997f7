// taskwire/react in real Chromium, as a user meets it: `npm pack`, the
// tarball installed with React 19 into a scratch project, the page of
// tests/js/react-page/ (StrictMode) built there with Vite and
// @vitejs/plugin-react, against the real server behind a TCP proxy that
// the test cuts (tests/e2e/proxy.mjs). The page counts its own requests:
// the watch requests in flight (per task or batch), the batch requests,
// and each create's key and answer.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, freePort } from "./server.mjs";
import { CHROMIUM, launchChromium } from "./engines.mjs";
import { startProxy } from "../e2e/proxy.mjs";
import { newTaskId, seedTimeline, serveFiles } from "./pages.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const chromium = CHROMIUM.binary;
const scratch = mkdtempSync(join(tmpdir(), "taskwire-react-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let api, proxy, statics, origin, browser;

function sh(cmd, args, cwd) {
  return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** Packs the package, installs it with React into a scratch app and builds the page. */
function buildPage() {
  const [info] = JSON.parse(sh("npm", ["pack", "--json", "--pack-destination", scratch], root));
  const app = join(scratch, "app");
  mkdirSync(app);
  cpSync(join(root, "tests/js/react-page"), app, { recursive: true });
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "react-app", private: true, type: "module" }));
  sh("npm", ["install", "--no-audit", "--no-fund", "--offline", join(scratch, info.filename)], app);
  // React, its Vite plugin and Vite are the repository's own (its
  // devDependencies, so the test needs no registry): linked in, they
  // resolve to one copy of React for the page and for taskwire/react.
  for (const name of ["react", "react-dom", "@vitejs/plugin-react", "vite"]) {
    mkdirSync(dirname(join(app, "node_modules", name)), { recursive: true });
    symlinkSync(join(root, "node_modules", name), join(app, "node_modules", name));
  }
  // React's development build: only it replays effects under StrictMode
  // (a production build ignores StrictMode), which the test is about.
  execFileSync(process.execPath, [join(app, "node_modules/vite/bin/vite.js"), "build"], {
    cwd: app,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NODE_ENV: "development" },
  });
  return join(app, "dist");
}

before(async () => {
  if (!existsSync(chromium)) return;
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  api = await startServer(["--cors-origin", origin]);
  proxy = await startProxy(Number(new URL(api.baseUrl).port));
  const dist = buildPage();
  assert.ok(readdirSync(join(dist, "assets")).some((f) => f.endsWith(".wasm")), "the page ships the wasm");
  statics = await serveFiles(port, (url) => join(dist, url === "/" ? "index.html" : url));
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  statics?.close();
  await proxy?.close();
  await api?.stop();
});

/** The page, through the proxy, following `taskId` and `batchId` from its first mount (or nothing). */
async function open(taskId = "", batchId = "") {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const query = new URLSearchParams({ api: `http://127.0.0.1:${proxy.port}`, token: api.token, task: taskId, batch: batchId });
  await page.goto(`${origin}/?${query}`);
  await page.waitForFunction(() => window.page !== undefined, null, { timeout: 10_000 });
  return { page, errors };
}

/**
 * Waits until `read()` equals `want` and no watch request of the page has
 * started or ended for `holdMs` (the page notes every change, so even a
 * gap of a millisecond between an answered request and the next one
 * counts): no request left behind, none added later.
 */
async function settlesAt(read, want, what, holdMs = 1_000) {
  const { page } = read;
  const deadline = Date.now() + 5_000 + holdMs;
  for (;;) {
    const [now, quiet] = [await read(), await page.evaluate(() => window.page.quietForMs())];
    if (now === want && quiet >= holdMs) return;
    if (Date.now() > deadline) assert.fail(`${what}: ${now} instead of ${want}, quiet for ${Math.round(quiet)} ms`);
    await sleep(50);
  }
}

test("useTask follows a task to succeeded through an outage", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const taskId = await newTaskId(api);
  const { page, errors } = await open(taskId);
  const state = () => page.getAttribute("#view", "data-state");
  const events = seedTimeline(Date.now());
  for (const [i, event] of events.entries()) {
    if (i === 2) {
      // v2 is shown and its next request held: the outage kills it, and
      // v3, v4 happen while the page cannot reach the server.
      await page.waitForSelector('#view[data-version="2"]', { timeout: 5_000 });
      await sleep(300);
      proxy.cut();
    }
    if (i === 4) {
      await page.waitForSelector('#view[data-status="reconnecting"]', { timeout: 5_000 });
      await sleep(800);
      proxy.restore();
    }
    await sleep(60);
    await api.callback(taskId, event, `${taskId}-${i}`);
  }
  await page.waitForSelector('#view[data-state="succeeded"]', { timeout: 15_000 });
  assert.equal(await state(), "succeeded");
  const commits = (await page.evaluate(() => window.page.commits())).filter((c) => c.version !== null);
  const versions = commits.map((c) => c.version);
  assert.equal(versions.at(-1), 5);
  assert.deepEqual(versions, [...versions].sort((a, b) => a - b), "versions only rise");
  assert.ok(commits.some((c) => c.status === "reconnecting"), "the outage was shown");
  assert.deepEqual(errors, []);
  await page.close();
});

test("a double click on create makes one task", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const { page, errors } = await open();
  await page.dblclick("#create");
  await page.waitForFunction(() => document.getElementById("created").textContent !== "", null, { timeout: 5_000 });
  await sleep(500);
  const creates = await page.evaluate(() => window.page.creates());
  const ids = new Set(creates.map((c) => c.id));
  assert.equal(ids.size, 1, `tasks created: ${JSON.stringify(creates)}`);
  assert.equal(new Set(creates.map((c) => c.key)).size, 1, "one idempotency key");
  assert.equal(await page.textContent("#created"), [...ids][0]);
  // The hook keeps the create's kind once the watch's first update (a
  // view without it) replaces the task.
  assert.equal(await page.textContent("#created-kind"), "react-test@0");
  await api.callback([...ids][0], { type: "start", atMs: Date.now(), worker: "w" }, "s");
  await page.waitForFunction(() => document.getElementById("created-kind").textContent.endsWith("@1"), null, { timeout: 5_000 });
  assert.equal(await page.textContent("#created-kind"), "react-test@1");
  assert.deepEqual(errors, []);
  await page.close();
});

/** Creates a batch of `n` queued tasks with the server's tenant token: its id and task ids. */
async function newBatch(n) {
  const r = await fetch(`${api.baseUrl}/v1/batches`, {
    method: "POST",
    headers: { ...api.headers, "content-type": "application/json" },
    body: JSON.stringify({ items: Array.from({ length: n }, (_, i) => ({ ttlMs: 600_000, maxAttempts: 3, input: { item: i } })) }),
  });
  assert.equal(r.status, 201, await r.clone().text());
  const batch = await r.json();
  return { batchId: batch.batchId, ids: batch.tasks.map((t) => t.id) };
}

/** The batch as the server has it now: its cursor and each task's version and state. */
async function serverBatch(batchId) {
  const r = await fetch(`${api.baseUrl}/v1/batches/${batchId}/resume?cursor=0`, { headers: api.headers });
  const answer = await r.json();
  return { cursor: answer.cursor, tasks: answer.tasks.map(({ task }) => ({ id: task.id, version: task.version, state: task.state })) };
}

/**
 * The page, through the proxy, following `batchId` from its first mount
 * (StrictMode replays the effects of a mount, not of an update).
 */
const openBatch = (batchId) => open("", batchId);

test("useTaskBatch follows a batch to all-terminal through an outage, re-rendering once per cursor rise", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const { batchId, ids } = await newBatch(3);
  const { page, errors } = await openBatch(batchId);
  const shows = (id, version) => page.waitForSelector(`#batch li[data-task="${id}"][data-version="${version}"]`, { timeout: 5_000 });
  const t0 = Date.now();
  for (const id of ids) await api.callback(id, { type: "start", atMs: t0 + 1, worker: "w" }, "start");
  await api.callback(ids[0], { type: "progress", atMs: t0 + 2, progress: 40, cursor: "a" }, "a");
  await shows(ids[0], 2);
  await shows(ids[2], 1);
  // Every task is shown and the next request held: the outage kills it,
  // and changes to every task happen while the page cannot reach the server.
  await sleep(300);
  proxy.cut();
  await api.callback(ids[0], { type: "succeed", atMs: t0 + 3, resultRef: "r0", resultHash: "h0" }, "done");
  await api.callback(ids[1], { type: "progress", atMs: t0 + 3, progress: 70, cursor: "b" }, "b");
  await api.callback(ids[2], { type: "fail", atMs: t0 + 3, error: "refused", retryable: false }, "fail");
  await page.waitForSelector('#batch[data-status="reconnecting"]', { timeout: 5_000 });
  await sleep(800);
  proxy.restore();
  await shows(ids[1], 2);
  await api.callback(ids[1], { type: "succeed", atMs: t0 + 4, resultRef: "r1", resultHash: "h1" }, "done");
  await page.waitForSelector('#batch[data-terminal="3"]', { timeout: 15_000 });

  const server = await serverBatch(batchId);
  const commits = (await page.evaluate(() => window.page.batchCommits())).filter((c) => c.batchId === batchId);
  const last = commits.at(-1);
  assert.deepEqual(last.tasks, server.tasks, "every task as the server has it, in item order");
  assert.equal(last.cursor, server.cursor);
  assert.deepEqual(last.tasks.map((t) => t.state), ["succeeded", "succeeded", "failed"]);
  assert.ok(commits.some((c) => c.status.includes('"reconnecting"')), "the outage was shown");
  for (const [i, c] of commits.entries()) {
    if (i === 0) continue;
    const before = commits[i - 1];
    assert.ok(c.cursor >= before.cursor, `the cursor only rises: ${before.cursor} then ${c.cursor}`);
    for (const task of c.tasks) {
      const was = before.tasks.find((b) => b.id === task.id);
      assert.ok(!was || task.version >= was.version, `${task.id}'s version only rises: ${was?.version} then ${task.version}`);
    }
    // A new state object (a re-render) only for a higher cursor, or
    // another status or error: never one per task of an answer.
    assert.ok(c.cursor > before.cursor || c.status !== before.status || c.error !== before.error, `commit ${i} changed nothing: ${JSON.stringify(c)}`);
  }
  // onUpdate (a new listener on every render) heard each task's versions, rising.
  const updates = (await page.evaluate(() => window.page.batchUpdates())).filter((u) => u.batchId === batchId);
  for (const { id, version } of server.tasks) {
    const heard = updates.filter((u) => u.id === id).map((u) => u.version);
    assert.equal(heard.at(-1), version, `onUpdate heard ${id} to the end`);
    assert.deepEqual(heard, [...heard].sort((a, b) => a - b), `onUpdate heard ${id} rising`);
  }
  assert.deepEqual(errors, []);
  await page.close();
});

/**
 * What the lifecycle checks below need of each hook: a new id to follow
 * (nothing happens to it, so its watch is one request the server holds),
 * the page mounted on it, how the page switches to another id, and what
 * the page shows once it follows that id.
 */
const HOOKS = {
  useTask: {
    newId: () => newTaskId(api),
    open: (id) => open(id),
    follow: (page, id) => page.evaluate((id) => window.page.watch(id), id),
    shown: (id) => `#view[data-task="${id}"]`,
  },
  useTaskBatch: {
    newId: async () => (await newBatch(2)).batchId,
    open: (id) => openBatch(id),
    follow: (page, id) => page.evaluate((id) => window.page.watchBatch(id), id),
    shown: (id) => `#batch[data-batch="${id}"] li`,
  },
};

/** A page under StrictMode following a new id with `hook`, and counters of its held requests. */
async function held(hook) {
  const id = await hook.newId();
  const { page, errors } = await hook.open(id);
  // The first request is answered at once (the page knows no version yet):
  // until its answer is shown, the count may read 1 for that request and
  // then 0 for a moment before the held one is sent.
  await page.waitForSelector(hook.shown(id), { timeout: 5_000 });
  // Each reader carries its page, for settlesAt's quiet time.
  const total = Object.assign(() => page.evaluate(() => window.page.inFlight()), { page });
  const of = (id) => Object.assign(() => page.evaluate((id) => window.page.inFlightFor(id), id), { page });
  return { page, errors, id, total, of };
}

for (const [name, hook] of Object.entries(HOOKS)) {
  test(`${name}: StrictMode's double mount leaves exactly one held request, its own`, async (t) => {
    if (!browser) return t.skip(`no Chromium at ${chromium}`);
    const { page, errors, id, total, of } = await held(hook);
    await settlesAt(total, 1, "held requests after a StrictMode mount");
    assert.equal(await of(id)(), 1, "the one held request is for the id followed");
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`${name}: unmount leaves no held request, and a remount one`, async (t) => {
    if (!browser) return t.skip(`no Chromium at ${chromium}`);
    const { page, errors, total } = await held(hook);
    await page.waitForFunction(() => window.page.inFlight() > 0, null, { timeout: 5_000 });
    await page.evaluate(() => window.page.show(false));
    await settlesAt(total, 0, "held requests after unmount");
    await page.evaluate(() => window.page.show(true));
    await settlesAt(total, 1, "held requests after a remount");
    await page.evaluate(() => window.page.show(false));
    await settlesAt(total, 0, "held requests after the remount's unmount");
    assert.deepEqual(errors, []);
    await page.close();
  });

  test(`${name}: another id stops the old id's watch`, async (t) => {
    if (!browser) return t.skip(`no Chromium at ${chromium}`);
    const { page, errors, id: first, total, of } = await held(hook);
    const second = await hook.newId();
    await page.waitForFunction((id) => window.page.inFlightFor(id) > 0, first, { timeout: 5_000 });
    await hook.follow(page, second);
    await page.waitForSelector(hook.shown(second), { timeout: 5_000 });
    await settlesAt(of(first), 0, "held requests for the old id");
    await settlesAt(of(second), 1, "held requests for the new id");
    await page.evaluate(() => window.page.show(false));
    await settlesAt(total, 0, "held requests after the last unmount");
    assert.deepEqual(errors, []);
    await page.close();
  });
}

test("useTaskBatch with initial: the created batch is shown at once and followed by delta from its cursor", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const { page, errors } = await open();
  const batchId = await page.evaluate(() => window.page.createBatch(3));
  await page.waitForFunction((id) => window.page.inFlightFor(id) > 0, batchId, { timeout: 5_000 });
  const [first] = (await page.evaluate(() => window.page.batchCommits())).filter((c) => c.batchId === batchId);
  assert.equal(first.tasks.length, 3, "the first commit shows the created tasks");
  assert.equal(first.cursor, 1);
  const queries = (await page.evaluate(() => window.page.batchRequests())).filter((r) => r.id === batchId).map((r) => new URLSearchParams(r.query));
  assert.ok(queries.length > 0);
  for (const q of queries) {
    assert.equal(q.get("cursor"), "1", "from the create's cursor");
    assert.equal(q.get("snapshot"), null, "no snapshot asked");
  }
  assert.deepEqual(errors, []);
  await page.close();
});

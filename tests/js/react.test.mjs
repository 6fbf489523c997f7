// taskwire/react in real Chromium, as a user meets it: `npm pack`, the
// tarball installed with React 19 into a scratch project, the page of
// tests/js/react-page/ (StrictMode) built there with Vite and
// @vitejs/plugin-react, against the real server behind a TCP proxy that
// the test cuts (tests/e2e/proxy.mjs). The page counts its own requests:
// the watch requests in flight, and each create's key and answer.
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

/** The page, through the proxy, following `taskId` (or nothing). */
async function open(taskId = "") {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const query = new URLSearchParams({ api: `http://127.0.0.1:${proxy.port}`, token: api.token, task: taskId });
  await page.goto(`${origin}/?${query}`);
  await page.waitForFunction(() => window.page !== undefined, null, { timeout: 10_000 });
  return { page, errors };
}

/** Waits until `read()` equals `want`, then checks it stays so for `holdMs` (no request left behind, none added later). */
async function settlesAt(read, want, what, holdMs = 1_000) {
  const deadline = Date.now() + 5_000;
  while ((await read()) !== want) {
    if (Date.now() > deadline) assert.fail(`${what}: ${await read()} instead of ${want}`);
    await sleep(50);
  }
  for (const end = Date.now() + holdMs; Date.now() < end; await sleep(100)) {
    assert.equal(await read(), want, what);
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

/** A page under StrictMode following a new queued task: nothing happens, so its watch is a long-poll the server holds. */
async function held() {
  const taskId = await newTaskId(api);
  const { page, errors } = await open(taskId);
  const total = () => page.evaluate(() => window.page.inFlight());
  const of = (id) => () => page.evaluate((id) => window.page.inFlightFor(id), id);
  return { page, errors, taskId, total, of };
}

test("StrictMode's double mount leaves exactly one held request", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const { page, errors, total } = await held();
  await settlesAt(total, 1, "held requests after a StrictMode mount");
  assert.deepEqual(errors, []);
  await page.close();
});

test("unmount leaves no held request, and a remount one", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const { page, errors, total } = await held();
  await page.waitForFunction(() => window.page.inFlight() > 0, null, { timeout: 5_000 });
  await page.evaluate(() => window.page.show(false));
  await settlesAt(total, 0, "held requests after unmount");
  await page.evaluate(() => window.page.show(true));
  await page.waitForFunction(() => window.page.inFlight() > 0, null, { timeout: 5_000 });
  await page.evaluate(() => window.page.show(false));
  await settlesAt(total, 0, "held requests after the remount's unmount");
  assert.deepEqual(errors, []);
  await page.close();
});

test("another task id stops the old task's watch", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const { page, errors, taskId: first, total, of } = await held();
  const second = await newTaskId(api);
  await page.waitForFunction((id) => window.page.inFlightFor(id) > 0, first, { timeout: 5_000 });
  await page.evaluate((id) => window.page.watch(id), second);
  await page.waitForSelector(`#view[data-task="${second}"]`, { timeout: 5_000 });
  await settlesAt(of(first), 0, "held requests for the old task id");
  assert.ok((await of(second)()) >= 1, "the new task is watched");
  await page.evaluate(() => window.page.show(false));
  await settlesAt(total, 0, "held requests after the last unmount");
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
  assert.deepEqual(errors, []);
  await page.close();
});

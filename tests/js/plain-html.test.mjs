// The plain-HTML quick start of docs/client.md, in Chromium: no bundler,
// the package's dist/client/ served as it is at /taskwire/, named
// `taskwire/client` by an import map, the .wasm preloaded. The page's one
// client follows two tasks, each with its own single-task browser token
// (tokens per scope: the token code is a chunk the page loads on demand,
// which must be found beside index.js), against the real server across
// origins.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SignJWT } from "jose";
import { startServer, freePort } from "./server.mjs";
import { CHROMIUM, launchChromium } from "./engines.mjs";
import { newTaskId, serveFiles } from "./pages.mjs";

const CLIENT_BUILD = join(dirname(fileURLToPath(import.meta.url)), "../../dist/client");
const KEY = randomBytes(32);

// As docs/client.md writes it, with the test's backend standing in for `myBackendToken`.
const PAGE = `<!doctype html>
<script type="importmap">{ "imports": { "taskwire/client": "/taskwire/index.js" } }</script>
<link rel="preload" href="/taskwire/taskwire_wasm_bg.wasm" as="fetch" type="application/wasm" crossorigin>
<script type="module">
  import init, { TaskClient } from "taskwire/client";
  await init();
  window.follow = async (baseUrl, ids) => {
    const client = new TaskClient({ baseUrl, waitMs: 1000, token: ({ tasks }) => window.mint(tasks) });
    const done = await Promise.all(ids.map((id) => client.watch(id).done));
    client.dispose();
    return done.map((task) => task.state);
  };
  window.ready = true;
</script>`;

let api, statics, browser, origin;
const served = [];

before(async () => {
  if (!existsSync(CHROMIUM.binary)) return;
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  api = await startServer(["--cors-origin", origin, "--browser-token-key", `tenant:k1=HS256:${KEY.toString("base64")}`]);
  statics = await serveFiles(port, (url) => {
    served.push(url);
    if (url === "/") return { type: "text/html", body: PAGE };
    if (url.startsWith("/taskwire/")) return join(CLIENT_BUILD, url.slice("/taskwire/".length));
  });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  statics?.close();
  await api?.stop();
});

test("the plain-HTML quick start follows two tasks with one client and a token per task, no bundler", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${CHROMIUM.binary}`);
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const minted = [];
  await page.exposeFunction("mint", (tasks) => {
    minted.push(tasks);
    return new SignJWT({ tasks, rights: ["watch"] })
      .setProtectedHeader({ alg: "HS256", kid: "k1" })
      .setSubject("page-user")
      .setAudience("taskwire")
      .setExpirationTime(Math.floor(Date.now() / 1000) + 600)
      .sign(KEY);
  });
  await page.goto(origin + "/");
  await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
  const ids = [await newTaskId(api), await newTaskId(api)];
  const result = page.evaluate(([base, list]) => window.follow(base, list), [api.baseUrl, ids]);
  await new Promise((r) => setTimeout(r, 300));
  for (const id of ids) {
    const t0 = Date.now();
    await api.callback(id, { type: "start", atMs: t0, worker: "w" }, "s");
    await api.callback(id, { type: "succeed", atMs: t0 + 1, resultRef: "r", resultHash: "sha256:ab12" }, "ok");
  }
  assert.deepEqual(await result, ["succeeded", "succeeded"]);
  assert.deepEqual(minted.map((tasks) => tasks.join()).sort(), [...ids].sort(), "one single-task token per task");
  assert.ok(served.some((url) => /^\/taskwire\/token(-\w+)?\.js$/.test(url)), `the token chunk was loaded: ${served.join(" ")}`);
  assert.equal(served.filter((url) => url.endsWith(".wasm")).length, 1, "the preload served init()");
  assert.deepEqual(errors, []);
  await page.close();
});

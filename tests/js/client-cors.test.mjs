// A CORS mistake is reported as one (issue 29), not as an endless
// `reconnecting … Failed to fetch`: in Chromium, a page on one origin
// follows a task on a server that does not allow that origin, and its
// status names CORS and the origin to allow. The same page against a
// server that is down, and against one that allows it, says nothing of
// CORS: the difference is found by two probe requests (js/cors.js),
// loaded only after a request failed outright.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, freePort } from "./server.mjs";
import { CHROMIUM, launchChromium } from "./engines.mjs";
import { newTaskId, serveFiles } from "./pages.mjs";

const CLIENT_BUILD = join(dirname(fileURLToPath(import.meta.url)), "../../dist/client");

const PAGE = `<!doctype html>
<script type="importmap">{ "imports": { "taskwire/client": "/taskwire/index.js" } }</script>
<script type="module">
  import init, { TaskClient } from "taskwire/client";
  await init();
  // The first status that carries an error, or the task if it ends first.
  window.firstError = (baseUrl, id, token) => new Promise((resolve) => {
    const client = new TaskClient({ baseUrl, token, waitMs: 1000, backoff: { initialMs: 50, maxMs: 200 } });
    const watch = client.watch(id, {
      onStatus: (s) => s.error && (resolve(s.error), client.dispose()),
    });
    watch.done.then((task) => (resolve("ended " + task.state), client.dispose()), () => {});
  });
  window.ready = true;
</script>`;

let refusing, allowing, browser, origin, statics;

before(async () => {
  if (!existsSync(CHROMIUM.binary)) return;
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  refusing = await startServer(["--cors-origin", "http://127.0.0.1:1"]); // another origin only
  allowing = await startServer(["--cors-origin", origin]);
  statics = await serveFiles(port, (url) => {
    if (url === "/") return { type: "text/html", body: PAGE };
    if (url.startsWith("/taskwire/")) return join(CLIENT_BUILD, url.slice("/taskwire/".length));
  });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  statics?.close();
  await refusing?.stop();
  await allowing?.stop();
});

async function firstError(base, id, token) {
  const page = await browser.newPage();
  try {
    await page.goto(origin + "/");
    await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
    return await page.evaluate(([b, i, t]) => window.firstError(b, i, t), [base, id, token]);
  } finally {
    await page.close();
  }
}

test("a server that refuses the page's origin is reported as CORS, naming the origin to allow", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${CHROMIUM.binary}`);
  const id = await newTaskId(refusing);
  const error = await firstError(refusing.baseUrl, id, refusing.token);
  assert.match(error, /^network error: CORS: /, error);
  assert.ok(error.includes(refusing.baseUrl) && error.includes(`--cors-origin ${origin}`), error);
});

test("a server that is down is a plain failure, and one that allows the page is followed: no CORS said", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${CHROMIUM.binary}`);
  const down = `http://127.0.0.1:${await freePort()}`;
  const error = await firstError(down, "tsk_nowhere", "any");
  assert.doesNotMatch(error, /CORS/, error);
  const id = await newTaskId(allowing);
  const t0 = Date.now();
  await allowing.callback(id, { type: "start", atMs: t0, worker: "w" }, "s");
  await allowing.callback(id, { type: "succeed", atMs: t0 + 1, resultRef: "r", resultHash: "sha256:ab" }, "ok");
  assert.equal(await firstError(allowing.baseUrl, id, allowing.token), "ended succeeded");
});

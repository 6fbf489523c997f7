// taskwire/client in real browsers, Chromium and Firefox (tests/js/
// engines.mjs), in a window and in a module Web Worker (no `window`
// there), against the real server across origins (CORS), through a real
// outage: a TCP proxy between the page and the server resets every
// connection (a held long-poll or SSE stream dies unanswered) and refuses
// new ones for a while. Each watch must reconnect, resume and follow the
// seed's timeline to `succeeded` with versions that only rise.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, freePort } from "./server.mjs";
import { ENGINES, launch } from "./engines.mjs";
import { newTaskId, seedTimeline, servePage } from "./pages.mjs";
import { startProxy } from "../e2e/proxy.mjs";

const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
  import init, { TaskClient } from "/pkg/index.js";
  window.follow = async ({ baseUrl, headers, taskId }) => {
    await init();
    const seen = [];
    const states = [];
    const watch = new TaskClient({ baseUrl, headers, backoff: { initialMs: 100, maxMs: 400 } }).watch(taskId, {
      onUpdate: (u) => seen.push(u.task.version),
      onStatus: (s) => states.push(s.state),
    });
    const task = await watch.done;
    return { versions: seen, states, state: task.state, hasWindow: typeof window !== "undefined" };
  };
  window.followInWorker = (options) => new Promise((resolve, reject) => {
    const worker = new Worker("/worker.js", { type: "module" });
    worker.onmessage = (e) => resolve(e.data);
    worker.onerror = (e) => reject(new Error(e.message));
    worker.postMessage(options);
  });
</script>`;

const WORKER = `import init, { TaskClient } from "/pkg/index.js";
self.onmessage = async ({ data: { baseUrl, headers, taskId } }) => {
  await init();
  const seen = [];
  const states = [];
  const client = new TaskClient({ baseUrl, headers, transport: "sse", backoff: { initialMs: 100, maxMs: 400 } });
  const watch = client.watch(taskId, { onUpdate: (u) => seen.push(u.task.version), onStatus: (s) => states.push(s.state) });
  const task = await watch.done;
  self.postMessage({ versions: seen, states, state: task.state, hasWindow: typeof window !== "undefined" });
};`;

let api, statics, proxy, origin;
const browsers = new Map();

before(async () => {
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  api = await startServer(["--cors-origin", origin]);
  proxy = await startProxy(Number(new URL(api.baseUrl).port));
  statics = await servePage(port, { "/": { type: "text/html", body: PAGE }, "/worker.js": { type: "text/javascript", body: WORKER } });
  for (const engine of ENGINES) browsers.set(engine.name, await launch(engine));
});

after(async () => {
  for (const browser of browsers.values()) await browser?.close();
  statics?.close();
  await proxy?.close();
  await api?.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Posts the seed's timeline; `during(i)` runs before event `i`. */
async function drive(taskId, during) {
  const events = seedTimeline(Date.now());
  for (const [i, e] of events.entries()) {
    await during(i);
    await sleep(60);
    await api.callback(taskId, e, `${taskId}-${i}`);
  }
}

for (const engine of ENGINES) {
  for (const where of ["window", "worker"]) {
    test(`${engine.name}: follows a task to the end in a ${where}, through an outage`, async (t) => {
      const browser = browsers.get(engine.name);
      if (!browser) return t.skip(`no ${engine.name} at ${engine.binary}`);
      const page = await browser.newPage();
      await page.goto(origin + "/");
      const taskId = await newTaskId(api);
      const fn = where === "window" ? "follow" : "followInWorker";
      const options = { baseUrl: `http://127.0.0.1:${proxy.port}`, headers: api.headers, taskId };
      const result = page.evaluate(([f, o]) => window[f](o), [fn, options]);
      await drive(taskId, async (i) => {
        if (i === 2) {
          // v2 is shown; its next request is held. Cut: v3 and v4 happen
          // while the page cannot reach the server.
          await sleep(300);
          proxy.cut();
        }
        if (i === 4) {
          await sleep(800);
          proxy.restore();
        }
      });
      const { versions, states, state, hasWindow } = await result;
      assert.equal(state, "succeeded");
      assert.equal(hasWindow, where === "window");
      assert.equal(versions.at(-1), 5);
      assert.deepEqual(versions, [...versions].sort((a, b) => a - b), "versions only rise");
      assert.ok(states.includes("reconnecting"), `the outage was noticed: ${states.join(",")}`);
      assert.equal(states.at(-1), "closed", states.join(","));
      assert.deepEqual(page.errors, []);
      await page.close();
    });
  }
}

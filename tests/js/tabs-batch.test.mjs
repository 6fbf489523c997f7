// A batch followed by tabs that share (`shareAcrossTabs`, js/tabs.js and
// js/tab-watch.js), in real Chromium and Firefox against the real server.
//
// Two tabs of one browser context share one watch of a batch (the
// leader's); a page of another context follows it with a watch of its
// own: the reference. Each page reads its watch in a microtask after
// every callback, as `useTaskBatch` does, and records the tasks'
// versions it saw at each batch cursor. At a given cursor the server's
// batch is one thing, so every tab must have seen what the reference saw
// there: a tab that moved its cursor before the answer's tasks arrived
// (or its tasks before the cursor) would show a batch that never was.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, freePort } from "./server.mjs";
import { servePage } from "./pages.mjs";
import { ENGINES, until } from "./tab-pages.mjs";

const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
  import init, { TaskClient } from "/pkg/index.js";
  window.start = async ({ baseUrl, headers, share, batchId }) => {
    await init();
    window.sent = [];
    window.at = {};
    const client = new TaskClient({
      baseUrl, headers, shareAcrossTabs: share, backoff: { initialMs: 100, maxMs: 400 },
      fetch: (url, init) => (sent.push(String(url)), fetch(url, init)),
    });
    let queued = false;
    const read = () => {
      if (queued) return;
      queued = true;
      queueMicrotask(() => {
        queued = false;
        at[watch.cursor] = watch.tasks.map((t) => t.version).join(",");
      });
    };
    const watch = (window.watch = client.watchBatch(batchId, { onUpdate: read, onProgress: read }));
  };
</script>`;

let api, statics, origin;

before(async () => {
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  api = await startServer(["--cors-origin", origin]);
  statics = await servePage(port, { "/": { type: "text/html", body: PAGE } });
});

after(async () => {
  statics?.close();
  await api?.stop();
});

async function createBatch() {
  const r = await fetch(`${api.baseUrl}/v1/batches`, {
    method: "POST",
    headers: { ...api.headers, "content-type": "application/json" },
    body: JSON.stringify({ items: [{ ttlMs: 3_600_000, maxAttempts: 3 }, { ttlMs: 3_600_000, maxAttempts: 3 }] }),
  });
  assert.equal(r.status, 201, await r.clone().text());
  return r.json();
}

/** What a page's watch holds now: its cursor and the tasks' versions. */
const state = (page) => page.evaluate(() => ({ cursor: watch.cursor, versions: watch.tasks.map((t) => t.version).join(",") }));

for (const engine of ENGINES) {
  test(`${engine.name}: tabs sharing a batch see, at each cursor, the batch the server had there`, async () => {
    const browser = await engine.launch(origin + "/");
    try {
      const { batchId, tasks } = await createBatch();
      const ids = tasks.map((t) => t.id);
      const shared = await browser.group();
      const reference = await browser.group();
      const leader = await shared.page();
      const follower = await shared.page();
      const own = await reference.page();
      const start = (page, share) => page.evaluate((o) => window.start(o), { baseUrl: api.baseUrl, headers: api.headers, share, batchId });
      await start(leader, true);
      await start(follower, true);
      await start(own, false);

      const steps = [
        [0, { type: "start", atMs: 1, worker: "w" }],
        [1, { type: "start", atMs: 2, worker: "w" }],
        [0, { type: "progress", atMs: 3, progress: 50, cursor: "" }],
        [1, { type: "progress", atMs: 4, progress: 30, cursor: "" }],
        [0, { type: "succeed", atMs: 5, resultRef: "r", resultHash: "h" }],
        [1, { type: "succeed", atMs: 6, resultRef: "r", resultHash: "h" }],
      ];
      for (const [i, [task, event]] of steps.entries()) {
        await api.callback(ids[task], event, `e${i}`);
        const versions = (await Promise.all(ids.map((id) => api.task(id)))).map((t) => t.version).join(",");
        await until(async () => {
          const seen = await Promise.all([leader, follower, own].map(state));
          return seen.every((s) => s.versions === versions && s.cursor === seen[2].cursor);
        }, `every page at the server's versions ${versions} and the reference's cursor, after step ${i}`);
      }

      const reading = await own.evaluate(() => window.at);
      for (const [name, page] of [["leader", leader], ["follower", follower]]) {
        const at = await page.evaluate(() => window.at);
        const common = Object.keys(at).filter((cursor) => cursor in reading);
        assert.ok(common.length >= 2, `${name}: readings at ${Object.keys(at)} and the reference's at ${Object.keys(reading)} share cursors`);
        for (const cursor of common) assert.equal(at[cursor], reading[cursor], `${name}: the tasks' versions at cursor ${cursor}`);
      }
      const requests = (page) => page.evaluate(() => window.sent.filter((url) => url.includes(`/v1/batches/`)).length);
      const counts = await Promise.all([leader, follower].map(requests));
      assert.equal(counts.filter((n) => n > 0).length, 1, `one tab follows the batch for both: requests ${counts}`);
    } finally {
      await browser.close();
    }
  });
}

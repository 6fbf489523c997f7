// taskwire/client in real Chromium, in a window and in a module Web
// Worker (no `window` there), against the real server across origins
// (CORS): each follows the seed's timeline to `succeeded`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { join, dirname, extname } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer, freePort } from "./server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const chromium = process.env.CHROME_BIN ?? "/usr/bin/chromium";

const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
  import init, { TaskClient } from "/pkg/index.js";
  window.follow = async (baseUrl, headers, taskId) => {
    await init();
    const seen = [];
    const watch = new TaskClient({ baseUrl, headers }).watch(taskId, { onUpdate: (u) => seen.push(u.task.version) });
    const task = await watch.done;
    return { versions: seen, state: task.state, hasWindow: typeof window !== "undefined" };
  };
  window.followInWorker = (baseUrl, headers, taskId) => new Promise((resolve, reject) => {
    const worker = new Worker("/worker.js", { type: "module" });
    worker.onmessage = (e) => resolve(e.data);
    worker.onerror = (e) => reject(new Error(e.message));
    worker.postMessage({ baseUrl, headers, taskId });
  });
</script>`;

const WORKER = `import init, { TaskClient } from "/pkg/index.js";
self.onmessage = async ({ data: { baseUrl, headers, taskId } }) => {
  await init();
  const seen = [];
  const watch = new TaskClient({ baseUrl, headers, transport: "sse" }).watch(taskId, { onUpdate: (u) => seen.push(u.task.version) });
  const task = await watch.done;
  self.postMessage({ versions: seen, state: task.state, hasWindow: typeof window !== "undefined" });
};`;

let api, statics, browser, origin;

before(async () => {
  if (!existsSync(chromium)) return;
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  api = await startServer(["--cors-origin", origin]);
  const types = { ".js": "text/javascript", ".wasm": "application/wasm" };
  statics = createServer((req, res) => {
    const url = req.url.split("?")[0];
    if (url === "/") return res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    if (url === "/worker.js") return res.writeHead(200, { "content-type": "text/javascript" }).end(WORKER);
    const file = join(root, "dist/client", url.replace(/^\/pkg\//, ""));
    if (!url.startsWith("/pkg/") || !existsSync(file)) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" }).end(readFileSync(file));
  });
  await new Promise((r) => statics.listen(port, "127.0.0.1", r));
  const { chromium: pw } = await import("playwright-core");
  browser = await pw.launch({
    executablePath: chromium,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
});

after(async () => {
  await browser?.close();
  statics?.close();
  await api?.stop();
});

async function drive(taskId) {
  const t = Date.now();
  const events = [
    { type: "start", atMs: t + 1200, worker: "w" },
    { type: "progress", atMs: t + 6400, progress: 25, cursor: "a" },
    { type: "progress", atMs: t + 13100, progress: 55, cursor: "b" },
    { type: "progress", atMs: t + 20700, progress: 82, cursor: "c" },
    { type: "succeed", atMs: t + 24300, resultRef: "r", resultHash: "sha256:ab12" },
  ];
  for (const [i, e] of events.entries()) {
    await new Promise((r) => setTimeout(r, 60));
    await api.callback(taskId, e, `${taskId}-${i}`);
  }
}

async function newTaskId() {
  const r = await fetch(`${api.baseUrl}/v1/tasks`, {
    method: "POST",
    headers: { ...api.headers, "content-type": "application/json" },
    body: JSON.stringify({ ttlMs: 600_000, maxAttempts: 3 }),
  });
  return (await r.json()).id;
}

for (const where of ["window", "worker"]) {
  test(`follows a task to the end in a ${where}`, async (t) => {
    if (!browser) return t.skip(`no Chromium at ${chromium}`);
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(origin + "/");
    const taskId = await newTaskId();
    const fn = where === "window" ? "follow" : "followInWorker";
    const result = page.evaluate(([f, base, headers, id]) => window[f](base, headers, id), [fn, api.baseUrl, api.headers, taskId]);
    await drive(taskId);
    const { versions, state, hasWindow } = await result;
    assert.equal(state, "succeeded");
    assert.equal(hasWindow, where === "window");
    assert.equal(versions.at(-1), 5);
    assert.deepEqual(versions, [...versions].sort((a, b) => a - b), "versions only rise");
    assert.deepEqual(errors, []);
    await page.close();
  });
}

// Browser tokens in real Chromium: a page's TaskClient follows a task with
// a token function whose first token expires mid-watch (the server allows
// no clock skew here). The watch must go on after exactly one refresh:
// one 401 `token-expired`, one more token, and the task followed to the
// end, over long-poll and over SSE (whose stream the server ends when its
// token expires). Tokens are minted as an application's backend would,
// with `jose`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { SignJWT } from "jose";
import { startServer, freePort } from "./server.mjs";
import { CHROMIUM, launchChromium } from "./engines.mjs";
import { newTaskId, servePage } from "./pages.mjs";

const chromium = CHROMIUM.binary;
const KEY = randomBytes(32);
/** How long the first token lives, in seconds. */
const FIRST_TTL = 2;

const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
  import init, { TaskClient } from "/pkg/index.js";
  window.follow = async (baseUrl, taskId, transport) => {
    await init();
    const statuses = [];
    // Counts what the server answered, under the client's token handling.
    const fetch = async (url, init) => {
      const res = await globalThis.fetch(url, init);
      statuses.push(res.status);
      return res;
    };
    const seen = [];
    const client = new TaskClient({ baseUrl, fetch, transport, waitMs: 1000, token: () => window.mint(taskId) });
    const watch = client.watch(taskId, { onUpdate: (u) => seen.push(u.task.version) });
    const task = await watch.done;
    return { versions: seen, state: task.state, statuses };
  };
  // A native EventSource cannot send Authorization: the token rides in
  // the URL. Resolves with the versions it saw, up to the terminal one.
  window.nativeEvents = (baseUrl, taskId, token) => new Promise((resolve, reject) => {
    const versions = [];
    const source = new EventSource(baseUrl + "/v1/tasks/" + taskId + "/events?access_token=" + encodeURIComponent(token));
    source.addEventListener("resume", (e) => {
      const answer = JSON.parse(e.data);
      versions.push(answer.task.version);
      if (answer.task.state === "succeeded") {
        source.close();
        resolve(versions);
      }
    });
    source.onerror = () => {
      source.close();
      reject(new Error("EventSource failed at versions " + versions));
    };
  });
</script>`;

let api, statics, browser, origin;

before(async () => {
  if (!existsSync(chromium)) return;
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  api = await startServer([
    "--cors-origin", origin,
    "--browser-token-key", `tenant:k1=HS256:${KEY.toString("base64")}`,
    "--browser-token-leeway-secs", "0",
  ]);
  statics = await servePage(port, { "/": { type: "text/html", body: PAGE } });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  statics?.close();
  await api?.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A browser token for `taskId`, as the page's backend mints it. */
function mint(taskId, ttlSecs) {
  return new SignJWT({ tasks: [taskId], rights: ["watch"] })
    .setProtectedHeader({ alg: "HS256", kid: "k1" })
    .setSubject("page-user")
    .setAudience("taskwire")
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSecs)
    .sign(KEY);
}

for (const transport of ["long-poll", "sse"]) {
  test(`a watch over ${transport} outlives its first token with one refresh`, async (t) => {
    if (!browser) return t.skip(`no Chromium at ${chromium}`);
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const minted = [];
    // The page's backend: a short first token, then normal ones.
    await page.exposeFunction("mint", async (taskId) => {
      minted.push(Date.now());
      return mint(taskId, minted.length === 1 ? FIRST_TTL : 600);
    });
    await page.goto(origin + "/");
    const taskId = await newTaskId(api);
    const result = page.evaluate(([base, id, tr]) => window.follow(base, id, tr), [api.baseUrl, taskId, transport]);
    const t0 = Date.now();
    await api.callback(taskId, { type: "start", atMs: t0 + 100, worker: "w" }, "s");
    // Well past the first token's expiry (it is refused from its exp + 1 s).
    await sleep((FIRST_TTL + 2.5) * 1000);
    await api.callback(taskId, { type: "progress", atMs: t0 + 200, progress: 50, cursor: "a" }, "p");
    await sleep(500);
    await api.callback(taskId, { type: "succeed", atMs: t0 + 300, resultRef: "r", resultHash: "sha256:ab12" }, "ok");
    const { versions, state, statuses } = await result;
    assert.equal(state, "succeeded");
    // A stream that opens before the start callback lands first shows the
    // task as created (v0); a long-poll is held until v1.
    const seen = versions.filter((v, i) => v > 0 && versions.indexOf(v) === i);
    assert.deepEqual(seen, [1, 2, 3], `versions ${versions}`);
    assert.ok(versions.every((v) => v <= 3) && versions.slice(1).every((v, i) => v >= versions[i]), `versions ${versions}`);
    assert.equal(minted.length, 2, "one first token, one refresh");
    assert.equal(statuses.filter((s) => s === 401).length, 1, `statuses ${statuses}`);
    assert.deepEqual(errors, []);
    await page.close();
  });
}

test("a native EventSource follows a task with a browser token in access_token", async (t) => {
  if (!browser) return t.skip(`no Chromium at ${chromium}`);
  const page = await browser.newPage();
  await page.goto(origin + "/");
  const taskId = await newTaskId(api);
  const token = await mint(taskId, 600);
  const result = page.evaluate(([base, id, tok]) => window.nativeEvents(base, id, tok), [api.baseUrl, taskId, token]);
  const t0 = Date.now();
  await sleep(300);
  await api.callback(taskId, { type: "start", atMs: t0 + 100, worker: "w" }, "s");
  await api.callback(taskId, { type: "succeed", atMs: t0 + 300, resultRef: "r", resultHash: "sha256:ab12" }, "ok");
  const versions = await result;
  assert.equal(versions.at(-1), 2, `versions ${versions}`);
  // The tenant token is refused there: the stream never opens.
  const refused = await page.evaluate(([base, id, tok]) => window.nativeEvents(base, id, tok).then(() => "opened", (e) => e.message), [api.baseUrl, taskId, api.token]);
  assert.match(refused, /EventSource failed/);
  await page.close();
});

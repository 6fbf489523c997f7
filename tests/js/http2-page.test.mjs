// A page following 12 separate tasks, in Chromium, against the reference
// server serving TLS with HTTP/2 (`--tls-cert`; issue 29). Over HTTP/1.1
// the browser holds at most 6 connections per origin and queues the other
// watches; over HTTP/2 all 12 share one. A TCP proxy between page and
// server counts the connections the page opens, and each change must
// reach the page within 1 s, on long-poll and on SSE.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, rmSync } from "node:fs";
import { connect, createServer } from "node:net";
import { startServer, freePort } from "./server.mjs";
import { CHROMIUM, launchChromium } from "./engines.mjs";
import { newTaskId, servePage } from "./pages.mjs";
import { FOLLOW_PAGE, throwawayCertificate } from "./many-tasks-page.mjs";

const TASKS = 12;

// What the client sends on a socket that only did its TLS handshake: a
// ClientHello (1.9 KB from this Chromium, its post-quantum key share
// included) and a Finished. When 12 requests start before Chromium knows
// the origin speaks HTTP/2, it opens up to 6 sockets at once, keeps the
// first HTTP/2 session for every request, and leaves the other sockets
// idle after their handshake: they carry no request, so they are not
// counted as the page's connections.
const HANDSHAKE_ONLY_BYTES = 2_600;

let api, statics, browser, origin, dir, proxy;

/** A TCP proxy to `port` that counts the connections it is asked for. */
async function countingProxy(port) {
  const counted = { connections: 0, bytes: [] };
  const sockets = new Set();
  const server = createServer((client) => {
    counted.connections++;
    const bytes = { up: 0, down: 0 };
    counted.bytes.push(bytes);
    client.on("data", (d) => (bytes.up += d.length));
    const upstream = connect(port, "127.0.0.1");
    upstream.on("data", (d) => (bytes.down += d.length));
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    counted,
    url: `https://127.0.0.1:${server.address().port}`,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

before(async () => {
  if (!existsSync(CHROMIUM.binary)) return;
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  const tls = throwawayCertificate();
  dir = tls.dir;
  api = await startServer(["--cors-origin", origin], { tls });
  proxy = await countingProxy(Number(new URL(api.baseUrl).port));
  statics = await servePage(port, { "/": { type: "text/html", body: FOLLOW_PAGE } });
  browser = await launchChromium(tls.chromiumArgs);
});

after(async () => {
  await browser?.close();
  statics?.close();
  proxy?.close();
  await api?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

for (const transport of ["long-poll", "sse"]) {
  test(`${transport}: 12 tasks followed over HTTP/2 share one connection, and each change is seen within 1 s`, async (t) => {
    if (!browser) return t.skip(`no Chromium at ${CHROMIUM.binary}`);
    const context = await browser.newContext();
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(origin + "/");
    await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
    const ids = [];
    for (let i = 0; i < TASKS; i++) ids.push(await newTaskId(api));
    const before = proxy.counted.connections;
    await page.evaluate(([base, token, how, list]) => window.follow(base, token, how, list), [proxy.url, api.token, transport, ids]);
    // Every watch has sent its request, which the server holds (nothing
    // has happened to a new task yet).
    await page.waitForFunction((n) => new Set(window.statuses.map((s) => s.id)).size === n, TASKS, { timeout: 10_000 });
    await new Promise((r) => setTimeout(r, 1_000));
    const late = [];
    for (const id of ids) {
      const sent = Date.now();
      await api.callback(id, { type: "start", atMs: sent, worker: "w" }, "s");
      const seen = await page.waitForFunction(
        (id) => window.heard.find((h) => h.id === id && h.version === 1)?.at,
        id,
        { timeout: 5_000 },
      );
      const waited = (await seen.jsonValue()) - sent;
      if (waited > 1_000) late.push(`${id}: ${waited} ms`);
    }
    assert.deepEqual(late, [], "every change seen within 1 s");
    const opened = proxy.counted.bytes.slice(before);
    const carried = opened.filter((b) => b.up > HANDSHAKE_ONLY_BYTES);
    assert.equal(carried.length, 1, `one connection carried every watch: ${JSON.stringify(opened)}`);
    const troubled = await page.evaluate(() => window.statuses.filter((s) => s.state !== "connecting" && s.state !== "live"));
    assert.deepEqual(troubled, [], "no watch was ever reconnecting on a healthy network");
    await page.evaluate(() => window.stop());
    assert.deepEqual(errors, []);
    await context.close();
  });
}

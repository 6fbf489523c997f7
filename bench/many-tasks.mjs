// `node bench/many-tasks.mjs`: a page in Chromium following 12 separate
// tasks with one TaskClient, over HTTP/1.1 (the server's plain port) and
// over HTTP/2 (the same server binary with --tls-cert), on long-poll and
// on SSE. Each task changes one at a time, then all 12 at once; the time
// from the callback's answer to the page's onUpdate is printed for each
// (p50 and max over ROUNDS rounds, default 5). Over HTTP/1.1 a browser
// holds at most 6 connections per origin, so the watches past the sixth
// wait for one (docs/client.md, "Troubleshooting").
//
// Needs the package build (npm run build) and the server's debug build.
import { rmSync } from "node:fs";
import { startServer, freePort } from "../tests/js/server.mjs";
import { launchChromium } from "../tests/js/engines.mjs";
import { newTaskId, servePage } from "../tests/js/pages.mjs";
import { FOLLOW_PAGE, throwawayCertificate } from "../tests/js/many-tasks-page.mjs";

const TASKS = 12;
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A change not seen within this long counts as never seen.
const PATIENCE_MS = 10_000;

function summary(ms) {
  const seen = ms.filter((m) => m !== null).sort((a, b) => a - b);
  const missed = ms.length - seen.length;
  if (seen.length === 0) return `none of ${ms.length} changes seen within ${PATIENCE_MS} ms`;
  const line = `p50 ${seen[Math.floor(seen.length / 2)]} ms, max ${seen.at(-1)} ms`;
  return missed === 0 ? `${line} (${ms.length} changes)` : `${line} of those seen; ${missed} of ${ms.length} never seen within ${PATIENCE_MS} ms`;
}

/** Latencies of every change, one at a time and all at once, for one protocol and transport. */
async function measure(api, browser, origin, transport) {
  const page = await browser.newPage();
  await page.goto(origin + "/");
  await page.waitForFunction(() => window.ready === true, null, { timeout: 10_000 });
  const ids = [];
  for (let i = 0; i < TASKS; i++) {
    const id = await newTaskId(api);
    // Started (version 1), so that each change below is a progress report.
    await api.callback(id, { type: "start", atMs: Date.now(), worker: "bench" }, "start");
    ids.push(id);
  }
  await page.evaluate(([base, token, how, list]) => window.follow(base, token, how, list), [api.baseUrl, api.token, transport, ids]);
  await sleep(1_000);
  // When the page heard `id` at `version` (null: not within PATIENCE_MS of `since`).
  const seenAt = (id, version, since) =>
    page
      .waitForFunction(([id, v]) => window.heard.find((h) => h.id === id && h.version === v)?.at, [id, version], { timeout: Math.max(1, since + PATIENCE_MS - Date.now()) })
      .then((h) => h.jsonValue(), () => null);
  const after = (at, sent) => (at === null ? null : at - sent);
  const single = [];
  const together = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Progress 2r + 1 makes version 2r + 2; progress 2r + 2, version 2r + 3.
    for (const id of ids) {
      const sent = Date.now();
      await api.callback(id, { type: "progress", atMs: sent, progress: 2 * round + 1, cursor: "c" }, `one-${round}`);
      single.push(after(await seenAt(id, 2 * round + 2, sent), sent));
    }
    const sent = Date.now();
    await Promise.all(ids.map((id) => api.callback(id, { type: "progress", atMs: sent, progress: 2 * round + 2, cursor: "c" }, `all-${round}`)));
    for (const id of ids) together.push(after(await seenAt(id, 2 * round + 3, sent), sent));
  }
  await page.evaluate(() => window.stop());
  await page.close();
  return { single, together };
}

const tls = throwawayCertificate();
const browser = await launchChromium(tls.chromiumArgs);
try {
  for (const [protocol, options] of [["HTTP/1.1", {}], ["HTTP/2", { tls }]]) {
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    const api = await startServer(["--cors-origin", origin], options);
    const statics = await servePage(port, { "/": { type: "text/html", body: FOLLOW_PAGE } });
    try {
      for (const transport of ["long-poll", "sse"]) {
        const { single, together } = await measure(api, browser, origin, transport);
        console.log(`${protocol} ${transport}: one at a time ${summary(single)}; all at once ${summary(together)}`);
      }
    } finally {
      statics.close();
      await api.stop();
    }
  }
} finally {
  await browser.close();
  rmSync(tls.dir, { recursive: true, force: true });
}

// End-to-end: the demo's 500-item moderation batch in a real Chromium,
// followed over one held request through a real outage (the TCP proxy
// resets every connection and refuses new ones), and shared by two tabs,
// one of which closes. The test reads what the pages show (the grid's
// cells) and counts the batch requests each page makes.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { startProxy } from "./proxy.mjs";
import { SECOND, launchChromium, sleep, startServer } from "./harness.mjs";

/** Counts a page's batch requests: in flight now, the most at once, all, and their bytes. */
function countBatchRequests(page) {
  const c = { inFlight: 0, most: 0, sent: [], bytes: 0 };
  const mine = (r) => new URL(r.url()).pathname.startsWith("/v1/batches/");
  page.on("request", (r) => {
    if (!mine(r)) return;
    c.inFlight += 1;
    c.most = Math.max(c.most, c.inFlight);
    c.sent.push({ at: Date.now(), cursor: Number(new URL(r.url()).searchParams.get("cursor")) });
  });
  const done = async (r, ok) => {
    if (!mine(r)) return;
    c.inFlight -= 1;
    if (ok) c.bytes += (await r.sizes().catch(() => ({ responseBodySize: 0 }))).responseBodySize;
  };
  page.on("requestfinished", (r) => done(r, true));
  page.on("requestfailed", (r) => done(r, false));
  return c;
}

describe("the 500-item batch, in Chromium", { timeout: 240 * SECOND }, () => {
  let server, proxy, browser, origin;

  /** The server's truth for every item, asked directly (not through the proxy). */
  async function truth(batchId) {
    const r = await fetch(`${server.base}/v1/batches/${batchId}/resume?cursor=0`, {
      headers: { authorization: "Bearer demo" },
    });
    assert.equal(r.status, 200);
    return r.json();
  }

  const shown = (page) =>
    page.$$eval("#batch .cell", (cells) => Object.fromEntries(cells.map((c) => [c.dataset.taskId, c.dataset.state])));

  async function waitAllShown(page, batchId, limitMs = 120 * SECOND) {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const server = await truth(batchId);
      const cells = await shown(page);
      const wrong = server.tasks.filter((t) => cells[t.task.id] !== t.task.state);
      if (server.open === 0 && wrong.length === 0) return server;
      assert.ok(Date.now() < deadline, `${wrong.length} cells differ from the server, e.g. ${JSON.stringify(wrong[0]?.task)}`);
      await sleep(250);
    }
  }

  async function startBatch(page, speed) {
    await page.selectOption("#speed", String(speed));
    await page.click('[data-start="batch"]');
    await page.waitForSelector('#batch .cell[data-item="500"]', { timeout: 10 * SECOND });
    return page.$eval("#batch .batch", (n) => n.dataset.batchId);
  }

  before(async () => {
    server = await startServer();
    proxy = await startProxy(server.port);
    origin = `http://127.0.0.1:${proxy.port}`;
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await proxy?.close();
    await server?.stop();
  });

  it("one held request follows all 500 items, and one request resumes them after a 10 s cut", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const counts = countBatchRequests(page);
    await page.goto(`${origin}/`);
    await page.waitForSelector("body[data-ready=true]", { timeout: 20 * SECOND });
    const batchId = await startBatch(page, 1);
    // Let some items finish, then cut the network for 10 s.
    await page.waitForFunction(() => document.querySelectorAll('#batch .cell[data-state="succeeded"]').length >= 20, null, {
      timeout: 60 * SECOND,
    });
    const beforeCut = { sent: counts.sent.length, bytes: counts.bytes };
    proxy.cut();
    await sleep(10 * SECOND);
    const during = await truth(batchId);
    proxy.restore();
    const restoredAt = Date.now();
    await page.waitForFunction(() => document.querySelector("#connection")?.dataset.state === "live", null, { timeout: 20 * SECOND });
    const end = await waitAllShown(page, batchId);
    const after = counts.sent.filter((s) => s.at >= restoredAt);
    assert.ok(after.length > 0, "no request after the network came back");
    assert.ok(after[0].cursor > 1, `the first request after the cut resumed from cursor ${after[0].cursor}, not the one held`);
    assert.equal(counts.most, 1, "at most one batch request in flight at any time");
    assert.deepEqual(errors, []);
    console.log(
      `500-item batch: ${counts.sent.length} batch requests in all (${beforeCut.sent} before the cut, ` +
        `${after.length} after it), ${counts.bytes} response bytes; at the cut the server had ${during.open} items open; ` +
        `final cursor ${end.cursor}`,
    );
    await context.close();
  });

  it("two tabs share one connection, and the second takes over when the first closes", async () => {
    const context = await browser.newContext();
    const first = await context.newPage();
    const firstCounts = countBatchRequests(first);
    await first.goto(`${origin}/`);
    await first.waitForSelector("body[data-ready=true]", { timeout: 20 * SECOND });
    const batchId = await startBatch(first, 1);
    const second = await context.newPage();
    const secondCounts = countBatchRequests(second);
    await second.goto(`${origin}/`);
    await second.waitForSelector("body[data-ready=true]", { timeout: 20 * SECOND });
    // The second tab shows the batch without a request of its own.
    await second.waitForFunction(() => document.querySelectorAll('#batch .cell[data-state="succeeded"]').length >= 10, null, {
      timeout: 60 * SECOND,
    });
    assert.equal(secondCounts.sent.length, 0, "the second tab rides the first tab's connection");
    assert.ok(firstCounts.sent.length > 0);
    const closedAt = Date.now();
    await first.close();
    // The second tab is the leader now: it resumes by delta, within a second or so.
    const deadline = Date.now() + 5 * SECOND;
    while (secondCounts.sent.length === 0) {
      assert.ok(Date.now() < deadline, "the second tab never took over");
      await sleep(25);
    }
    const tookOver = secondCounts.sent[0];
    assert.ok(tookOver.at - closedAt < 2 * SECOND, `took over after ${tookOver.at - closedAt} ms`);
    assert.ok(tookOver.cursor > 1, `resumed from cursor ${tookOver.cursor}`);
    await waitAllShown(second, batchId);
    assert.equal(secondCounts.most, 1);
    console.log(`tab takeover after ${tookOver.at - closedAt} ms, from cursor ${tookOver.cursor}; ${secondCounts.sent.length} requests after it`);
    await context.close();
  });
});

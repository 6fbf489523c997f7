// End-to-end: the demo page (web-demo/) on the package build (dist/client)
// in a real Chromium, against a real taskwire-server --demo, with real
// outages.
//
// The page is loaded through a TCP proxy (same origin), so an outage can
// be made as a real one is: the proxy resets every connection (a held
// long-poll dies, it is not answered) and refuses new ones, and CDP's
// offline emulation makes navigator.onLine false and fires `offline`.
// Restoring undoes both. The test reads only what the page shows: the
// data-* attributes of each task card and of each event-log line.
//
//   node --test tests/e2e/                        (screenshot in tests/e2e/artifacts/)
//   UPDATE_SCREENSHOT=1 node --test tests/e2e/    (also refreshes docs/screenshot.png)
//
// Needs: dist/ (npm run build), a built taskwire-server (debug, or
// TASKWIRE_SERVER), Chromium (CHROME_BIN, default /usr/bin/chromium).

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { startProxy } from "./proxy.mjs";
import { SECOND, launchChromium, pageReader, root, sleep, startServer, until } from "./harness.mjs";

const artifacts = join(root, "tests/e2e/artifacts");
const TOKEN = "demo";

describe("demo page, in Chromium, through real outages", { timeout: 150 * SECOND }, () => {
  let server, proxy, browser, page, cdp, origin;
  const pageErrors = [];
  /** Every Authorization header the page sent. */
  const authorizations = [];
  /** Progress samples: taskId → the last {attempt, progress, version} seen. */
  const lastSeen = new Map();
  const regressions = [];
  let samples = 0;
  let sampling = true;
  let sampler;

  /** Asks the server directly (not through the proxy): the truth, for timing the outages. */
  async function serverTask(id) {
    const response = await fetch(`${server.base}/v1/tasks/${id}/resume?cursor=0`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(response.status, 200);
    return (await response.json()).task;
  }

  async function waitServer(id, predicate, what, limitMs = 60 * SECOND) {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const task = await serverTask(id);
      if (predicate(task)) return task;
      assert.ok(Date.now() < deadline, `server: ${id} never reached ${what}; last ${JSON.stringify(task)}`);
      await sleep(50);
    }
  }

  let card, cardData, waitCard, start, logLines, waitLog;

  const offline = (flag) =>
    cdp.send("Network.emulateNetworkConditions", { offline: flag, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });

  /** A real outage: the browser goes offline and every connection dies. */
  async function cutNetwork() {
    await offline(true);
    proxy.cut();
    // An answer the browser had already received may still be on its way
    // to the page's script; let it land before reading what is shown.
    await sleep(300);
  }

  async function restoreNetwork() {
    proxy.restore();
    await offline(false);
  }

  before(async () => {
    server = await startServer();
    proxy = await startProxy(server.port);
    origin = `http://127.0.0.1:${proxy.port}`;
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    ({ card, cardData, waitCard, start, logLines, waitLog } = pageReader(page));
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("request", (r) => r.headers().authorization && authorizations.push(r.headers().authorization));
    cdp = await page.context().newCDPSession(page);
    await page.goto(`${origin}/`);
    await page.waitForSelector("body[data-ready=true]", { timeout: 20 * SECOND });

    // Samples what the page shows every 50 ms, reloads included: within
    // one attempt, progress must never go down; versions never at all.
    sampler = (async () => {
      while (sampling) {
        let shown = [];
        try {
          shown = await page.$$eval("#tasks .task", (nodes) =>
            nodes.map((n) => ({ id: n.dataset.taskId, attempt: +n.dataset.attempt, progress: +n.dataset.progress, version: +n.dataset.version })),
          );
        } catch {
          // the page is between documents (reload)
        }
        for (const s of shown) {
          const last = lastSeen.get(s.id);
          if (last) {
            if (s.version < last.version) regressions.push(`${s.id}: version ${last.version} → ${s.version}`);
            if (s.attempt < last.attempt) regressions.push(`${s.id}: attempt ${last.attempt} → ${s.attempt}`);
            if (s.attempt === last.attempt && s.progress < last.progress) {
              regressions.push(`${s.id}: progress ${last.progress} → ${s.progress} in attempt ${s.attempt}`);
            }
          }
          lastSeen.set(s.id, s);
          samples += 1;
        }
        await sleep(50);
      }
    })();
  });

  after(async () => {
    sampling = false;
    await sampler;
    await browser?.close();
    await proxy?.close();
    await server?.stop();
  });

  it("runs the batch: a retried quota failure succeeds, invalid input fails, a silent task expires", async () => {
    // Items 1 to 3 of the 500-item grid are the seed's three scenarios.
    await page.selectOption("#speed", "4");
    await page.click('[data-start="batch"]');
    await page.waitForSelector('#batch .cell[data-item="500"]', { timeout: 10 * SECOND });
    const cell = (item) => `#batch .cell[data-item="${item}"]`;
    const waitCell = (item, state) =>
      page.waitForFunction(([s, want]) => document.querySelector(s)?.dataset.state === want, [cell(item), state], {
        timeout: 60 * SECOND,
        polling: 50,
      });
    await waitCell(1, "succeeded");
    await waitCell(2, "failed");
    await waitCell(3, "expired");
    assert.equal(await page.$eval(cell(1), (n) => n.dataset.attempts), "2");
  });

  it("reload mid-task: the client resumes from its persisted cursor", async () => {
    const [id] = await start("long", 2);
    await waitCard(id, (d) => +d.version >= 5);
    const shownBefore = Number((await cardData(id)).version);

    // Requests after the new document commits belong to the reloaded page.
    const resumes = [];
    let committed = false;
    const onNavigated = (frame) => {
      if (frame === page.mainFrame()) committed = true;
    };
    const onRequest = (request) => {
      const url = new URL(request.url());
      if (committed && url.pathname === `/v1/tasks/${id}/resume`) resumes.push(url);
    };
    page.on("framenavigated", onNavigated);
    page.on("request", onRequest);
    await page.reload();
    await page.waitForSelector("body[data-ready=true]");
    const deadline = Date.now() + 10 * SECOND;
    while (resumes.length === 0 && Date.now() < deadline) await sleep(25);
    page.off("framenavigated", onNavigated);
    page.off("request", onRequest);

    assert.ok(resumes.length > 0, "the reloaded page made no resume request");
    const cursor = Number(resumes[0].searchParams.get("cursor"));
    assert.ok(cursor > 0, `first resume after the reload has cursor ${cursor}: the persisted cursor was not used`);
    assert.ok(cursor >= shownBefore, `cursor ${cursor} is behind what the page showed before the reload (v${shownBefore})`);
    const restored = await waitLog(`[data-kind="resume"][data-task-id="${id}"][data-mode="restore"]`);
    assert.equal(Number(restored.from), cursor);
    const resumed = await waitLog(`[data-kind="resume"][data-task-id="${id}"][data-from="${cursor}"]:not([data-mode="restore"])`);
    assert.match(resumed.text, /after reload/);

    // The page's own "Disconnect for N s" aborts the request in flight and
    // fails new ones; when the time is up the watch resumes.
    await page.fill("#cut-seconds", "1");
    await page.click("#cut");
    const lost = await waitLog(`[data-kind="conn"][data-task-id="${id}"]`);
    assert.match(lost.text, /connection lost at v(\d+)/);
    const heldAtCut = /at v(\d+)/.exec(lost.text)[1];
    const back = await waitLog(`[data-kind="resume"][data-task-id="${id}"][data-from="${heldAtCut}"]`);
    assert.ok(["delta", "snapshot", "caught-up"].includes(back.mode), JSON.stringify(back));
    await page.fill("#cut-seconds", "10"); // as a visitor finds it (the screenshot)
    await waitCard(id, (d) => d.state === "succeeded" && d.version === "42");
  });

  it("an outage longer than the resume window is resolved by a snapshot", async () => {
    const [id] = await start("long", 2);
    await waitCard(id, (d) => +d.version >= 4);
    await cutNetwork();
    const heldAtCut = Number((await cardData(id)).version);
    // More than retention (8) versions pass on the server meanwhile.
    await waitServer(id, (t) => t.version >= heldAtCut + 12, `version ${heldAtCut + 12}`);
    await page.waitForSelector('#connection[data-state="offline"]', { timeout: 10 * SECOND });
    assert.equal(Number((await cardData(id)).version), heldAtCut, "the page moved while cut off");
    await restoreNetwork();

    const line = await waitLog(`[data-kind="resume"][data-task-id="${id}"][data-mode="snapshot"]`);
    assert.equal(Number(line.from), heldAtCut);
    assert.ok(Number(line.to) - heldAtCut > 8, JSON.stringify(line));
    assert.match(line.text, /gap \d+ > 8 → snapshot v\d+/);
    assert.equal((await logLines(`[data-kind="resume"][data-task-id="${id}"][data-mode="delta"]`)).length, 0);
    await waitCard(id, (d) => d.state === "succeeded" && d.version === "42");
  });

  it("summary cut at version 3 and restored once its draft waits for approval resumes by delta v4–v5", async () => {
    const [id] = await start("summary", 2);

    // First the server drops every held connection (at v1, 2.6 s before
    // v2). Chromium re-sends a GET whose reused connection closed without
    // an answer, so the watch may not even see it; either way v2 arrives.
    await waitCard(id, (d) => d.version === "1" && d.conn === "live");
    await sleep(300); // its next long-poll is held by now
    const closed = proxy.closedByServer;
    await page.click("#drop");
    await waitLog(`[data-kind="net"][data-dropped]`);
    await until(() => proxy.closedByServer > closed, "the server closes the held connection");
    await waitCard(id, (d) => d.version === "2");

    // Then a real outage from v3 until the draft is held (v5).
    await waitCard(id, (d) => +d.version >= 3);
    await cutNetwork();
    assert.equal((await cardData(id)).version, "3", "cut too late: v4 was already shown");
    await waitServer(id, (t) => t.state === "waiting_approval", "waiting_approval");
    await page.waitForSelector('#connection[data-state="offline"]', { timeout: 10 * SECOND });
    const during = await cardData(id);
    assert.equal(during.version, "3", "the page moved while cut off");
    assert.equal(during.state, "running");
    await restoreNetwork();

    const line = await waitLog(`[data-kind="resume"][data-task-id="${id}"][data-from="3"]`);
    assert.equal(line.mode, "delta");
    assert.equal(line.applied, "4,5");
    assert.match(line.text, /resumed at v3 → delta v4–v5/);
    await waitCard(id, (d) => d.state === "waiting_approval");
    // The draft is approved on the page; the next attempt publishes it.
    await page.click(`${card(id)} [data-decision="approve"]`);
    await waitCard(id, (d) => d.state === "succeeded");
    const done = await cardData(id);
    assert.equal(done.version, "8", "hold v5, approved v6, start v7, succeed v8");
    assert.equal(done.progress, "100");
    assert.equal(await page.$eval(`${card(id)} [data-part="result"]`, (n) => n.textContent), "sha256:ab12");
    // The timeline draws v4 and v5 as having arrived on the resume.
    const resumedDots = await page.$$eval(`${card(id)} .tl-dot.via-resume`, (dots) => dots.map((d) => d.dataset.version));
    assert.deepEqual(resumedDots.filter((v) => v >= 3), ["4", "5"]);
  });

  it("delivering twice with one key returns the same receipt", async () => {
    const id = await page.$eval("#tasks .task[data-workload=summary]", (n) => n.dataset.taskId);
    await page.click(`${card(id)} [data-part="deliver"]`);
    await page.waitForSelector(`${card(id)} [data-part="receipts"][data-equal]`);
    assert.equal(await page.$eval(`${card(id)} [data-part="receipts"]`, (n) => n.dataset.equal), "true");
    assert.equal(await page.$$eval(`${card(id)} .receipt`, (rows) => rows.length), 2);
    const line = await waitLog(`[data-kind="deliver"][data-task-id="${id}"]`);
    assert.equal(line.equal, "true");
  });

  it("counts the duplicates the server absorbed", async () => {
    // The demo's link loses a few answers, so the worker library sends those
    // reports again under the same callback id: the summary's 55 % and its
    // success, and in the batch the quota item's 60 %, the invalid item's 10 %
    // and each retried item's success.
    await page.waitForFunction(() => +document.getElementById("dedup").dataset.deduplicated >= 4, null, { timeout: 10 * SECOND });
  });

  it("never showed progress going backwards, reload and outages included", async () => {
    sampling = false;
    await sampler;
    assert.ok(samples > 500, `only ${samples} samples`);
    assert.deepEqual(regressions, []);
    assert.deepEqual(pageErrors, []);
    mkdirSync(artifacts, { recursive: true });
    const shot = join(artifacts, "demo.png");
    await page.screenshot({ path: shot });
    // The README's screenshot is refreshed on request, not on every run.
    if (process.env.UPDATE_SCREENSHOT) copyFileSync(shot, join(root, "docs/screenshot.png"));
  });

  it("the page holds no tenant token: it sends minted browser tokens only", () => {
    assert.ok(authorizations.length > 0, "the page sent credentials");
    const jwt = /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/;
    assert.deepEqual(authorizations.filter((a) => !jwt.test(a)), [], "only browser tokens (JWTs)");
  });
});

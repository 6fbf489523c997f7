// End-to-end: the demo page's lifecycle controls in a real Chromium,
// against a real taskwire-server --demo (PROTOCOL.md §Lifecycle):
//
// - Cancel on a running task: `cancelling`, then `cancelled` once the
//   worker acknowledges; on the long job past its point of no return the
//   card says the cancel did not take effect, and the task ends
//   `cancelled` with its result kept for compensation;
// - the summary holds its draft: Request changes brings draft 2, approving
//   the replaced draft is refused visibly (`stale-decision`), Approve
//   publishes; Reject fails the task;
// - Kill the worker: the demo's worker (a `taskwire-worker` library worker
//   claiming over HTTP) dies with its jobs, the lease lapses (`unknown`),
//   the task is re-queued, and another worker takes it over (attempt 2)
//   from its checkpoint, as the event log says.
//
// The test reads only what the page shows (data-* attributes, texts).
//
//   node --test tests/e2e/lifecycle.test.mjs

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { SECOND, launchChromium, pageReader, sleep, startServer } from "./harness.mjs";

describe("demo page lifecycle controls, in Chromium", { timeout: 150 * SECOND }, () => {
  let server, browser, page;
  let card, cardData, waitCard, start, waitLog;
  const pageErrors = [];
  const authorizations = [];

  const text = (id, part) => page.$eval(`${card(id)} [data-part="${part}"]`, (n) => (n.hidden ? "" : n.textContent));
  const click = (id, selector) => page.click(`${card(id)} ${selector}`);
  /** The timeline's dots from version `from` on: [version, kind class, title]. */
  const dots = (id, from) =>
    page.$$eval(`${card(id)} .tl-dot`, (nodes) => nodes.map((n) => [+n.dataset.version, n.getAttribute("class"), n.textContent])).then((all) =>
      all.filter(([v]) => v >= from),
    );

  /** Polls the card from here, for conditions that name values of the test. */
  async function cardUntil(id, predicate, what, limitMs = 30 * SECOND) {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const d = await cardData(id);
      if (predicate(d)) return d;
      assert.ok(Date.now() < deadline, `card ${id} never ${what}: ${JSON.stringify(d)}`);
      await sleep(25);
    }
  }

  before(async () => {
    server = await startServer();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("request", (r) => r.headers().authorization && authorizations.push(r.headers().authorization));
    ({ card, cardData, waitCard, start, waitLog } = pageReader(page));
    await page.goto(`${server.base}/`);
    await page.waitForSelector("body[data-ready=true]", { timeout: 20 * SECOND });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("Cancel on a running task: the worker acknowledges and the task is cancelled", async () => {
    const [id] = await start("summary", 1);
    await waitCard(id, (d) => d.state === "running");
    const asked = Number((await cardData(id)).version) + 1;
    await click(id, '[data-part="cancel"]');
    const line = await waitLog(`[data-kind="cancel"][data-task-id="${id}"]`);
    assert.equal(line.reason, "cancel-requested", line.text);
    await waitCard(id, (d) => d.state === "cancelled");
    // Both steps are on the timeline: the page's cancel, then the worker's stop.
    const [cancel, ack] = await dots(id, asked);
    assert.deepEqual([cancel[0], ack[0]], [asked, asked + 1]);
    assert.match(cancel[1], /kind-cancel/);
    assert.match(cancel[2], /cancel asked by user:demo-page-[0-9a-f]{12}/);
    assert.match(ack[2], /the worker stopped/);
    assert.equal(await text(id, "notice"), "cancelled");
    assert.equal(await page.$eval(`${card(id)} [data-part="cancel"]`, (b) => b.disabled), true);
  });

  it("Cancel past the point of no return does not take effect, and says so", async () => {
    const [id] = await start("long", 4);
    await waitCard(id, (d) => +d.progress > 62);
    await click(id, '[data-part="cancel"]');
    await waitCard(id, (d) => d.state === "cancel_ineffective");
    assert.match(await text(id, "notice"), /cancel did not take effect/);
    const note = await waitLog(`[data-kind="executor"][data-note="cannot-cancel"][data-task-id="${id}"]`);
    assert.match(note.text, /cannot stop: the index is being written/);
    await waitCard(id, (d) => d.state === "cancelled");
    assert.match(await text(id, "notice"), /a result arrived anyway and is kept/);
    assert.equal(await text(id, "result"), "sha256:9a7b");
  });

  it("the summary waits for approval; a decision on the replaced draft is refused visibly", async () => {
    const [id] = await start("summary", 4);
    await waitCard(id, (d) => d.state === "waiting_approval");
    assert.match(await text(id, "question"), /Publish draft 1/);
    assert.match(await text(id, "draft"), /drafts\/doc-1\/v1/);
    assert.equal(await text(id, "stale-approve"), "", "no replaced draft yet");
    const first = (await cardData(id)).version;

    await click(id, '[data-decision="request_changes"]');
    await cardUntil(id, (d) => d.state === "waiting_approval" && +d.version > +first, "held draft 2");
    assert.match(await text(id, "draft"), /drafts\/doc-1\/v2/);
    const second = (await cardData(id)).version;

    // As a page still showing draft 1 would: the server refuses it.
    await click(id, '[data-part="stale-approve"]');
    const refused = await waitLog(`[data-kind="decide"][data-refused][data-task-id="${id}"]`);
    assert.equal(refused.reason, "stale-decision");
    assert.match(await text(id, "refusal"), /decision refused \(stale-decision\)/);
    assert.equal((await cardData(id)).version, second, "a refused decision changes nothing");

    await click(id, '[data-decision="approve"]');
    await waitCard(id, (d) => d.state === "succeeded");
    assert.equal(await text(id, "result"), "sha256:ab12");
    assert.equal((await cardData(id)).attempts, "3", "draft, revision, publish");
    // The two decisions granted the two later starts (PROTOCOL.md §Continuations): never "3/1".
    assert.match(await text(id, "attempts"), /^3\/\d+ \+ 2 continued$/);
  });

  it("Reject fails the held task", async () => {
    const [id] = await start("summary", 10);
    await waitCard(id, (d) => d.state === "waiting_approval");
    await click(id, '[data-decision="reject"]');
    await waitCard(id, (d) => d.state === "failed");
    assert.match(await text(id, "error"), /^rejected/);
  });

  it("Kill the worker: unknown, re-queued, another worker takes it over from its checkpoint", async () => {
    const [id] = await start("long", 4);
    await waitCard(id, (d) => +d.progress >= 10 && d.state === "running");
    await click(id, '[data-part="kill"]');
    const killed = await waitLog(`[data-kind="executor"][data-note="kill-sent"][data-task-id="${id}"]`);
    const [, dead] = killed.text.match(/killed (demo-worker-\d+) \(attempt 1\)/) ?? [];
    assert.ok(dead, killed.text);
    await waitCard(id, (d) => d.state === "unknown");
    assert.match(await text(id, "notice"), /lease lapsed: attempt 1 may still be running/);
    await waitCard(id, (d) => d.state === "running" && d.attempt === "2");
    const replaced = await waitLog(`[data-kind="executor"][data-note="replaced"][data-task-id="${id}"]`);
    const [, heir] = replaced.text.match(new RegExp(`(demo-worker-\\d+) took the task over from the killed ${dead} \\(attempt 1\\): attempt 2 goes on from its checkpoint, \\d+ %`)) ?? [];
    assert.ok(heir && heir !== dead, replaced.text);
    await waitCard(id, (d) => d.state === "succeeded");
    assert.equal(await text(id, "result"), "sha256:9a7b");
    assert.equal((await cardData(id)).attempts, "2");
  });

  it("showed no page error and sent browser tokens only", () => {
    assert.deepEqual(pageErrors, []);
    const jwt = /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/;
    assert.ok(authorizations.length > 0);
    assert.deepEqual(authorizations.filter((a) => !jwt.test(a)), []);
  });
});

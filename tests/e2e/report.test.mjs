// End-to-end: what is inside a task (issue 26) on the demo page, in a
// real Chromium against a real taskwire-server --demo whose workers run
// the report on the worker library (job.step, job.spend, job.effect):
// its steps and their labels, its budget against what it used and holds,
// the external write it made, and once it ended its timeline, an
// exhausted budget's partial result, and a cancel's report. The test
// reads only what the page shows (the card's data-* attributes and text).
//
//   node --test tests/e2e/report.test.mjs
//
// Needs: dist/ (npm run build), a built taskwire-server, Chromium.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { SECOND, launchChromium, pageReader, startServer } from "./harness.mjs";

const SUCCEEDED = [
  "attempt.started",
  ...["read", "analyze", "draft"].flatMap(() => ["step.started", "budget.reserved", "model.completed", "step.completed"]),
  "step.started", "side_effect.completed", "step.completed",
  "job.completed",
];

describe("inside a task on the demo page: a report's steps, budget, write and timeline, and a draft to approve, in Chromium", { timeout: 120 * SECOND }, () => {
  let server, browser, page, card, cardData, waitCard, start;
  const pageErrors = [];

  before(async () => {
    server = await startServer();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    ({ card, cardData, waitCard, start } = pageReader(page));
    page.on("pageerror", (e) => pageErrors.push(e.message));
    await page.goto(`${server.base}/`);
    await page.waitForSelector("body[data-ready=true]", { timeout: 20 * SECOND });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("runs four steps within its budget, shows each while it runs, then its timeline", async () => {
    const [id] = await start("report", 4);
    // While it runs: a step running, with tokens held for its call.
    await waitCard(id, (d) => /:running/.test(d.steps ?? "") && Number(d.reserved) > 0);
    const running = await page.$eval(`${card(id)} .inside .step-running`, (n) => n.textContent);
    assert.match(running, /^(read|analyze|draft): running \(\d\/4: .+\)$/);
    await waitCard(id, (d) => d.state === "succeeded" && !!d.timeline);
    const d = await cardData(id);
    assert.equal(d.steps, "read:succeeded,analyze:succeeded,draft:succeeded,publish:succeeded");
    assert.deepEqual([d.used, d.reserved, d.budget], ["4700", "0", "6000"]);
    assert.match(d.effects, /^REP-[0-9a-f]{6}$/, "one write, its id from the tracker");
    assert.deepEqual(d.timeline.split(","), SUCCEEDED);
    const budget = await page.$eval(`${card(id)} .inside .budget`, (n) => n.textContent);
    assert.equal(budget, "4700 of 6000 tokens used, 0 reserved");
    const lines = await page.$$eval(`${card(id)} .timeline-list li`, (nodes) => nodes.map((n) => n.textContent));
    assert.equal(lines.length, SUCCEEDED.length);
    assert.match(lines[3], /^v4 · model\.completed · read · attempt 1 · \d+ ms · 900 tokens · 1:read$/, "a call's step, time and usage");
  });

  it("on a tight budget ends failed with the analysis as its partial result, never past the budget", async () => {
    const [id] = await start("report-tight", 4);
    await waitCard(id, (d) => d.state === "failed" && !!d.timeline);
    const d = await cardData(id);
    assert.equal(d.steps, "read:succeeded,analyze:succeeded,draft:failed,publish:pending");
    assert.deepEqual([d.used, d.reserved, d.budget], ["2600", "0", "3000"]);
    assert.equal(d.effects, "", "nothing was published");
    assert.deepEqual(d.timeline.split(",").slice(-3), ["step.started", "step.failed", "budget.exhausted"]);
    const error = await page.$eval(`${card(id)} [data-part="error"]`, (n) => n.textContent);
    assert.equal(error, "budget-exhausted");
  });

  it("cancelled during a call, shows what the cancel did: finished, interrupted, never run", async () => {
    const [id] = await start("report", 1);
    await waitCard(id, (d) => (d.steps ?? "").includes("analyze:running"));
    await page.click(`${card(id)} [data-part="cancel"]`);
    await waitCard(id, (d) => d.state === "cancelled" && !!d.cancelReport, 30 * SECOND);
    const d = await cardData(id);
    assert.equal(d.cancelReport, "finished=read;interrupted=analyze;notRun=draft|publish;effects=0");
    assert.equal(d.steps, "read:succeeded,analyze:failed,draft:pending,publish:pending");
    assert.equal(d.reserved, "0", "the interrupted call released its reservation");
    const kinds = d.timeline.split(",");
    assert.deepEqual(
      kinds.slice(kinds.indexOf("cancel.requested")),
      ["cancel.requested", "model.completed", "step.failed", "job.cancelled"],
      "after the cancel: the call settled, its step failed, the worker stopped",
    );
    const report = await page.$eval(`${card(id)} .cancel-report`, (n) => n.textContent);
    assert.match(report, /finishedread.*never rundraft, publish/);
  });

  it("the summary's approval shows the draft's text, character for character as its worker wrote it", async () => {
    const [id] = await start("summary", 10);
    await waitCard(id, (d) => d.state === "waiting_approval", 30 * SECOND);
    await page.waitForSelector(`${card(id)} [data-part="draft-text"]:not([hidden])`, { timeout: 10 * SECOND });
    const shown = await page.$eval(`${card(id)} [data-part="draft-text"]`, (n) => ({ text: n.textContent, hash: n.dataset.artifactHash }));
    assert.equal(
      shown.text,
      "Draft 1 of the summary of doc-1. The change adds a state column to invoices and a worker that fills it; " +
        "billing-api and invoice-worker are affected. Run the migration dry-run and the rollback test before release.",
    );
    const held = await page.$eval(`${card(id)} [data-part="approval"]`, (n) => n.dataset.artifactHash);
    assert.equal(shown.hash, held, "the text of the draft the decision names");
  });

  it("raised no page error", () => {
    assert.deepEqual(pageErrors, []);
  });
});

// What the Chromium e2e tests share: a real taskwire-server --demo on a
// free port with an empty data directory, a real Chromium, and the reads
// of what the page shows (the data-* attributes of each task card and of
// each event-log line).

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CHROMIUM, launchChromium as launch } from "../js/engines.mjs";

export const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const SECOND = 1000;

export function findServer() {
  if (process.env.TASKWIRE_SERVER) return process.env.TASKWIRE_SERVER;
  const target = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target");
  const found = ["debug", "server", "release"].map((p) => join(target, p, "taskwire-server")).find(existsSync);
  if (!found) throw new Error(`no taskwire-server under ${target}: cargo build -p taskwire-server (or set TASKWIRE_SERVER)`);
  return found;
}

/** Starts taskwire-server --demo on a free port with an empty data directory. */
export async function startServer() {
  const data = mkdtempSync(join(tmpdir(), "taskwire-e2e-"));
  const child = spawn(
    findServer(),
    [
      "--demo",
      "--listen", "127.0.0.1:0",
      "--data", data,
      "--demo-dir", join(root, "web-demo"),
      "--demo-pkg-dir", join(root, "dist/client"),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 20 * SECOND);
    const read = (chunk) => {
      output += chunk;
      const m = /listening on (http:\/\/\S+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout.setEncoding("utf8").on("data", read);
    child.stderr.setEncoding("utf8").on("data", (c) => (output += c));
    child.once("exit", (code) => reject(new Error(`server exited (${code}):\n${output}`)));
  });
  return {
    base,
    port: Number(new URL(base).port),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGINT");
        await exited;
      }
      rmSync(data, { recursive: true, force: true });
    },
  };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function until(condition, what, limitMs = 10 * SECOND) {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
    await sleep(20);
  }
}

/** Chromium, as these machines run it (never a downloaded browser). */
export async function launchChromium() {
  for (const file of ["index.js", "taskwire_wasm_bg.wasm"]) {
    assert.ok(existsSync(join(root, "dist/client", file)), `dist/client/${file} is missing: run npm run build`);
  }
  assert.ok(existsSync(CHROMIUM.binary), `no Chromium at ${CHROMIUM.binary}: run scripts/setup.sh browser, or set CHROME_BIN`);
  return launch();
}

/** Reads and drives the demo page: cards, workloads, log lines. */
export function pageReader(page) {
  const card = (id) => `#tasks .task[data-task-id="${id}"]`;

  async function cardData(id) {
    return page.$eval(card(id), (node) => ({ ...node.dataset }));
  }

  /** Waits until `predicate(dataset)` holds for a task's card (the predicate runs in the page). */
  async function waitCard(id, predicate, timeout = 60 * SECOND) {
    await page.waitForFunction(
      ([selector, source]) => {
        const node = document.querySelector(selector);
        return node ? new Function(`return (${source})`)()(node.dataset) : false;
      },
      [card(id), predicate.toString()],
      { timeout, polling: 25 },
    );
  }

  /** Clicks a workload button (a one-task workload: the batch has its grid); returns the new task ids. */
  async function start(workload, speed) {
    await page.selectOption("#speed", String(speed));
    const before = new Set(await page.$$eval("#tasks .task", (nodes) => nodes.map((n) => n.dataset.taskId)));
    const expected = 1;
    await page.click(`[data-start="${workload}"]`);
    await page.waitForFunction(
      ([known, n]) => [...document.querySelectorAll("#tasks .task")].filter((t) => !known.includes(t.dataset.taskId)).length === n,
      [[...before], expected],
      { timeout: 10 * SECOND },
    );
    return (await page.$$eval("#tasks .task", (nodes) => nodes.map((n) => n.dataset.taskId))).filter((id) => !before.has(id));
  }

  /** Log lines (newest first) matching a CSS attribute filter, as their data. */
  async function logLines(filter) {
    return page.$$eval(`#log .log-line${filter}`, (nodes) => nodes.map((n) => ({ ...n.dataset, text: n.textContent })));
  }

  async function waitLog(filter, timeout = 30 * SECOND) {
    await page.waitForSelector(`#log .log-line${filter}`, { state: "attached", timeout });
    return (await logLines(filter))[0];
  }

  return { card, cardData, waitCard, start, logLines, waitLog };
}

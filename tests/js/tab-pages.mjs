// What tests/js/tabs.test.mjs drives: its page (a client per tab that
// counts its own requests and records every update), Chromium and Firefox
// behind one small interface with browser contexts and init scripts, and
// the readings of the counting proxy (tests/e2e/proxy.mjs).
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { CHROMIUM, FIREFOX, launchChromium, launchFirefox } from "./engines.mjs";

export const PAGE = `<!doctype html><meta charset="utf-8"><script type="module">
  import init, { TaskClient } from "/pkg/index.js";
  window.start = async ({ baseUrl, headers, share, ids, persist }) => {
    await init();
    window.sent = [];
    window.seen = {};
    const watches = {};
    window.stop = (id) => watches[id].stop();
    const client = (window.client = new TaskClient({
      baseUrl, headers, shareAcrossTabs: share, persist, backoff: { initialMs: 100, maxMs: 400 },
      fetch: (url, init) => (sent.push(url), fetch(url, init)),
    }));
    for (const id of ids) {
      const log = (seen[id] = { updates: [], states: [] });
      const watch = (watches[id] = client.watch(id, {
        onUpdate: (u) => log.updates.push({ mode: u.mode, applied: u.applied, events: u.events.map((e) => e.version), rejected: u.rejected, version: u.task.version, state: u.task.state }),
        onStatus: (s) => log.states.push(s.state),
      }));
      log.initial = watch.version;
      watch.done.then((t) => (log.end = t.state), (e) => (log.end = e.code));
    }
  };
</script>`;

// Firefox reports each cross-origin request that fails at the network
// level as a page error (here: those of a page being closed): the
// browser's diagnostics, not the page's script failing.
const DIAGNOSTIC = /^Cross-Origin Request Blocked: .*\(Reason: CORS request did not succeed\)/;

/**
 * The two engines behind what the test needs: `launch(url)` starts one,
 * whose `group(initScript?)` makes a browser context (pages in it share
 * an origin's locks, channels and sockets) whose `page()` opens `url`.
 */
export const ENGINES = [
  {
    ...CHROMIUM,
    async launch(url) {
      const browser = await launchChromium();
      return {
        async group(init) {
          const context = await browser.newContext();
          if (init) await context.addInitScript(init);
          return { page: () => open(context.newPage(), url), close: () => context.close() };
        },
        close: () => browser.close(),
      };
    },
  },
  {
    ...FIREFOX,
    async launch(url) {
      const browser = await launchFirefox();
      return {
        async group(init) {
          const context = await browser.createBrowserContext();
          return {
            page: () =>
              open(
                context.newPage().then(async (page) => {
                  if (init) await page.evaluateOnNewDocument(init);
                  return page;
                }),
                url,
              ),
            close: () => context.close(),
          };
        },
        close: () => browser.close(),
      };
    },
  },
];

/** The test page, opened; `errors` collects its uncaught errors. */
async function open(opening, url) {
  const page = await opening;
  page.errors = [];
  page.on("pageerror", (e) => {
    const message = e?.message ?? String(e);
    if (!DIAGNOSTIC.test(message)) page.errors.push(message);
  });
  await page.goto(url);
  return page;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function until(check, what, ms = 5000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(10)) if (await check()) return;
  assert.fail(`timed out: ${what}`);
}

export const seen = (page, id) => page.evaluate((id) => window.seen[id], id);
export const sent = (page) => page.evaluate(() => window.sent.length);
export const version = async (page, id) => (await seen(page, id)).updates.at(-1)?.version ?? 0;

/** The held requests by task id (the proxy's unanswered resume requests). */
export function held(proxy) {
  const byTask = {};
  for (const r of proxy.unanswered()) {
    if (r.method !== "GET") continue; // a CORS preflight
    const task = /^\/v1\/tasks\/([^/]+)\/resume/.exec(r.path)?.[1];
    if (task) byTask[task] = (byTask[task] ?? 0) + 1;
  }
  return byTask;
}

/**
 * Waits until the held requests are `expected` (by task id; the next
 * request of a watch follows its answer by a moment), then checks that
 * they stay so.
 */
export async function holds(proxy, expected, what = "held requests by task") {
  await until(() => isDeepStrictEqual(held(proxy), expected), what);
  await sleep(200);
  assert.deepEqual(held(proxy), expected, what);
}

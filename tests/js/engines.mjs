// The browser engines the client's browser tests run in, behind one small
// interface: Chromium through playwright-core (CDP), and a stock Firefox
// ESR through puppeteer-core over WebDriver BiDi (Playwright drives only
// its own patched Firefox). Neither package downloads a browser: both run
// the system's (`CHROME_BIN`, default /usr/bin/chromium; `FIREFOX_BIN`,
// default /usr/bin/firefox-esr).
import { existsSync } from "node:fs";

const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"];

/** Chromium, as these machines run it (never a downloaded browser). */
export const CHROMIUM = { name: "chromium", binary: process.env.CHROME_BIN ?? "/usr/bin/chromium" };

/** Firefox ESR, likewise the system's. */
export const FIREFOX = { name: "firefox", binary: process.env.FIREFOX_BIN ?? "/usr/bin/firefox-esr" };

export const ENGINES = [CHROMIUM, FIREFOX];

/**
 * Chromium as a playwright-core `Browser`, for tests that need its own
 * API (`exposeFunction`, `waitForSelector`, …) rather than `launch`'s;
 * `extraArgs` are more command-line switches.
 */
export async function launchChromium(extraArgs = []) {
  const { chromium } = await import("playwright-core");
  return chromium.launch({ executablePath: CHROMIUM.binary, args: [...CHROMIUM_ARGS, ...extraArgs] });
}

/**
 * Firefox as a puppeteer-core `Browser` (WebDriver BiDi), for tests that
 * need its own API (browser contexts, init scripts) rather than `launch`'s.
 */
export async function launchFirefox() {
  const { default: puppeteer } = await import("puppeteer-core");
  return puppeteer.launch({ browser: "firefox", executablePath: FIREFOX.binary, headless: true });
}

/**
 * Starts `engine`; `null` when its binary is missing (the caller skips,
 * saying why; `npm test` installs both through scripts/setup.sh).
 * Returns `{ newPage(), close() }`; a page has `goto(url)`,
 * `evaluate(fn, arg)`, `errors` (uncaught page errors) and `close()`.
 */
export async function launch(engine) {
  if (!existsSync(engine.binary)) {
    // npm test installs both engines: there a missing one is a failure, not a skip.
    if (process.env.TASKWIRE_BROWSERS_REQUIRED) throw new Error(`no ${engine.name} at ${engine.binary} (scripts/setup.sh browser firefox)`);
    return null;
  }
  if (engine === CHROMIUM) {
    const browser = await launchChromium();
    return wrap(browser, (page, errors) => page.on("pageerror", (e) => errors.push(e.message)));
  }
  const browser = await launchFirefox();
  // Firefox also reports each cross-origin request that fails at the
  // network level (as during an outage) as a page error; those are the
  // browser's diagnostics, not the page's script failing.
  const diagnostic = /^Cross-Origin Request Blocked: .*\(Reason: CORS request did not succeed\)/;
  return wrap(browser, (page, errors) =>
    page.on("pageerror", (e) => {
      const message = e?.message ?? String(e);
      if (!diagnostic.test(message)) errors.push(message);
    }),
  );
}

function wrap(browser, listen) {
  return {
    async newPage() {
      const page = await browser.newPage();
      const errors = [];
      listen(page, errors);
      return {
        errors,
        goto: (url) => page.goto(url),
        evaluate: (fn, arg) => page.evaluate(fn, arg),
        close: () => page.close(),
      };
    },
    close: () => browser.close(),
  };
}

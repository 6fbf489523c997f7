// `node bench/coldstart.mjs`: cold `init()` of the `taskwire/client` page
// in Chromium.
//
// Each trial opens a fresh browser context (empty cache, nothing compiled)
// on a page served from loopback that imports `taskwire/client` from
// dist/client and times `await init()`: fetching the .wasm, compiling and
// instantiating it. Prints the median, p95 and max over TRIALS (default
// 40), for a page as written and for one that preloads the .wasm with
// `<link rel="preload" as="fetch">` (docs/client.md): the fetch in a
// fresh context costs more than the compile. Build first (`npm run
// build`); DIST=dir measures another build's client directory. Chromium:
// CHROME_BIN or /usr/bin/chromium.
import { createServer } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { join, dirname, extname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const TRIALS = Number(process.env.TRIALS ?? 40);
const dist = process.env.DIST ?? join(root, "dist/client");
const chromium = process.env.CHROME_BIN ?? "/usr/bin/chromium";

const PRELOAD = `<link rel="preload" href="/pkg/taskwire_wasm_bg.wasm" as="fetch" type="application/wasm" crossorigin>`;
const PAGE = `<!doctype html><meta charset="utf-8"><!--preload--><script type="module">
  import init from "/pkg/index.js";
  const t0 = performance.now();
  await init();
  window.coldInitMs = performance.now() - t0;
</script>`;

const types = { ".js": "text/javascript", ".wasm": "application/wasm" };
const server = createServer((req, res) => {
  const url = req.url.split("?")[0];
  if (url === "/") return res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
  if (url === "/preloaded") return res.writeHead(200, { "content-type": "text/html" }).end(PAGE.replace("<!--preload-->", PRELOAD));
  const file = join(dist, url.replace(/^\/pkg\//, ""));
  if (!url.startsWith("/pkg/") || !existsSync(file)) return res.writeHead(404).end();
  res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream", "cache-control": "no-store" }).end(readFileSync(file));
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const origin = `http://127.0.0.1:${server.address().port}`;

const { chromium: pw } = await import("playwright-core");
const browser = await pw.launch({
  executablePath: chromium,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
});
/** Cold `init()` times (ms, sorted) of `path` over TRIALS fresh contexts. */
async function trials(path) {
  const times = [];
  for (let i = 0; i < TRIALS; i++) {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(origin + path);
    times.push(await page.waitForFunction(() => window.coldInitMs).then((h) => h.jsonValue()));
    await context.close();
  }
  return times.sort((a, b) => a - b);
}

const results = [];
try {
  results.push(["as written", await trials("/")], ["wasm preloaded", await trials("/preloaded")]);
} finally {
  await browser.close();
  server.close();
}
const wasm = readFileSync(join(dist, "taskwire_wasm_bg.wasm")).length;
for (const [name, times] of results) {
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  console.log(
    `cold init() of taskwire/client (${(wasm / 1024).toFixed(1)} KB .wasm), ${name}, ${TRIALS} fresh contexts: ` +
      `median ${at(0.5).toFixed(1)} ms, p95 ${at(0.95).toFixed(1)} ms, max ${times.at(-1).toFixed(1)} ms`,
  );
}

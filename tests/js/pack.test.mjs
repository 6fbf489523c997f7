// The published artefact, tested as a user meets it: `npm pack`, install
// the tarball into a scratch project, import it from Node, and build a
// page with Vite that runs in Chromium.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, readdirSync, readFileSync, existsSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join, dirname, extname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const scratch = mkdtempSync(join(tmpdir(), "taskwire-pack-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

function sh(cmd, args, cwd) {
  return execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

let tarball;

test("npm pack ships only the whitelisted files", () => {
  const [info] = JSON.parse(sh("npm", ["pack", "--json", "--pack-destination", scratch], root));
  tarball = join(scratch, info.filename);
  // wasm-bindgen names the snippet directory after the crate and a hash.
  const files = info.files.map((f) => f.path.replace(/snippets\/taskwire-wasm-[0-9a-f]+\//, "snippets/taskwire-wasm-<hash>/")).sort();
  const build = (dir, extra = []) =>
    ["api.js", ...extra, "client.js", "cors.js", "error.js", "exports.js", "follow.js", "index.js", "node.js", "snippets/taskwire-wasm-<hash>/js/runtime.js", "tab-watch.js", "tabs.js", "taskwire_wasm.js", "taskwire_wasm_bg.wasm", "token.js", "watch.js"].map((f) => `dist/${dir}/${f}`);
  assert.deepEqual(files, [
    "README.md",
    "dist/client.d.ts",
    ...build("client"),
    ...build("full", ["book.js"]),
    "dist/index.d.ts",
    "dist/react.d.ts",
    "dist/react.js",
    "dist/wire.d.ts",
    "dist/worker.d.ts",
    "dist/worker.js",
    ...["budget.js", "errors.js", "job.js", "output.js", "steps.js", "vendor.js", "wire.js"].map((f) => `dist/worker/${f}`),
    "package.json",
  ]);
});

test("the tarball installs and imports in Node", () => {
  const app = join(scratch, "node-app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  sh("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], app);
  writeFileSync(
    join(app, "main.js"),
    `import { TaskBook, TaskMirror } from "taskwire";
     const book = new TaskBook();
     book.create({ id: "t", nowMs: 0, ttlMs: 1000, maxAttempts: 1 });
     book.apply("t", { type: "start", atMs: 1, worker: "w" });
     const mirror = new TaskMirror("t");
     mirror.mergeJson(book.resumeJson("t", 0));
     const client = await import("taskwire/client");
     const small = new client.TaskMirror("t");
     small.mergeJson(book.resumeJson("t", 0));
     const worker = await import("taskwire/worker");
     // The .wasm files are exported, for a preload or an explicit init().
     const { readFileSync } = await import("node:fs");
     const wasmOk = ["taskwire/wasm", "taskwire/client/wasm"].every((name) =>
       WebAssembly.validate(readFileSync(new URL(import.meta.resolve(name)))));
     console.log(JSON.stringify({ version: mirror.version, state: mirror.state, client: small.version,
       clientHasBook: "TaskBook" in client, hasClient: typeof client.TaskClient,
       hasWorker: typeof worker.createWorker, workerHasClient: "TaskClient" in worker, wasmOk,
       clientWasm: import.meta.resolve("taskwire/client/wasm").endsWith("/dist/client/taskwire_wasm_bg.wasm") }));`,
  );
  assert.deepEqual(JSON.parse(sh("node", ["main.js"], app)), {
    version: 1,
    state: "running",
    client: 1,
    clientHasBook: false,
    hasClient: "function",
    hasWorker: "function",
    workerHasClient: false,
    wasmOk: true,
    clientWasm: true,
  });
});

test("a Vite build of a page using the package runs in Chromium", async (t) => {
  const chromium = process.env.CHROME_BIN ?? "/usr/bin/chromium";
  if (!existsSync(chromium)) {
    t.skip(`no Chromium at ${chromium} (run scripts/setup.sh browser)`);
    return;
  }
  const app = join(scratch, "vite-app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "vite-app", private: true, type: "module" }));
  sh("npm", ["install", "--no-audit", "--no-fund", "--offline", tarball], app);
  writeFileSync(join(app, "index.html"), `<!doctype html><script type="module" src="./main.js"></script><pre id="out">…</pre>`);
  writeFileSync(
    join(app, "main.js"),
    `import init, { TaskBook, TaskMirror } from "taskwire";
     // The exported .wasm, as a page preloads it (docs/client.md).
     import wasmUrl from "taskwire/wasm?url";
     document.head.append(Object.assign(document.createElement("link"), { rel: "preload", as: "fetch", crossOrigin: "anonymous", href: wasmUrl }));
     await init(wasmUrl);
     const book = new TaskBook();
     book.create({ id: "t", nowMs: 0, ttlMs: 1000, maxAttempts: 1 });
     book.apply("t", { type: "start", atMs: 1, worker: "w" });
     const mirror = new TaskMirror("t");
     mirror.merge(book.resume("t", 0));
     document.getElementById("out").textContent = "ok " + mirror.version;`,
  );
  // Top-level await needs an es2022 target.
  writeFileSync(join(app, "vite.config.js"), `export default { build: { target: "es2022" }, logLevel: "warn" };`);
  sh(process.execPath, [join(root, "node_modules/vite/bin/vite.js"), "build"], app);
  const assets = readdirSync(join(app, "dist/assets"));
  assert.ok(assets.some((f) => f.endsWith(".wasm")), `no .wasm asset in ${assets}`);

  const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };
  const server = createServer((req, res) => {
    const path = join(app, "dist", req.url === "/" ? "index.html" : req.url.split("?")[0]);
    if (!existsSync(path)) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" });
    res.end(readFileSync(path));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { chromium: pw } = await import("playwright-core");
  const browser = await pw.launch({
    executablePath: chromium,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    await page.waitForFunction(() => document.getElementById("out").textContent.startsWith("ok"), null, { timeout: 10_000 });
    assert.equal(await page.textContent("#out"), "ok 1");
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    server.close();
  }
});

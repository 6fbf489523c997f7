// What the client's browser tests share: a static server for their test
// page and the package build, a task created with the tenant token, and
// the seed's summary timeline.
import { createServer } from "node:http";
import { existsSync, readFileSync } from "node:fs";
import { dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The package's client build, which a test page loads from `/pkg/`. */
const CLIENT_BUILD = join(dirname(fileURLToPath(import.meta.url)), "../../dist/client");

const CONTENT_TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };

/**
 * Serves on 127.0.0.1:`port` what `route(path)` names: a `{type, body}`
 * answer, a file path (typed by its extension), or `undefined` for 404.
 * Resolves with the `http.Server` once it listens.
 */
export async function serveFiles(port, route) {
  const server = createServer((req, res) => {
    const found = route(req.url.split("?")[0]);
    if (typeof found === "object" && found !== null) return res.writeHead(200, { "content-type": found.type }).end(found.body);
    if (typeof found !== "string" || !existsSync(found)) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": CONTENT_TYPES[extname(found)] ?? "application/octet-stream" }).end(readFileSync(found));
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  return server;
}

/**
 * A test page's origin on 127.0.0.1:`port`: `pages` (path → `{type,
 * body}`: the page, a worker script) and the package's client build at
 * `/pkg/`. Resolves with the `http.Server`.
 */
export function servePage(port, pages) {
  return serveFiles(port, (url) => pages[url] ?? (url.startsWith("/pkg/") ? join(CLIENT_BUILD, url.slice("/pkg/".length)) : undefined));
}

/** Creates a task with the server's tenant token; its id. */
export async function newTaskId(api, body = { ttlMs: 600_000, maxAttempts: 3 }) {
  const r = await (api.fetch ?? fetch)(`${api.baseUrl}/v1/tasks`, {
    method: "POST",
    headers: { ...api.headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return (await r.json()).id;
}

/** The seed's 24.3 s summary (versions 1..5), its times from `t0`. */
export function seedTimeline(t0) {
  return [
    { type: "start", atMs: t0 + 1200, worker: "w" },
    { type: "progress", atMs: t0 + 6400, progress: 25, cursor: "a" },
    { type: "progress", atMs: t0 + 13100, progress: 55, cursor: "b" },
    { type: "progress", atMs: t0 + 20700, progress: 82, cursor: "c" },
    { type: "succeed", atMs: t0 + 24300, resultRef: "r", resultHash: "sha256:ab12" },
  ];
}

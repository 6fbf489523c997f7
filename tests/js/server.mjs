// Starts a real taskwire-server for tests: a free loopback port, a fresh
// temporary data directory, one tenant, a known callback secret. Also
// signs executor callbacks as the Standard Webhooks spec says.
import { spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");

export function serverBinary() {
  const target = process.env.CARGO_TARGET_DIR ? resolve(root, process.env.CARGO_TARGET_DIR) : join(root, "target");
  const bin = join(target, "debug/taskwire-server");
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run cargo build -p taskwire-server`);
  return bin;
}

export async function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/**
 * A running server; `stop()` kills it and removes its data. `kill()` and
 * `restart()` stop it and start it again on the same port and data (a
 * restore test puts other files in `data` in between). `data` defaults
 * to a fresh temporary directory; a `postgres://` URL is used as is.
 */
/**
 * `fetch` for the test's own requests to a TLS server whose certificate
 * is `ca` (PEM, self-signed): Node's global fetch trusts only the CAs it
 * started with. Answers what the helpers below read of a `Response`.
 */
function fetchTrusting(ca) {
  return (url, { method = "GET", headers = {}, body } = {}) =>
    new Promise((resolve, reject) => {
      const req = httpsRequest(url, { method, headers, ca }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () =>
          resolve({ ok: res.statusCode >= 200 && res.statusCode < 300, status: res.statusCode, text: async () => text, json: async () => JSON.parse(text) }),
        );
      });
      req.on("error", reject);
      req.end(body);
    });
}

/**
 * Starts the reference server on a free port. `tls`: `{ cert, key }`
 * (PEM file paths): it serves HTTPS with HTTP/2 (`--tls-cert`), `baseUrl`
 * is `https://`, and the helpers trust that certificate.
 */
export async function startServer(extra = [], { data: dataArg, tls } = {}) {
  const port = await freePort();
  const data = dataArg ?? mkdtempSync(join(tmpdir(), "taskwire-test-"));
  const key = randomBytes(24);
  const secret = "whsec_" + key.toString("base64");
  const token = "tok-" + randomBytes(8).toString("hex");
  let log = "";
  let child;
  const baseUrl = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  const fetch = tls ? fetchTrusting(readFileSync(tls.cert)) : globalThis.fetch;
  if (tls) extra = ["--tls-cert", tls.cert, "--tls-key", tls.key, ...extra];
  async function spawnServer() {
    child = spawn(
      serverBinary(),
      ["--listen", `127.0.0.1:${port}`, "--data", data, "--token", `${token}=tenant`, "--callback-secret", secret, ...extra],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    child.stderr.on("data", (d) => (log += d));
    for (let i = 0; ; i++) {
      try {
        const r = await fetch(`${baseUrl}/v1/notifications`, { headers: { authorization: `Bearer ${token}` } });
        if (r.ok) break;
      } catch {
        // not up yet
      }
      if (i > 100 || child.exitCode !== null) throw new Error(`server did not start:\n${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  async function kill() {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }
  await spawnServer();

  /**
   * A signed callback; its body names the task and its webhook-id is made
   * the task's own, `{taskId}:{id}` (PROTOCOL.md §Executor callback: a
   * tenant's callback id is refused on its other tasks).
   */
  async function callback(taskId, event, shortId) {
    const body = JSON.stringify({ taskId, ...event });
    const id = `${taskId}:${shortId}`;
    const ts = Math.floor(Date.now() / 1000);
    const sig = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
    const r = await fetch(`${baseUrl}/v1/tasks/${taskId}/callbacks`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": `v1,${sig}` },
    });
    if (!r.ok) throw new Error(`callback ${id}: HTTP ${r.status} ${await r.text()}`);
    return r.json();
  }

  async function task(taskId) {
    const r = await fetch(`${baseUrl}/v1/tasks/${taskId}`, { headers: { authorization: `Bearer ${token}` } });
    return r.json();
  }

  return {
    baseUrl,
    token,
    // The callback secret every tenant shares (a worker signs with it).
    secret,
    headers: { Authorization: `Bearer ${token}` },
    // The helpers' fetch: it trusts the server's certificate under `tls`.
    fetch,
    callback,
    task,
    log: () => log,
    data,
    kill,
    restart: spawnServer,
    async stop() {
      await kill();
      if (dataArg === undefined) rmSync(data, { recursive: true, force: true });
    },
  };
}

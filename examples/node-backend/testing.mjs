// Helpers of the backend's own tests (backend.test.mjs, lifecycle.test.mjs):
// start it on a free port, crash it, call it as a tenant and as an
// executor.

import { spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";
import { fileURLToPath } from "node:url";

export const SERVER = fileURLToPath(new URL("./server.mjs", import.meta.url));
export const TOKEN = `tok_${randomBytes(8).toString("hex")}`;
export const SECRET = `whsec_${randomBytes(32).toString("base64")}`;

const dirs = [];
export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), "taskwire-node-backend-"));
  dirs.push(dir);
  return dir;
}
/** Backends still running: a test that failed before its `kill` leaves none behind. */
const running = new Set();
after(() => {
  for (const child of running) child.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Starts the backend on a free port; resolves once it listens. */
export function start(dataDir, extra = [], { secrets = [SECRET] } = {}) {
  const args = [SERVER, "--listen", "127.0.0.1:0", "--token", `${TOKEN}=tenant-a`, ...secrets.flatMap((s) => ["--callback-secret", s]), ...extra];
  if (dataDir) args.push("--data", dataDir);
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let output = "";
  return new Promise((resolve, reject) => {
    const onData = (chunk) => {
      output += chunk;
      const m = /listening on (http:\/\/\S+)/.exec(output);
      if (m) resolve({ child, base: m[1], output: () => output });
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (chunk) => (output += chunk));
    child.once("exit", (code, signal) => reject(new Error(`the backend exited (${code ?? signal}) before listening:\n${output}`)));
  });
}

/** SIGKILL: no shutdown code runs, as in a crash or a power cut. */
export function kill(server) {
  return new Promise((resolve) => {
    if (server.child.exitCode !== null || server.child.signalCode !== null) return resolve();
    server.child.once("exit", resolve);
    server.child.kill("SIGKILL");
  });
}

/** A tenant's requests: {status, json}. */
export async function call(base, method, path, { body, headers = {}, token = TOKEN } = {}) {
  const res = await fetch(base + path, {
    method,
    headers: { ...(token && { authorization: `Bearer ${token}` }), "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** The three signature headers (Standard Webhooks, signed here independently). */
export function signatureHeaders(secret, id, body) {
  const ts = Math.floor(Date.now() / 1000);
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const sig = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": `v1,${sig}` };
}

/**
 * A signed executor callback; its body names the task. The webhook-id is
 * made the task's own (`{taskId}:{id}`): a tenant's callback id is refused
 * on its other tasks, and the tests reuse short ids on every task.
 */
export function callback(base, taskId, event, id = `cb_${randomBytes(8).toString("hex")}`, secret = SECRET) {
  const body = { taskId, ...event };
  return call(base, "POST", `/v1/tasks/${taskId}/callbacks`, {
    body,
    token: null,
    headers: signatureHeaders(secret, `${taskId}:${id}`, JSON.stringify(body)),
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Everything a client can see of some tasks, to compare before and after a restart. */
export async function observe(base, ids) {
  const seen = {};
  for (const id of ids) {
    seen[id] = {
      task: (await call(base, "GET", `/v1/tasks/${id}`)).json,
      resume: (await call(base, "GET", `/v1/tasks/${id}/resume?cursor=0`)).json,
    };
  }
  seen.feed = (await call(base, "GET", "/v1/notifications?limit=1000")).json;
  return seen;
}

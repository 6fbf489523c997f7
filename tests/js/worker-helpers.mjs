// What the taskwire/worker tests share: tasks created and read over
// HTTP with the tenant token, polling for a state, and workers that are
// shut down when their test ends. The server is the real one
// (server.mjs).
import { createWorker } from "../../js/worker.js";

/** Creates a task (tenant token) and answers its view. */
export async function createTask(server, body) {
  const r = await fetch(`${server.baseUrl}/v1/tasks`, {
    method: "POST",
    headers: { ...server.headers, "content-type": "application/json" },
    body: JSON.stringify({ ttlMs: 600_000, maxAttempts: 3, ...body }),
  });
  if (r.status !== 201) throw new Error(`create: HTTP ${r.status} ${await r.text()}`);
  return r.json();
}

/** POSTs a person's request (`cancel`, `decisions`) with the tenant token. */
export async function act(server, taskId, route, body = {}) {
  const r = await fetch(`${server.baseUrl}/v1/tasks/${taskId}/${route}`, {
    method: "POST",
    headers: { ...server.headers, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (r.status !== 200) throw new Error(`${route}: HTTP ${r.status} ${await r.text()}`);
  return r.json();
}

/** The task's history after `cursor` (a resume: the server keeps the last 8 versions by default). */
export async function history(server, taskId, cursor = 0) {
  const r = await fetch(`${server.baseUrl}/v1/tasks/${taskId}/resume?cursor=${cursor}`, { headers: server.headers });
  const answer = await r.json();
  if (answer.mode !== "delta") throw new Error(`history of ${taskId} after ${cursor}: a ${answer.mode} answer, not a delta`);
  return answer.events.map((e) => e.event);
}

/** Polls GET until `predicate(task)` holds; generous, since no test asserts a duration. */
export async function waitForTask(server, taskId, predicate, what = "the expected state") {
  let task;
  for (let i = 0; i < 600; i++) {
    task = await server.task(taskId);
    if (predicate(task)) return task;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`task ${taskId} never reached ${what}; last: ${JSON.stringify(task)}`);
}

/** Resolves when `promise` does, or throws after a generous limit naming `what`. */
export async function within(promise, what, ms = 30_000) {
  let timer;
  const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise with its resolve function outside. */
export function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/**
 * A worker on `server` with `handlers` ({kind: handler}), already
 * running; shut down (grace 0) when the test `t` ends. Warnings are
 * collected in `warnings` instead of printed.
 */
export function startWorker(t, server, handlers, options = {}) {
  const warnings = [];
  const worker = createWorker({
    url: server.baseUrl,
    tenant: "tenant",
    secret: server.secret,
    waitMs: 1_000,
    onWarning: (m) => warnings.push(m),
    ...options,
  });
  for (const [kind, handler] of Object.entries(handlers)) worker.handle(kind, handler);
  const running = worker.run();
  running.catch(() => {});
  t.after(() => worker.shutdown(0));
  return { worker, running, warnings };
}

/** A unique kind per test, so tests sharing a server never take each other's tasks. */
let kinds = 0;
export function kind(name) {
  return `${name}-${++kinds}`;
}

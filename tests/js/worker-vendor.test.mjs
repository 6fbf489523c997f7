// job.vendor (seed 004: submit once under a key, then poll) against the
// real taskwire server and a small vendor of the test's own on loopback:
// a submit whose answer is lost is never sent again blindly.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { startServer } from "./server.mjs";
import { createTask, kind, startWorker, waitForTask } from "./worker-helpers.mjs";

let server, vendor;

/**
 * A vendor that dedups submits by `idempotency-key`: `POST /jobs` creates
 * (or finds) the work; with `?drop=1` it creates it and then cuts the
 * connection without an answer, as a network failure after sending
 * does. `GET /jobs/:id` answers `running` on the first poll, then `done`.
 * `GET /jobs?key=` looks a submission up.
 */
function startVendor() {
  const byKey = new Map();
  const polls = new Map();
  const submits = [];
  const http = createServer((req, res) => {
    const url = new URL(req.url, "http://vendor");
    const json = (status, body) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (req.method === "POST" && url.pathname === "/jobs") {
      const key = req.headers["idempotency-key"];
      submits.push(key);
      if (!byKey.has(key)) byKey.set(key, `v-${byKey.size + 1}`);
      if (url.searchParams.get("drop") === "1") return req.socket.destroy();
      return json(201, { id: byKey.get(key) });
    }
    if (req.method === "GET" && url.pathname === "/jobs") {
      const id = byKey.get(url.searchParams.get("key"));
      return id ? json(200, { id }) : json(404, { error: "no such key" });
    }
    const id = url.pathname.split("/")[2];
    const n = (polls.get(id) ?? 0) + 1;
    polls.set(id, n);
    const slow = url.searchParams.get("slow") === "1";
    return json(200, n < 2 || slow ? { state: "running" } : { state: "done", text: `summary of ${id}` });
  });
  return new Promise((resolve) =>
    http.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${http.address().port}`, submits, close: () => http.close() })),
  );
}

before(async () => {
  server = await startServer();
  vendor = await startVendor();
});
after(() => {
  vendor?.close();
  return server?.stop();
});

/**
 * A handler that runs one vendor step; `drop` loses the submit's answer,
 * `withLookup` gives the helper a lookup, `slow` keeps the vendor's work
 * running past `timeoutMs`.
 */
function vendorHandler({ drop, withLookup, slow, timeoutMs }) {
  return async (job) => {
    const text = await job.vendor({
      step: "summarise",
      submit: async (key, signal) => {
        const r = await fetch(`${vendor.url}/jobs${drop ? "?drop=1" : ""}`, { method: "POST", headers: { "idempotency-key": key }, signal });
        if (!r.ok) throw Object.assign(new Error(`vendor: HTTP ${r.status}`), { status: r.status });
        return (await r.json()).id;
      },
      poll: async (id, signal) => {
        const r = await (await fetch(`${vendor.url}/jobs/${id}${slow ? "?slow=1" : ""}`, { signal })).json();
        return r.state === "done" ? { done: true, value: r.text } : { done: false };
      },
      ...(withLookup && {
        lookup: async (key, signal) => {
          const r = await fetch(`${vendor.url}/jobs?key=${encodeURIComponent(key)}`, { signal });
          return r.status === 404 ? undefined : (await r.json()).id;
        },
      }),
      firstDelayMs: 50,
      timeoutMs,
    });
    return { resultRef: `mem://${text}`, resultHash: "sha256:v" };
  };
}

test("job.vendor submits once under job.key(step, 'submit') and polls to the result", async (t) => {
  const k = kind("vendor-ok");
  startWorker(t, server, { [k]: vendorHandler({ drop: false }) });
  const created = await createTask(server, { kind: k });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.match(done.resultRef, /^mem:\/\/summary of v-\d+$/);
  assert.deepEqual(vendor.submits.filter((key) => key.startsWith(created.id)), [`${created.id}:summarise:submit`]);
});

test("a submit whose outcome is unknown is never sent again: without lookup the task fails final", async (t) => {
  const k = kind("vendor-unknown");
  startWorker(t, server, { [k]: vendorHandler({ drop: true }) });
  // Three attempts allowed: the failure must be final, not retried.
  const created = await createTask(server, { kind: k, maxAttempts: 3 });
  const failed = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.equal(failed.attempts, 1);
  assert.match(failed.error, /^SubmitUnknownError: .*outcome of the submit under key .*:summarise:submit is unknown/);
  assert.deepEqual(vendor.submits.filter((key) => key.startsWith(created.id)), [`${created.id}:summarise:submit`], "one submit, never repeated");
});

test("a submit whose outcome is unknown is looked up, and the work found is polled to the result", async (t) => {
  const k = kind("vendor-lookup");
  startWorker(t, server, { [k]: vendorHandler({ drop: true, withLookup: true }) });
  const created = await createTask(server, { kind: k });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.match(done.resultRef, /^mem:\/\/summary of v-\d+$/);
  assert.equal(vendor.submits.filter((key) => key.startsWith(created.id)).length, 1, "found by lookup, not submitted again");
});

test("polls stop at timeoutMs and the task fails final: the vendor's work may still be running", async (t) => {
  const k = kind("vendor-slow");
  startWorker(t, server, { [k]: vendorHandler({ slow: true, timeoutMs: 300 }) });
  const created = await createTask(server, { kind: k, maxAttempts: 3 });
  const failed = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.equal(failed.attempts, 1);
  assert.match(failed.error, /^FatalError: vendor step summarise: no result before the timeout; the vendor's work under key .*:summarise:submit may still be running$/);
});

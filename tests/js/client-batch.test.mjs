// TaskClient.createBatch and watchBatch (PROTOCOL.md §Batches) in Node
// against the real server, through a TCP proxy that really cuts every
// connection (tests/e2e/proxy.mjs). A batch of 50 is followed over
// long-poll and over SSE while its tasks run, 45 succeeding and 5
// failing, with an outage in the middle. A `fetch` wrapper counts the
// requests: one held at a time for the whole batch, every one a batch
// route, and one request to resume after the cut (from the cursor held)
// that brings everything that changed meanwhile. Every task ends as the
// server has it, no task's update goes back, the aggregate counts are
// right, `done` resolves with the 50 tasks in item order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { TaskClient } from "../../dist/client/node.js";
import { startProxy } from "../e2e/proxy.mjs";
import { startServer } from "./server.mjs";
import { installStorage } from "./storage.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const N = 50;

async function until(what, check, ms = 20_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * `fetch` that records every request (url, Last-Event-ID, start time) and
 * how many are in flight: from the call until the body is read to its end,
 * fails, or the request is aborted.
 */
function countingFetch() {
  const rec = { requests: [], inFlight: 0, maxInFlight: 0 };
  rec.fetch = async (url, init) => {
    rec.inFlight += 1;
    rec.maxInFlight = Math.max(rec.maxInFlight, rec.inFlight);
    rec.requests.push({ url: new URL(url), lastEventId: init.headers?.["last-event-id"], at: Date.now() });
    let ended = false;
    const end = () => {
      if (!ended) {
        ended = true;
        rec.inFlight -= 1;
      }
    };
    init.signal?.addEventListener("abort", end);
    let response;
    try {
      response = await fetch(url, init);
    } catch (e) {
      end();
      throw e;
    }
    if (!response.body || response.status === 204) {
      end();
      return response;
    }
    const reader = response.body.getReader();
    const body = new ReadableStream({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            end();
            controller.close();
          } else {
            controller.enqueue(value);
          }
        } catch (e) {
          end();
          controller.error(e);
        }
      },
      cancel(reason) {
        end();
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  return rec;
}

const items = Array.from({ length: N }, (_, i) => ({ ttlMs: 600_000, maxAttempts: 1, kind: "moderation", input: { item: i } }));

/** The fields of a task view (the server's GET adds kind, input, batchId). */
const view = ({ id, state, version, attempts, progress, resultRef, resultHash, error }) => ({ id, state, version, attempts, progress, resultRef, resultHash, error });

async function followThroughACut(transport) {
  const server = await startServer();
  const proxy = await startProxy(Number(new URL(server.baseUrl).port));
  const rec = countingFetch();
  try {
    const client = new TaskClient({
      baseUrl: `http://127.0.0.1:${proxy.port}`,
      headers: server.headers,
      fetch: rec.fetch,
      transport,
      waitMs: 20_000,
      backoff: { initialMs: 50, maxMs: 250 },
    });
    const key = `moderation-${transport}`;
    const created = await client.createBatch(items, { idempotencyKey: key });
    assert.equal(created.size, N);
    assert.equal(created.tasks.length, N);
    assert.deepEqual(created.tasks.map((t) => t.input.item), items.map((_, i) => i), "item order");
    assert.ok(created.tasks.every((t) => t.batchId === created.batchId && t.state === "queued"));
    const again = await client.createBatch(items, { idempotencyKey: key });
    assert.equal(again.batchId, created.batchId, "the same key answers the same batch");
    const ids = created.tasks.map((t) => t.id);
    rec.requests.length = 0;

    const updates = new Map(ids.map((id) => [id, []]));
    const progress = [];
    // Run in each update, before the loop sends its next request.
    let onEachUpdate = () => {};
    // Long-poll starts from the create's answer (by delta, from its
    // cursor); SSE from nothing (a snapshot first).
    const start = transport === "long-poll" ? { cursor: created.cursor, tasks: created.tasks } : {};
    const watch = client.watchBatch(created.batchId, {
      ...start,
      onUpdate: (u) => {
        updates.get(u.task.id).push(u.task);
        onEachUpdate();
      },
      onProgress: (p) => progress.push(p),
    });
    if (transport === "long-poll") {
      assert.equal(watch.tasks.length, N, "the create's tasks are known at once");
      assert.equal(watch.cursor, created.cursor);
      assert.equal(progress.length, 1, "and their aggregate");
    }
    const t = Date.now();
    const states = (state) => ids.filter((id) => watch.task(id)?.state === state).length;
    for (const id of ids) await server.callback(id, { type: "start", atMs: t, worker: "w" }, "start");
    for (const id of ids.slice(0, 25)) await server.callback(id, { type: "progress", atMs: t + 1, progress: 50, cursor: "half" }, "half");
    await until("every task running", () => states("running") === N && watch.task(ids[24]).progress === 50);

    // The outage: every connection reset, new ones refused.
    const cutAt = Date.now();
    proxy.cut();
    await sleep(300);
    const held = watch.cursor;
    for (const id of ids.slice(25)) await server.callback(id, { type: "progress", atMs: t + 2, progress: 70, cursor: "more" }, "more");
    for (const id of ids.slice(0, 20)) await server.callback(id, { type: "succeed", atMs: t + 3, resultRef: `r/${id}`, resultHash: "h" }, "done");
    for (const id of ids.slice(45)) await server.callback(id, { type: "fail", atMs: t + 3, error: "refused", retryable: false }, "fail");
    const restoredAt = Date.now();
    let afterCut;
    const caughtUp = () => states("succeeded") === 20 && states("failed") === 5 && watch.task(ids[30]).progress === 70;
    onEachUpdate = () => {
      if (caughtUp() && afterCut === undefined) afterCut = rec.requests.filter((r) => r.at >= restoredAt);
    };
    proxy.restore();
    await until("the changes made during the cut", () => afterCut !== undefined);
    assert.equal(afterCut.length, 1, `one request resumed after the cut: ${afterCut.map((r) => r.url.search || r.lastEventId)}`);
    const [resume] = afterCut;
    if (transport === "long-poll") assert.equal(resume.url.searchParams.get("cursor"), String(held), "from the cursor held");
    else assert.equal(resume.lastEventId, String(held), "from the cursor held");

    for (const id of ids.slice(20, 45)) await server.callback(id, { type: "succeed", atMs: t + 4, resultRef: `r/${id}`, resultHash: "h" }, "done");
    const done = await watch.done;

    assert.deepEqual(done.map((task) => task.id), ids, "done: the tasks in item order");
    const truth = await Promise.all(ids.map((id) => server.task(id)));
    assert.deepEqual(done.map(view), truth.map(view), "every task as the server has it");
    assert.deepEqual(watch.tasks.map(view), truth.map(view));
    for (const [id, seen] of updates) {
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].version > seen[i - 1].version, `${id}: versions only rise`);
      assert.deepEqual(view(seen.at(-1)), view(truth[ids.indexOf(id)]), `${id}: its last update`);
    }
    const last = progress.at(-1);
    assert.deepEqual(watch.progress, last);
    assert.equal(last.size, N);
    assert.equal(last.terminal, N);
    assert.equal(last.progress, 100);
    assert.equal(last.counts.succeeded, 45);
    assert.equal(last.counts.failed, 5);
    for (const p of progress) {
      assert.equal(Object.values(p.counts).reduce((a, b) => a + b, 0), N, "the counts cover every task");
      assert.equal(Object.keys(p.counts).length, 11, "every state");
    }
    for (let i = 1; i < progress.length; i++) assert.ok(progress[i].terminal >= progress[i - 1].terminal, "terminal only grows");
    assert.ok(progress.some((p) => p.terminal === 25 && p.counts.succeeded === 20), "the aggregate after the cut");
    assert.equal(watch.status.state, "closed");

    assert.equal(rec.maxInFlight, 1, "one held request at a time for the whole batch");
    const route = transport === "long-poll" ? "resume" : "events";
    for (const r of rec.requests) {
      assert.ok(r.url.pathname.startsWith(`/v1/batches/${created.batchId}/`), r.url.pathname);
    }
    assert.ok(rec.requests.some((r) => r.url.pathname.endsWith(`/${route}`)), `over ${route}`);
    if (transport === "long-poll") {
      assert.ok(rec.requests.every((r) => !r.url.searchParams.has("snapshot")), "started by delta, never a snapshot");
    }
    // Outside the outage, at most one request per change of the batch
    // (each callback above is one commit), never one per task.
    const commits = N + 25 + 25 + 20 + 5 + 25;
    const outside = rec.requests.filter((r) => r.at < cutAt || r.at >= restoredAt).length;
    assert.ok(outside <= commits + 2, `${outside} requests for ${commits} changes`);
  } finally {
    await proxy.close();
    await server.stop();
  }
}

test("a batch of 50 over long-poll: one held request, one to resume after a real cut, every task right", () =>
  followThroughACut("long-poll"));

test("a batch of 50 over SSE: one stream, one to resume after a real cut, every task right", () => followThroughACut("sse"));

test("persist: a new page restores the batch and ends it with one request", async () => {
  const storage = installStorage();
  const server = await startServer();
  try {
    const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: true, backoff: { initialMs: 50, maxMs: 200 } });
    const created = await client.createBatch(items.slice(0, 3));
    const watch = client.watchBatch(created.batchId);
    const t = Date.now();
    for (const task of created.tasks) {
      await server.callback(task.id, { type: "start", atMs: t, worker: "w" }, "s");
      await server.callback(task.id, { type: "succeed", atMs: t + 1, resultRef: "r", resultHash: "h" }, "d");
    }
    const first = await watch.done;
    const stored = JSON.parse(storage.get(`taskwire:batch:${created.batchId}`));
    assert.equal(stored.cursor, watch.cursor, "one key per batch, at the cursor held");
    const rec = countingFetch();
    const reloaded = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: true, fetch: rec.fetch });
    const again = reloaded.watchBatch(created.batchId);
    assert.deepEqual(again.tasks, first, "known before any answer");
    assert.deepEqual(await again.done, first);
    assert.equal(rec.requests.length, 1);
    assert.equal(rec.requests[0].url.searchParams.get("cursor"), String(stored.cursor));
    // A corrupt stored value is ignored: the batch is fetched whole.
    storage.set(`taskwire:batch:${created.batchId}`, "{not json");
    const fresh = reloaded.watchBatch(created.batchId);
    assert.deepEqual(fresh.tasks, []);
    assert.deepEqual((await fresh.done).map(view), first.map(view));
  } finally {
    await server.stop();
    delete globalThis.localStorage;
  }
});

test("errors: a bad item names it, an unknown batch is not-found, options are checked", async () => {
  const server = await startServer();
  try {
    const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers });
    const bad = await client.createBatch([items[0], { ttlMs: -1, maxAttempts: 1 }]).catch((e) => e);
    assert.ok(bad instanceof Error);
    assert.equal(bad.code, "invalid-request");
    assert.match(bad.message, /body\.items\[1\]\.ttlMs/);
    assert.equal(bad.status, 400);
    await assert.rejects(client.createBatch("nope"), { code: "invalid-request", message: /^items: must be an array/ });
    const unknown = client.watchBatch("bat_nope");
    const e = await unknown.done.catch((e) => e);
    assert.ok(e instanceof Error);
    assert.equal(e.code, "not-found");
    assert.match(e.message, /no such batch/);
    assert.throws(() => client.watchBatch("b", { cursor: 3 }), { code: "invalid-request", message: /^options\.tasks: required with options\.cursor/ });
    assert.throws(() => client.watchBatch("b", { tasks: [] }), { code: "invalid-request", message: /^options\.cursor: required/ });
    assert.throws(() => client.watchBatch("b", { cursor: 1, tasks: [{ id: "t" }] }), { code: "invalid-request", message: /^options\.tasks\[0\]\.task\.\w+: required/ });
    assert.throws(() => client.watchBatch("b", { onProgress: 1 }), { code: "invalid-request", message: "options.onProgress: must be a function" });
    const stopped = client.watchBatch((await client.createBatch(items.slice(0, 1))).batchId);
    stopped.stop();
    await assert.rejects(stopped.done, { code: "stopped", message: /before the batch ended/ });
  } finally {
    await server.stop();
  }
});

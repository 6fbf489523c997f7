// The client's executor (js/follow.js over the Rust Follow) against a
// scripted `fetch`: deterministic answers, no server. Each test asserts
// what the page sees (updates never regress) and which requests were
// made: the watch loop (duplicates, gaps, backoff, Retry-After, 404,
// stop, offline, SSE and its fallback, a network change, stale answers)
// and the POSTs of cancel and decide (route, headers, body, retries,
// error answers). These ran as wasm-bindgen tests while the executor
// was Rust (wasm/tests/client.rs, actions.rs).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { TaskClient } from "../../dist/client/node.js";
import { installNetwork } from "./network.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A fetch that answers `steps` in order (the last one again and again) and records every call. */
function scripted(steps) {
  const calls = [];
  let i = 0;
  const fetch = (url, init) => {
    const call = { url, method: init.method, headers: init.headers, body: init.body, aborted: false };
    calls.push(call);
    const step = steps[Math.min(i++, steps.length - 1)];
    return new Promise((resolve, reject) => {
      init.signal.addEventListener("abort", () => {
        call.aborted = true;
        reject(new DOMException("aborted", "AbortError"));
      });
      if (step.hang) return;
      setTimeout(() => {
        if (step.error) reject(new TypeError(step.error));
        else resolve(new Response(typeof step.body === "string" ? step.body : JSON.stringify(step.body), { status: step.status ?? 200, headers: step.headers ?? {} }));
      }, step.delayMs ?? 0);
    });
  };
  return { fetch, calls };
}

const network = installNetwork(true);
after(() => network.uninstall());

/** Waits until `done()` holds (at most 5 s: a loaded machine delays every timer); the ms waited. */
async function until(done) {
  const start = Date.now();
  while (!done() && Date.now() - start < 5_000) await sleep(5);
  return Date.now() - start;
}

function view(version, state, progress) {
  const extra = state === "succeeded" ? ',"resultRef":"r","resultHash":"h"' : "";
  return JSON.parse(`{"id":"t","state":"${state}","expiresAtMs":1e12,"attempts":1,"maxAttempts":3,"progress":${progress},"version":${version}${extra}}`);
}

function progress(version, p) {
  if (version === 1) return { version: 1, event: { type: "start", atMs: 1, worker: "w" } };
  return { version, event: { type: "progress", atMs: version, progress: p, cursor: "" } };
}

/** A watch of task `t` over `steps`, recording what the page hears. */
function harness(steps, { transport = "long-poll", initialMs = 1, maxMs = 5 } = {}) {
  const script = scripted(steps);
  const events = [];
  const client = new TaskClient({ baseUrl: "http://backend.test", headers: { authorization: "Bearer t" }, fetch: script.fetch, backoff: { initialMs, maxMs }, transport });
  const watch = client.watch("t", {
    onUpdate: (u) => events.push(["update", u]),
    onStatus: (s) => events.push(["status", s]),
    onReject: (r) => events.push(["reject", r]),
  });
  watch.done.then(
    (task) => events.push(["done", task]),
    (e) => events.push(["fail", e]),
  );
  const of = (kind) => events.filter(([k]) => k === kind).map(([, v]) => v);
  const states = () => of("status").map((s) => s.state);
  return {
    watch,
    calls: script.calls,
    of,
    states,
    urls: () => script.calls.map((c) => c.url),
    versions: () => of("update").map((u) => u.task.version),
    async closed() {
      await until(() => states().at(-1) === "closed");
      await sleep(0); // `done` settles after the last status
    },
    assertMonotonic() {
      let last = [-1, -1, -1];
      for (const { task } of of("update")) {
        assert.ok(task.version > last[0], `version went from ${last[0]} to ${task.version}`);
        if (task.attempts === last[1]) assert.ok(task.progress >= last[2], `progress went from ${last[2]} to ${task.progress}`);
        last = [task.version, task.attempts, task.progress];
      }
    },
  };
}

const cursorOf = (url) => url.split("cursor=")[1].split("&")[0];

test("duplicates and stale replays never reach the page", async () => {
  const e3 = { version: 3, event: { type: "succeed", atMs: 3, resultRef: "r", resultHash: "h" } };
  const v0 = { ...view(0, "queued", 0), attempts: 0 };
  const h = harness([
    { body: { mode: "delta", events: [progress(1, 0)], task: view(1, "running", 0) } },
    { body: { mode: "delta", events: [progress(1, 0)], task: view(1, "running", 0) } },
    { body: { mode: "snapshot", events: [], task: v0 } },
    { body: { mode: "delta", events: [progress(2, 40), e3], task: view(3, "succeeded", 100) } },
  ]);
  await h.closed();
  assert.deepEqual(h.versions(), [1, 3]);
  h.assertMonotonic();
  assert.deepEqual(h.urls().map(cursorOf), ["0", "1", "1", "1"]);
  assert.ok(h.urls()[0].startsWith("http://backend.test/v1/tasks/t/resume?cursor=0&waitMs="));
  const rejects = h.of("reject");
  assert.equal(rejects.length, 2, "the duplicate delta and the stale snapshot");
  assert.equal(rejects[0].rejected[0].reason, "duplicate");
  assert.equal(rejects[1].rejected[0].reason, "stale-snapshot");
  assert.equal(h.of("done").length, 1);
  assert.equal(h.states().at(-1), "closed");
  // Updates carry the entries they applied.
  const first = h.of("update")[0];
  assert.equal(first.events.length, 1);
  assert.equal(first.events[0].version, 1);
  // The update that finished carries the rejections since the last one.
  assert.equal(h.of("update").at(-1).rejected.length, 2);
});

test("a gap asks for a snapshot", async () => {
  const h = harness([
    { body: { mode: "delta", events: [progress(1, 0)], task: view(1, "running", 0) } },
    { body: { mode: "delta", events: [progress(3, 50)], task: view(3, "running", 50) } },
    { body: { mode: "snapshot", events: [], task: view(3, "running", 50) } },
    { body: { mode: "snapshot", events: [], task: view(4, "succeeded", 100) } },
  ]);
  await h.closed();
  const urls = h.urls();
  assert.ok(urls[2].includes("snapshot=1"), urls.join(" "));
  assert.ok(!urls[2].includes("waitMs"), "a snapshot request is not held");
  assert.ok(!urls[3].includes("snapshot=1"), `back to normal resumes: ${urls}`);
  assert.deepEqual(h.versions(), [1, 3, 4]);
  h.assertMonotonic();
  assert.equal(h.of("reject")[0].rejected[0].reason, "gap");
});

test("network errors and bad bodies retry with backoff", async () => {
  const h = harness([{ error: "connection reset" }, { body: "this is not json" }, { status: 502, body: "" }, { body: { mode: "snapshot", events: [], task: view(2, "succeeded", 100) } }]);
  await h.closed();
  const reconnecting = h.of("status").filter((s) => s.state === "reconnecting");
  assert.deepEqual(
    reconnecting.map((s) => s.attempt),
    [1, 2, 3],
  );
  const errors = reconnecting.map((s) => s.error);
  assert.ok(errors[0].includes("connection reset"), errors.join(" | "));
  assert.ok(errors[1].startsWith("bad answer from the server"), errors.join(" | "));
  assert.ok(errors[2].includes("502"), errors.join(" | "));
  for (const s of reconnecting) assert.ok(s.retryInMs >= 0 && s.retryInMs <= 5, `full jitter under maxMs 5: ${s.retryInMs}`);
  assert.equal(h.of("done").length, 1);
  assert.equal(h.urls().length, 4);
});

test("Retry-After is a floor", async () => {
  const h = harness([{ status: 429, body: "", headers: { "retry-after": "2" } }, { hang: true }]);
  await until(() => h.states().at(-1) === "reconnecting");
  await sleep(100);
  const status = h.of("status").at(-1);
  assert.equal(status.state, "reconnecting");
  assert.ok(status.retryInMs >= 2000);
  assert.equal(h.urls().length, 1, "no request before Retry-After");
  h.watch.stop();
});

test("not found stops for good", async () => {
  const h = harness([{ status: 404, body: '{"error":{"code":"not-found","message":"x"}}' }]);
  await h.closed();
  const fail = h.of("fail");
  assert.equal(fail.length, 1);
  assert.equal(fail[0].code, "not-found");
  assert.equal(fail[0].status, 404);
  assert.equal(h.states().at(-1), "closed");
  assert.equal(h.urls().length, 1, "a 404 is never retried");
});

test("stop aborts the request in flight", async () => {
  const h = harness([{ hang: true }]);
  await until(() => h.urls().length === 1);
  assert.equal(h.urls().length, 1);
  h.watch.stop();
  await sleep(50);
  assert.equal(h.calls[0].aborted, true);
  assert.equal(h.of("fail")[0].code, "stopped");
  assert.equal(h.states().at(-1), "closed");
  await sleep(50);
  assert.equal(h.urls().length, 1, "nothing after stop()");
});

test("offline makes no requests, and online reconnects at once", async () => {
  network.nav.onLine = false;
  const h = harness([{ body: { mode: "snapshot", events: [], task: view(1, "succeeded", 100) } }]);
  try {
    await sleep(100);
    assert.equal(h.calls.length, 0, "no request while offline");
    assert.equal(h.states().at(-1), "offline");
    // The `online` event: navigator.onLine flips, and the watch hears it.
    network.set(true);
    const ms = await until(() => h.calls.length === 1);
    assert.ok(ms < 1_000, `reconnected after ${ms} ms: it waited for the 5 s recheck timer`);
  } finally {
    network.nav.onLine = true;
    h.watch.stop();
  }
});

const SSE = { "content-type": "text/event-stream" };

test("SSE streams deltas with Last-Event-ID", async () => {
  const e2 = { version: 2, event: { type: "succeed", atMs: 2, resultRef: "r", resultHash: "h" } };
  const answer = (events, task) => JSON.stringify({ mode: "delta", events, task });
  const stream = `event: resume\nid: 1\ndata: ${answer([progress(1, 0)], view(1, "running", 0))}\n\n: hb\n\nevent: resume\nid: 2\ndata: ${answer([e2], view(2, "succeeded", 100))}\n\n`;
  const h = harness([{ body: stream, headers: SSE }], { transport: "sse" });
  await h.closed();
  assert.equal(h.calls.length, 1, "one stream carried the whole task");
  assert.equal(h.urls()[0], "http://backend.test/v1/tasks/t/events");
  assert.equal(h.calls[0].headers["last-event-id"], "0");
  assert.equal(h.calls[0].headers.authorization, "Bearer t");
  assert.deepEqual(h.versions(), [1, 2]);
  assert.equal(h.of("done").length, 1);
});

test("SSE falls back to long-poll after short streams", async () => {
  const h = harness([{ body: "", headers: SSE }, { body: "", headers: SSE }, { body: "", headers: SSE }, { body: { mode: "snapshot", events: [], task: view(3, "succeeded", 100) } }], { transport: "sse" });
  await h.closed();
  const urls = h.urls();
  assert.equal(urls.length, 4, urls.join(" "));
  assert.ok(
    urls.slice(0, 3).every((u) => u.endsWith("/events")),
    urls.join(" "),
  );
  assert.ok(urls[3].includes("/resume?cursor=0&waitMs="), `fell back to long-poll: ${urls}`);
  assert.ok(
    h.of("status").some((s) => s.error?.includes("falling back to long-poll")),
    "the fallback is reported",
  );
  assert.equal(h.of("done").length, 1);
});

test("a network change restarts a request stranded on a dead connection", async () => {
  // The first request hangs forever (a connection that died silently).
  const h = harness([{ hang: true }, { body: { mode: "snapshot", events: [], task: view(2, "succeeded", 100) } }]);
  await until(() => h.urls().length === 1);
  assert.equal(h.urls().length, 1);
  network.set(true);
  await h.closed();
  assert.equal(h.calls[0].aborted, true);
  assert.equal(h.calls.length, 2, "reconnected at once, not after waitMs + grace");
  assert.ok(!h.states().includes("reconnecting"), `a network change is not a failure: no backoff, states ${h.states()}`);
  assert.equal(h.of("done").length, 1);
  assert.equal(h.of("update").at(-1).events.length, 0, "a snapshot applies no events");
});

test("stale answers are retried with backoff, not in a loop", async () => {
  // A broken server (or cache) that answers an old snapshot at once, every time.
  const h = harness(
    [{ body: { mode: "delta", events: [progress(1, 0), progress(2, 20)], task: view(2, "running", 20) } }, { body: { mode: "snapshot", events: [], task: view(1, "running", 0) } }],
    { initialMs: 40, maxMs: 40 },
  );
  const attempts = () => h.of("status").filter((s) => s.attempt !== undefined).length;
  let elapsed = await until(() => attempts() >= 2);
  if (elapsed < 200) {
    await sleep(200 - elapsed);
    elapsed = 200;
  }
  h.watch.stop();
  const n = h.urls().length;
  // Backoff waits random(0, 40) ms between them: about 10 in 200 ms;
  // without it, a request every few milliseconds.
  assert.ok(n < (25 * elapsed) / 200, `${n} requests in ${elapsed} ms: a tight loop`);
  const seen = h
    .of("status")
    .map((s) => s.attempt)
    .filter((a) => a !== undefined);
  assert.ok(seen.length >= 2 && seen.every((a, i) => i === 0 || a === seen[i - 1] + 1), String(seen));
  assert.deepEqual(h.versions(), [2], "the stale snapshot never reached the page");
});

// ---- cancel and decide ------------------------------------------------------

const ANSWER = { changed: true, duplicate: false, reason: "cancel-requested", task: { id: "t/1", state: "cancelling", version: 2 } };

function poster(steps) {
  const script = scripted(steps);
  const client = new TaskClient({ baseUrl: "http://backend.test/", headers: { authorization: "Bearer t" }, fetch: script.fetch, backoff: { initialMs: 1, maxMs: 2 } });
  return { client, calls: script.calls };
}

test("cancel posts to its route with the client's headers and resolves to the answer", async () => {
  const { client, calls } = poster([{ body: ANSWER }]);
  assert.deepEqual(await client.cancel("t/1", { reason: "why" }), ANSWER);
  assert.equal(calls.length, 1);
  assert.equal(calls[0].url, "http://backend.test/v1/tasks/t%2F1/cancel");
  assert.equal(calls[0].method, "POST");
  assert.equal(calls[0].body, '{"reason":"why"}');
  assert.equal(calls[0].headers.authorization, "Bearer t");
  assert.equal(calls[0].headers["content-type"], "application/json");
});

test("decide is retried after a 503 and answers once", async () => {
  const { client, calls } = poster([{ status: 503, headers: { "retry-after": "0" }, body: { error: { code: "storage-unavailable", message: "disk full" } } }, { body: ANSWER }]);
  await client.decide("t", { decision: "approve", artifactHash: "sha256:a", version: 3 });
  assert.equal(calls.length, 2, "one retry after the 503");
  for (const call of calls) {
    assert.equal(call.url, "http://backend.test/v1/tasks/t/decisions");
    assert.equal(call.body, '{"decision":"approve","artifactHash":"sha256:a","version":3}', "the same request again");
  }
});

test("an error answer rejects with the server's code and status", async () => {
  const { client, calls } = poster([{ status: 404, body: { error: { code: "not-found", message: "taskId: no task" } } }]);
  const err = await client.cancel("t").then(
    () => assert.fail("resolved"),
    (e) => e,
  );
  assert.ok(err instanceof Error);
  assert.equal(err.code, "not-found");
  assert.equal(err.status, 404);
  assert.equal(calls.length, 1, "a 404 is not retried");
});

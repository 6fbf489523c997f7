// The client's JavaScript layer in Node, against the real server:
// persistence, network events, listener errors, stop(), fatal answers,
// option errors. Browser globals (localStorage, navigator.onLine,
// addEventListener) are installed by hand, as a window or worker has them.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { TaskClient, TaskwireError } from "../../dist/client/node.js";
import { startServer } from "./server.mjs";
import { installStorage } from "./storage.mjs";
import { installNetwork } from "./network.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** fetch that records every URL. */
function recording() {
  const urls = [];
  const fn = (url, init) => {
    urls.push(url);
    return fetch(url, init);
  };
  return { urls, fetch: fn };
}

async function newTask(client) {
  return client.createTask({ ttlMs: 600_000, maxAttempts: 3, kind: "summary" });
}

async function advance(taskId, steps, prefix) {
  const t = Date.now();
  const events = [
    { type: "start", atMs: t, worker: "w" },
    { type: "progress", atMs: t + 1, progress: 25, cursor: "a" },
    { type: "progress", atMs: t + 2, progress: 55, cursor: "b" },
    { type: "progress", atMs: t + 3, progress: 82, cursor: "c" },
    { type: "succeed", atMs: t + 4, resultRef: "r", resultHash: "sha256:ab12" },
  ];
  for (const i of steps) await server.callback(taskId, events[i], `${prefix}-${i}`);
}

test("persist: a new page resumes from the stored cursor, by delta", async () => {
  const storage = installStorage();
  try {
    const first = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: true });
    const task = await newTask(first);
    const watch = first.watch(task.id);
    await advance(task.id, [0, 1, 2], "p");
    while (watch.version < 3) await sleep(10);
    watch.stop();
    const stored = JSON.parse(storage.get(`taskwire:${task.id}`));
    assert.equal(stored.task.version, 3);

    // "Reload": a new client; the first request must carry cursor 3.
    const rec = recording();
    const modes = [];
    const second = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: true, fetch: rec.fetch });
    const again = second.watch(task.id, { onUpdate: (u) => modes.push([u.mode, u.applied]) });
    assert.equal(again.version, 3, "the restored task is there before any request");
    await advance(task.id, [3, 4], "p");
    const done = await again.done;
    assert.equal(done.state, "succeeded");
    assert.match(rec.urls[0], /cursor=3&/);
    assert.deepEqual(modes.flatMap(([, a]) => a), [4, 5]);
    assert.ok(modes.every(([m]) => m === "delta"));
    assert.equal(JSON.parse(storage.get(`taskwire:${task.id}`)).task.state, "succeeded");
  } finally {
    delete globalThis.localStorage;
  }
});

test("persist: a corrupt or foreign stored value is ignored, never a crash", async () => {
  const storage = installStorage();
  try {
    const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: "app:" });
    for (const junk of ["{not json", JSON.stringify({ taskId: "someone-else", task: null }), "null", '{"taskId":"x","task":{"id":"y"}}']) {
      const task = await newTask(client);
      storage.set(`app:${task.id}`, junk);
      const rec = recording();
      const c = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, persist: "app:", fetch: rec.fetch });
      const watch = c.watch(task.id);
      assert.equal(watch.task, undefined);
      await advance(task.id, [0, 1, 2, 3, 4], `j${junk.length}`);
      assert.equal((await watch.done).version, 5);
      assert.match(rec.urls[0], /cursor=0&/, junk);
    }
  } finally {
    delete globalThis.localStorage;
  }
});

test("offline: no requests; the online event reconnects at once", async () => {
  const net = installNetwork(false);
  try {
    const rec = recording();
    const states = [];
    const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, fetch: rec.fetch });
    const task = await newTask(new TaskClient({ baseUrl: server.baseUrl, headers: server.headers }));
    const watch = client.watch(task.id, { onStatus: (s) => states.push(s.state) });
    await sleep(150);
    assert.equal(rec.urls.length, 0, "no request while offline");
    assert.equal(watch.status.state, "offline");
    await advance(task.id, [0, 1], "o");
    const t0 = performance.now();
    net.set(true);
    while (watch.version < 2) await sleep(2);
    const ms = performance.now() - t0;
    // The offline re-check timer is 5 s: only the event explains this.
    assert.ok(ms < 1000, `caught up ${ms.toFixed(0)} ms after the online event`);
    assert.deepEqual(states.slice(0, 3), ["connecting", "offline", "live"]);
    watch.stop();
  } finally {
    net.uninstall();
  }
});

test("network change: a request stranded on a dead connection is restarted at once", async () => {
  const net = installNetwork(true);
  try {
    let calls = 0;
    let abortedFirst = false;
    const stranded = (url, init) => {
      calls++;
      if (calls > 1) return fetch(url, init);
      // The first connection died silently: no answer, no error, ever.
      return new Promise((_, reject) =>
        init.signal.addEventListener("abort", () => {
          abortedFirst = true;
          reject(new DOMException("aborted", "AbortError"));
        }),
      );
    };
    const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, fetch: stranded });
    const task = await newTask(new TaskClient({ baseUrl: server.baseUrl, headers: server.headers }));
    const watch = client.watch(task.id);
    await sleep(50);
    await advance(task.id, [0, 1], "x");
    net.set(false);
    await sleep(20);
    const t0 = performance.now();
    net.set(true);
    while (watch.version < 2) await sleep(2);
    assert.ok(abortedFirst, "the stranded request was aborted");
    assert.ok(performance.now() - t0 < 1000, "reconnected at once, not after waitMs + grace (40 s)");
    watch.stop();
  } finally {
    net.uninstall();
  }
});

test("a throwing listener does not break the watch", async () => {
  const errors = [];
  globalThis.reportError = (e) => errors.push(e.message);
  try {
    const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers });
    const task = await newTask(client);
    const watch = client.watch(task.id, {
      onUpdate() {
        throw new Error("listener bug");
      },
    });
    await advance(task.id, [0, 1, 2, 3, 4], "l");
    assert.equal((await watch.done).state, "succeeded");
    assert.ok(errors.length >= 5 && errors.every((m) => m === "listener bug"), "each error is reported");
  } finally {
    delete globalThis.reportError;
  }
});

test("stop(): done rejects with code stopped, status closed, no more requests", async () => {
  const rec = recording();
  const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, fetch: rec.fetch });
  const task = await newTask(new TaskClient({ baseUrl: server.baseUrl, headers: server.headers }));
  const watch = client.watch(task.id);
  await sleep(100); // a long-poll is now held by the server
  watch.stop();
  await assert.rejects(watch.done, (e) => e instanceof TaskwireError && e.code === "stopped");
  assert.equal(watch.status.state, "closed");
  const n = rec.urls.length;
  await advance(task.id, [0, 1], "s");
  await sleep(100);
  assert.equal(rec.urls.length, n);
});

test("[Symbol.dispose]: stops the watch and frees it; done rejects with code stopped", async () => {
  const rec = recording();
  const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, fetch: rec.fetch });
  const task = await newTask(new TaskClient({ baseUrl: server.baseUrl, headers: server.headers }));
  const watch = client.watch(task.id);
  await sleep(100); // a long-poll is now held by the server
  assert.equal(typeof watch[Symbol.dispose], "function");
  watch[Symbol.dispose]();
  await assert.rejects(watch.done, (e) => e instanceof TaskwireError && e.code === "stopped");
  assert.equal(watch.status.state, "closed");
  const n = rec.urls.length;
  await advance(task.id, [0, 1], "dispose");
  await sleep(100);
  assert.equal(rec.urls.length, n, "no request after dispose");
  watch[Symbol.dispose](); // twice is harmless
  watch.stop();
});

test("401 and 404 end the watch with their code; never retried", async () => {
  const rec = recording();
  const bad = new TaskClient({ baseUrl: server.baseUrl, headers: { Authorization: "Bearer wrong" }, fetch: rec.fetch });
  const w = bad.watch("tsk_anything");
  await assert.rejects(w.done, (e) => e.code === "unauthorized" && e.status === 401);
  const good = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, fetch: rec.fetch });
  const w2 = good.watch("tsk_missing");
  await assert.rejects(w2.done, (e) => e.code === "not-found" && e.status === 404);
  await sleep(100);
  assert.equal(rec.urls.length, 2);
});

test("createTask and deliver report the server's errors with code and status", async () => {
  const client = new TaskClient({ baseUrl: server.baseUrl, headers: server.headers });
  await assert.rejects(client.createTask({ ttlMs: -1, maxAttempts: 1 }), (e) => e.code === "invalid-request" && e.status === 400 && /ttlMs/.test(e.message));
  const task = await newTask(client);
  await assert.rejects(client.deliver(task.id, "k1"), (e) => e.code === "not-succeeded" && e.status === 409);
  await advance(task.id, [0, 4], "d");
  const a = await client.deliver(task.id, "k1");
  const b = await client.deliver(task.id, "k1");
  assert.deepEqual(a, b, "the same key returns the same receipt");
  const same = await client.createTask({ ttlMs: 1000, maxAttempts: 1 }, { idempotencyKey: "c1" });
  assert.equal((await client.createTask({ ttlMs: 1000, maxAttempts: 1 }, { idempotencyKey: "c1" })).id, same.id);
  const down = new TaskClient({ baseUrl: "http://127.0.0.1:9", headers: server.headers, backoff: { initialMs: 1, maxMs: 2 } });
  await assert.rejects(down.createTask({ ttlMs: 1000, maxAttempts: 1 }), (e) => e instanceof TaskwireError && e.code === "network");
});

test("HTTP errors are TaskwireErrors: PROTOCOL.md codes (the Rust list) as sent, others http-<status>", async () => {
  const answer = (status, body) => async () => new Response(body, { status });
  const cases = [
    [answer(418, "teapot"), "http-418", "HTTP 418"],
    [answer(400, JSON.stringify({ error: { code: "made-up", message: "m" } })), "http-400", "m"],
    [answer(409, JSON.stringify({ error: { code: "not-succeeded", message: "no result" } })), "not-succeeded", "no result"],
    [answer(201, "not json"), "http-201", "HTTP 201"],
  ];
  for (const [fetch, code, message] of cases) {
    const client = new TaskClient({ baseUrl: "http://127.0.0.1:9", fetch });
    await assert.rejects(client.createTask({ ttlMs: 1000, maxAttempts: 1 }), (e) => {
      assert.ok(e instanceof TaskwireError && e instanceof Error, String(e));
      assert.deepEqual([e.name, e.code, e.message, e.status], ["TaskwireError", code, message, Number(code.slice(5)) || e.status]);
      return true;
    });
  }
  const w = new TaskClient({ baseUrl: "http://127.0.0.1:9", fetch: answer(403, "") }).watch("t");
  await assert.rejects(w.done, (e) => e instanceof TaskwireError && e.code === "forbidden" && e.status === 403);
});

test("bad options are coded errors that name the field", () => {
  const cases = [
    [() => new TaskClient(), "options"],
    [() => new TaskClient({ baseUrl: "ftp://x" }), "options.baseUrl"],
    [() => new TaskClient({ baseUrl: 5 }), "options.baseUrl"],
    [() => new TaskClient({ baseUrl: "http://x", headers: { a: 1 } }), "options.headers.a"],
    [() => new TaskClient({ baseUrl: "http://x", transport: "ws" }), "options.transport"],
    [() => new TaskClient({ baseUrl: "http://x", backoff: { initialMs: -1 } }), "options.backoff.initialMs"],
    [() => new TaskClient({ baseUrl: "http://x", fetch: "no" }), "options.fetch"],
    [() => new TaskClient({ baseUrl: "http://x", persist: 3 }), "options.persist"],
    [() => new TaskClient({ baseUrl: "http://x", shareAcrossTabs: 1 }), "options.shareAcrossTabs"],
    [() => new TaskClient({ baseUrl: "http://x", shareAcrossTabs: "" }), "options.shareAcrossTabs"],
    [() => new TaskClient({ baseUrl: "http://x" }).watch(""), "taskId"],
    [() => new TaskClient({ baseUrl: "http://x" }).watch("t", { cursor: "3" }), "options.cursor"],
    [() => new TaskClient({ baseUrl: "http://x" }).watch("t", { onUpdate: 1 }), "options.onUpdate"],
  ];
  for (const [fn, field] of cases) {
    assert.throws(fn, (e) => e instanceof TaskwireError && e.code === "invalid-request" && e.message.startsWith(field), field);
  }
});

// TaskClient and the lifecycle (PROTOCOL.md §Lifecycle) against the real
// reference server: `cancel` and `decide` post to their routes with the
// client's credential and answer `{changed, duplicate, reason, task}`; a
// retry after a lost answer is judged a duplicate; errors are
// TaskwireErrors with the server's code; `watch` reports every new state
// and `done` settles on every terminal one.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { TaskClient, TaskwireError } from "../../dist/client/node.js";
import { startServer } from "./server.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function client(extra = {}) {
  return new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, backoff: { initialMs: 5, maxMs: 20 }, ...extra });
}

/** An executor event of `attempt`, now. */
const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), attempt, ...extra });

/** Watches `id`, collecting the state of every update. */
function follow(c, id) {
  const states = [];
  const watch = c.watch(id, { onUpdate: (u) => states.push(u.task.state) });
  return { watch, states };
}

/** Waits until the watch shows `state`: one update per state, so none is merged with the next. */
const shown = (watch, state) => until(() => watch.task?.state === state, state);

async function until(probe, what) {
  const deadline = Date.now() + 5000;
  while (!probe()) {
    assert.ok(Date.now() < deadline, `never ${what}`);
    await sleep(10);
  }
}

/** The types of the task's history entries. */
async function history(id) {
  const r = await fetch(`${server.baseUrl}/v1/tasks/${id}/resume?cursor=0`, { headers: server.headers });
  return (await r.json()).events.map((e) => e.event);
}

test("cancel: a queued task is cancelled at once, a repeat is a duplicate, done settles", async () => {
  const c = client();
  const task = await c.createTask({ ttlMs: 600_000, maxAttempts: 1 });
  const { watch, states } = follow(c, task.id);
  const answer = await c.cancel(task.id, { reason: "changed my mind" });
  assert.deepEqual([answer.changed, answer.duplicate, answer.reason, answer.task.state], [true, false, "cancelled", "cancelled"]);
  const again = await c.cancel(task.id);
  assert.deepEqual([again.changed, again.reason, again.task.version], [false, "duplicate-cancel", answer.task.version]);
  const done = await watch.done;
  assert.equal(done.state, "cancelled");
  assert.deepEqual(states, ["cancelled"]);
  const [entry] = await history(task.id);
  assert.deepEqual([entry.type, entry.reason, entry.actor], ["cancel", "changed my mind", "tenant:tenant"], "the actor is the client's credential");
});

test("cancel of a running task: watch sees cancelling, cancel_ineffective, then cancelled", async () => {
  const c = client();
  const task = await c.createTask({ ttlMs: 600_000, maxAttempts: 1 });
  const { watch, states } = follow(c, task.id);
  await server.callback(task.id, ev("start", 1, { worker: "w", leaseMs: 60_000 }), "s");
  await shown(watch, "running");
  const asked = await c.cancel(task.id);
  assert.deepEqual([asked.reason, asked.task.state], ["cancel-requested", "cancelling"]);
  await shown(watch, "cancelling");
  const beat = await server.callback(task.id, ev("heartbeat", 1), "hb");
  assert.equal(beat.cancelRequested, true);
  await server.callback(task.id, ev("cannot_cancel", 1, { reason: "remote job" }), "no");
  await shown(watch, "cancel_ineffective");
  await server.callback(task.id, ev("succeed", 1, { resultRef: "blob://r", resultHash: "sha256:r" }), "ok");
  assert.equal((await watch.done).state, "cancelled");
  assert.deepEqual(states, ["running", "cancelling", "cancel_ineffective", "cancelled"]);
  await assert.rejects(c.deliver(task.id, "d1"), (e) => e.code === "not-succeeded" && e.status === 409);
});

test("decide: stale decisions change nothing; approve re-queues; the next attempt finishes", async () => {
  const c = client();
  const task = await c.createTask({ ttlMs: 600_000, maxAttempts: 2 });
  const { watch, states } = follow(c, task.id);
  await server.callback(task.id, ev("start", 1, { worker: "w", leaseMs: 60_000 }), "s1");
  await shown(watch, "running");
  const held = await server.callback(task.id, ev("hold", 1, { artifactRef: "blob://draft", artifactHash: "sha256:d1", question: "Publish?" }), "hold");
  await shown(watch, "waiting_approval");
  assert.deepEqual([watch.task.artifactHash, watch.task.question], ["sha256:d1", "Publish?"]);
  const version = held.version;
  const otherArtifact = await c.decide(task.id, { decision: "approve", artifactHash: "sha256:old", version });
  assert.deepEqual([otherArtifact.changed, otherArtifact.reason], [false, "stale-decision"]);
  const olderVersion = await c.decide(task.id, { decision: "approve", artifactHash: "sha256:d1", version: version - 1 });
  assert.equal(olderVersion.reason, "stale-decision");
  const approved = await c.decide(task.id, { decision: "approve", artifactHash: "sha256:d1", version, reason: "fine" });
  assert.deepEqual([approved.changed, approved.reason, approved.task.state], [true, "approved", "queued"]);
  assert.deepEqual([approved.task.decision, approved.task.decisionVersion, approved.task.decisionReason], ["approve", version, "fine"]);
  const repeat = await c.decide(task.id, { decision: "approve", artifactHash: "sha256:d1", version, reason: "fine" });
  assert.deepEqual([repeat.changed, repeat.reason], [false, "duplicate-decision"]);
  await shown(watch, "queued");
  await server.callback(task.id, ev("start", 2, { worker: "w", leaseMs: 60_000 }), "s2");
  await shown(watch, "running");
  await server.callback(task.id, ev("succeed", 2, { resultRef: "blob://final", resultHash: "sha256:f" }), "ok");
  assert.equal((await watch.done).state, "succeeded");
  assert.deepEqual(states, ["running", "waiting_approval", "queued", "running", "succeeded"]);
  const decide = (await history(task.id)).find((e) => e.type === "decide");
  assert.equal(decide.actor, "tenant:tenant");
});

test("a cancel whose answer was lost is retried and judged a duplicate: one cancel recorded", async () => {
  let lost = 0;
  const losing = async (url, init) => {
    const response = await fetch(url, init);
    if (url.endsWith("/cancel") && lost === 0) {
      lost++;
      await response.body?.cancel();
      throw new TypeError("fetch failed (response lost)");
    }
    return response;
  };
  const c = client({ fetch: losing });
  const task = await c.createTask({ ttlMs: 600_000, maxAttempts: 1 });
  const answer = await c.cancel(task.id);
  assert.equal(lost, 1, "the first answer was lost");
  assert.deepEqual([answer.changed, answer.duplicate, answer.reason, answer.task.state], [false, true, "duplicate-cancel", "cancelled"]);
  assert.deepEqual((await history(task.id)).map((e) => e.type), ["cancel"]);
});

test("a 503 before the decision is retried; the decision is taken once", async () => {
  let refused = 0;
  const flaky = async (url, init) => {
    if (url.endsWith("/decisions") && refused === 0) {
      refused++;
      return new Response(JSON.stringify({ error: { code: "storage-unavailable", message: "disk full" } }), { status: 503, headers: { "retry-after": "0" } });
    }
    return fetch(url, init);
  };
  const c = client({ fetch: flaky });
  const task = await c.createTask({ ttlMs: 600_000, maxAttempts: 1 });
  await server.callback(task.id, ev("start", 1, { worker: "w", leaseMs: 60_000 }), "s");
  const held = await server.callback(task.id, ev("hold", 1, { artifactRef: "blob://a", artifactHash: "sha256:a" }), "h");
  const rejected = await c.decide(task.id, { decision: "reject", artifactHash: "sha256:a", version: held.version, reason: "off topic" });
  assert.equal(refused, 1);
  assert.deepEqual([rejected.changed, rejected.reason, rejected.task.state], [true, "rejected", "failed"]);
});

test("timed_out: done settles on the deadline", async () => {
  const c = client();
  const task = await c.createTask({ ttlMs: 600_000, maxAttempts: 1, deadlineMs: 300 });
  assert.equal(task.deadlineAtMs, task.expiresAtMs - 600_000 + 300);
  const { watch, states } = follow(c, task.id);
  await server.callback(task.id, ev("start", 1, { worker: "w", leaseMs: 60_000 }), "s");
  const done = await watch.done;
  assert.equal(done.state, "timed_out");
  assert.equal(states.at(-1), "timed_out");
});

test("cancel and decide: the server's errors with code and status; bad options named locally", async () => {
  const c = client();
  await assert.rejects(c.cancel("tsk_missing"), (e) => e instanceof TaskwireError && e.code === "not-found" && e.status === 404);
  const task = await c.createTask({ ttlMs: 600_000, maxAttempts: 1 });
  await assert.rejects(
    c.decide(task.id, { decision: "maybe", artifactHash: "sha256:a", version: 1 }),
    (e) => e instanceof TaskwireError && e.code === "invalid-request" && e.status === 400 && /decision/.test(e.message),
  );
  const stranger = new TaskClient({ baseUrl: server.baseUrl, headers: { Authorization: "Bearer wrong" } });
  await assert.rejects(stranger.cancel(task.id), (e) => e.code === "unauthorized" && e.status === 401);
  const local = [
    [() => c.cancel(5), "taskId"],
    [() => c.cancel(task.id, null), "options"],
    [() => c.cancel(task.id, { reason: 5 }), "options.reason"],
    [() => c.decide(task.id), "options"],
    [() => c.decide(task.id, { decision: 1, artifactHash: "h", version: 1 }), "options.decision"],
    [() => c.decide(task.id, { decision: "approve", version: 1 }), "options.artifactHash"],
    [() => c.decide(task.id, { decision: "approve", artifactHash: "h", version: "3" }), "options.version"],
  ];
  for (const [call, field] of local) {
    await assert.rejects(call(), (e) => e instanceof TaskwireError && e.code === "invalid-request" && e.message.startsWith(field), field);
  }
  assert.equal((await server.task(task.id)).version, 0, "nothing reached the task");
});

test("cancel and decide: POST to their routes with the client's headers and only the named fields", async () => {
  const calls = [];
  const answer = { changed: true, duplicate: false, reason: "cancelled", task: { id: "t/1", state: "cancelled", version: 1 } };
  const recording = async (url, init) => {
    calls.push({ url, method: init.method, headers: init.headers, body: init.body });
    return new Response(JSON.stringify(answer), { status: 200, headers: { "content-type": "application/json" } });
  };
  const c = new TaskClient({ baseUrl: "http://backend.test/", headers: { Authorization: "Bearer k" }, fetch: recording });
  assert.deepEqual(await c.cancel("t/1", { reason: "why", actor: "someone" }), answer);
  await c.cancel("t/1");
  await c.decide("t/1", { decision: "request_changes", artifactHash: "sha256:a", version: 4, atMs: 1 });
  assert.deepEqual(
    calls.map(({ url, method, body }) => [method, url, JSON.parse(body)]),
    [
      ["POST", "http://backend.test/v1/tasks/t%2F1/cancel", { reason: "why" }],
      ["POST", "http://backend.test/v1/tasks/t%2F1/cancel", {}],
      ["POST", "http://backend.test/v1/tasks/t%2F1/decisions", { decision: "request_changes", artifactHash: "sha256:a", version: 4 }],
    ],
  );
  for (const { headers } of calls) {
    assert.equal(headers.Authorization, "Bearer k");
    assert.equal(headers["content-type"], "application/json");
  }
});

// A TaskClient's lifetime and what it blames on the network (issue 29),
// through a fetch that plays the server:
// - `dispose()` (and `[Symbol.dispose]`) stops every watch it started,
//   aborts their requests, and refuses later calls with `stopped`;
// - a long-poll the client cuts on its own timer (waitMs + 15 s without
//   an answer: a browser may not have sent it yet, queued behind its 6
//   connections per origin) is sent again at once and is no failure: no
//   `reconnecting`. A request that really fails still is one.
import { test, mock } from "node:test";
import assert from "node:assert/strict";
import { TaskClient, TaskwireError } from "../../dist/client/node.js";

const BASE = "http://backend.test";
const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const view = (id, version, state = "running") => ({ id, state, attempts: 1, maxAttempts: 1, progress: 0, version, expiresAtMs: Date.now() + 3_600_000 });

/** A fetch whose requests are held until aborted (as a queued or held long-poll is), recording each. */
function holdingFetch() {
  const requests = [];
  const fetch = (url, init) =>
    new Promise((_, reject) => {
      requests.push({ url, signal: init.signal });
      init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
    });
  return { fetch, requests };
}

test("dispose() stops every watch, aborts their requests, and refuses later calls", async () => {
  const net = holdingFetch();
  const client = new TaskClient({ baseUrl: BASE, fetch: net.fetch, waitMs: 1000 });
  const watches = [client.watch("a"), client.watch("b"), client.watchBatch("c")];
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(net.requests.length, 3);
  client.dispose();
  for (const watch of watches) {
    await assert.rejects(watch.done, (e) => e instanceof TaskwireError && e.code === "stopped");
    assert.equal(watch.status.state, "closed");
  }
  assert.ok(net.requests.every((r) => r.signal.aborted), "every held request aborted");
  assert.throws(() => client.watch("d"), (e) => e instanceof TaskwireError && e.code === "stopped");
  await assert.rejects(client.cancel("a"), (e) => e.code === "stopped");
  client.dispose(); // twice is harmless
  assert.equal(net.requests.length, 3, "nothing sent after dispose");
});

test("[Symbol.dispose] disposes; a watch that ended is forgotten, not stopped again", async () => {
  const net = holdingFetch();
  let first = true;
  const fetch = (url, init) => (first ? ((first = false), Promise.resolve(json(200, { mode: "snapshot", events: [], task: { ...view("done", 2, "cancelled") } }))) : net.fetch(url, init));
  const client = new TaskClient({ baseUrl: BASE, fetch, waitMs: 1000 });
  const ended = client.watch("done");
  assert.equal((await ended.done).state, "cancelled");
  const running = client.watch("live");
  await new Promise((r) => setTimeout(r, 10));
  client[Symbol.dispose]();
  await assert.rejects(running.done, (e) => e.code === "stopped");
  assert.equal(ended.status.state, "closed");
});

test("a long-poll cut on the client's own timer is sent again at once and is no failure", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 });
  const net = holdingFetch();
  const statuses = [];
  let answered = false;
  // The first answer comes; every poll after it is held and never answered
  // (queued by a browser that has no connection free).
  const fetch = (url, init) => {
    if (answered) return net.fetch(url, init);
    answered = true;
    return Promise.resolve(json(200, { mode: "snapshot", events: [], task: view("t", 1) }));
  };
  const client = new TaskClient({ baseUrl: BASE, fetch, waitMs: 25_000 });
  const watch = client.watch("t", { onStatus: (s) => statuses.push(s.state) });
  for (let i = 0; i < 20; i++) await Promise.resolve();
  await new Promise((r) => setImmediate(r));
  assert.equal(net.requests.length, 1, "the held poll");
  for (let round = 1; round <= 3; round++) {
    t.mock.timers.tick(40_000); // waitMs + 15 s
    await new Promise((r) => setImmediate(r));
    assert.ok(net.requests[round - 1].signal.aborted, `round ${round}: cut on the client's timer`);
    assert.equal(net.requests.length, round + 1, `round ${round}: sent again at once, no backoff`);
  }
  assert.deepEqual(statuses, ["connecting", "live"], "never `reconnecting`");
  assert.equal(watch.status.state, "live");
  client.dispose();
});

test("a request that fails is still a failure: `reconnecting`", async () => {
  const statuses = [];
  let n = 0;
  const fetch = async () => {
    if (++n === 1) throw new TypeError("Failed to fetch");
    return json(200, { mode: "snapshot", events: [], task: view("t", 2, "cancelled") });
  };
  const client = new TaskClient({ baseUrl: BASE, fetch, backoff: { initialMs: 1, maxMs: 5 } });
  await client.watch("t", { onStatus: (s) => statuses.push(s.state) }).done;
  assert.ok(statuses.includes("reconnecting"), statuses.join());
});

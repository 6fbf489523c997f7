// TaskClient against the real reference server, through a fetch that
// misbehaves like real networks do: requests dropped before or after the
// server saw them, responses delayed, old responses replayed (a cache, a
// lagging replica, an overlapping request), connections reset mid-body.
// 100 seeded long-poll runs and 30 SSE runs of the seed's timeline (some
// with a retried attempt) must each end with the client equal to the
// server, and `onUpdate` must never see the version, or the progress of an
// attempt, go backwards. A failure prints its seed; rerun one with
// FAULT_SEED=n.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { TaskClient } from "../../dist/client/node.js";
import { startServer } from "./server.mjs";
import { rng } from "./rng.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A fetch that misbehaves at random (seeded), and counts what it did. */
function faultyFetch(r, stats) {
  const seen = []; // earlier resume bodies, to replay
  return async (url, init) => {
    const roll = r();
    await sleep(Math.floor(r() * 15));
    if (roll < 0.08) {
      stats.dropped++;
      throw new TypeError("fetch failed (dropped before sending)");
    }
    if (roll < 0.16 && seen.length > 0 && url.includes("/resume")) {
      stats.replayed++;
      let old = seen[Math.floor(r() * seen.length)];
      if (r() < 0.5) {
        // A lagging replica: the old state, served as a snapshot.
        old = JSON.stringify({ mode: "snapshot", events: [], task: JSON.parse(old).task });
      }
      return new Response(old, { status: 200, headers: { "content-type": "application/json" } });
    }
    const response = await fetch(url, init);
    if (roll < 0.22) {
      stats.lost++;
      await response.body?.cancel();
      throw new TypeError("fetch failed (response lost)");
    }
    if (url.includes("/events") && roll < 0.3 && response.body) {
      // A reset mid-stream: pass a few chunks, then error.
      stats.reset++;
      const reader = response.body.getReader();
      let n = 1 + Math.floor(r() * 2);
      const body = new ReadableStream({
        async pull(controller) {
          if (n-- <= 0) {
            reader.cancel().catch(() => {});
            controller.error(new TypeError("connection reset"));
            return;
          }
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        },
        cancel() {
          return reader.cancel();
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    }
    if (!url.includes("/resume")) return response;
    const text = await response.text();
    if (response.status === 200) seen.push(text);
    if (roll < 0.28) {
      stats.delayed++;
      await sleep(20 + Math.floor(r() * 40));
    }
    return new Response(text, { status: response.status, headers: response.headers });
  };
}

/** The seed's summary timeline, sometimes with a quota failure and retry. */
function timeline(r) {
  const t = Date.now();
  const events = [["start", { type: "start", atMs: t + 1200, worker: "w1" }]];
  if (r() < 0.3) {
    events.push(["p10", { type: "progress", atMs: t + 2000, progress: 10, cursor: "c10" }]);
    events.push(["quota", { type: "fail", atMs: t + 3000, error: "quota exceeded", retryable: true }]);
    events.push(["restart", { type: "start", atMs: t + 4000, worker: "w2" }]);
  }
  events.push(
    ["p25", { type: "progress", atMs: t + 6400, progress: 25, cursor: "c25" }],
    ["p55", { type: "progress", atMs: t + 13100, progress: 55, cursor: "c55" }],
    ["p82", { type: "progress", atMs: t + 20700, progress: 82, cursor: "c82" }],
    ["done", { type: "succeed", atMs: t + 24300, resultRef: "blob://summaries/doc-1", resultHash: "sha256:ab12" }],
  );
  return events;
}

async function run(seed, transport) {
  const r = rng(seed);
  const stats = { dropped: 0, replayed: 0, lost: 0, delayed: 0, reset: 0 };
  const client = new TaskClient({
    baseUrl: server.baseUrl,
    headers: server.headers,
    fetch: faultyFetch(r, stats),
    backoff: { initialMs: 5, maxMs: 40 },
    transport,
  });
  const created = await new TaskClient({ baseUrl: server.baseUrl, headers: server.headers }).createTask(
    { ttlMs: 600_000, maxAttempts: 3, kind: "summary" },
    { idempotencyKey: `seed-${transport}-${seed}` },
  );
  const updates = [];
  const watch = client.watch(created.id, { onUpdate: (u) => updates.push(u.task) });
  const events = timeline(r);
  for (const [name, event] of events) {
    await sleep(Math.floor(r() * 25));
    await server.callback(created.id, event, `${seed}-${name}`);
    if (r() < 0.3) await server.callback(created.id, event, `${seed}-${name}`); // redelivery
  }
  await server.callback(created.id, events.at(-1)[1], `${seed}-dup-success`); // duplicate success
  const finished = await Promise.race([
    watch.done,
    sleep(15_000).then(() => {
      watch.stop();
      throw new Error(`timed out at v${watch.version}`);
    }),
  ]);
  const truth = await server.task(created.id);
  for (const key of ["id", "state", "version", "attempts", "progress", "resultRef", "resultHash", "expiresAtMs", "maxAttempts"]) {
    assert.deepEqual(finished[key], truth[key], `${key}: client ${finished[key]} vs server ${truth[key]}`);
  }
  assert.equal(truth.version, events.length);
  for (let i = 1; i < updates.length; i++) {
    const [a, b] = [updates[i - 1], updates[i]];
    assert.ok(b.version > a.version, `update version ${a.version} -> ${b.version}`);
    if (a.attempts === b.attempts && a.state === "running" && b.state === "running") {
      assert.ok(b.progress >= a.progress, `progress ${a.progress} -> ${b.progress} in attempt ${a.attempts}`);
    }
  }
  return stats;
}

async function runMany(transport, count) {
  const only = process.env.FAULT_SEED;
  const seeds = only ? [Number(only)] : Array.from({ length: count }, (_, i) => i + 1);
  const totals = { dropped: 0, replayed: 0, lost: 0, delayed: 0, reset: 0 };
  const failures = [];
  // A few at a time: independent tasks, one server.
  for (let i = 0; i < seeds.length; i += 10) {
    const batch = seeds.slice(i, i + 10);
    const results = await Promise.allSettled(batch.map((s) => run(s, transport)));
    results.forEach((res, j) => {
      if (res.status === "fulfilled") for (const k of Object.keys(totals)) totals[k] += res.value[k];
      else failures.push(`seed ${batch[j]} (${transport}): ${res.reason?.message ?? res.reason}`);
    });
  }
  return { totals, failures };
}

test("long-poll: 100 seeded faulty runs end equal to the server and never regress", async () => {
  const { totals, failures } = await runMany("long-poll", 100);
  assert.deepEqual(failures, [], failures.join("\n"));
  // The faults really happened (otherwise this test proves nothing).
  if (!process.env.FAULT_SEED) {
    for (const k of ["dropped", "replayed", "lost", "delayed"]) assert.ok(totals[k] > 10, `${k}: ${totals[k]}`);
  }
});

test("sse: 30 seeded faulty runs end equal to the server and never regress", async () => {
  const { totals, failures } = await runMany("sse", 30);
  assert.deepEqual(failures, [], failures.join("\n"));
  if (!process.env.FAULT_SEED) {
    // Streams make few requests: fewer faults, but every kind must occur.
    for (const k of ["dropped", "lost", "reset"]) assert.ok(totals[k] > 0, `${k}: ${totals[k]}`);
  }
});

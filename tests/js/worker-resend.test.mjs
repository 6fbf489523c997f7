// taskwire/worker's resends against the real server, through a `fetch`
// that loses answers: a report whose answer was lost is sent again with
// the same webhook-id and body, signed again, and the server takes it as
// the same callback; a 503 before the server is waited out; a server out
// of reach for longer than the lease fires 'lease-lost'.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./server.mjs";
import { createTask, deferred, history, kind, startWorker, waitForTask, within } from "./worker-helpers.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

/**
 * The real fetch, except: the first progress report reaches the server
 * and its answer is then lost (a network error, as a connection reset
 * after sending is); the first success is answered 503 with
 * `Retry-After: 1` without reaching the server. Every report request and
 * its answer is recorded.
 */
function lossyFetch() {
  const seen = [];
  let lostOne = false, refusedOne = false;
  async function lossy(url, init) {
    if (!String(url).includes("/callbacks")) return fetch(url, init);
    const event = JSON.parse(init.body);
    const entry = { type: event.type, id: init.headers["webhook-id"], body: init.body, signature: init.headers["webhook-signature"] };
    seen.push(entry);
    if (event.type === "succeed" && !refusedOne) {
      refusedOne = true;
      entry.answer = "503 (never reached the server)";
      return new Response(JSON.stringify({ error: { code: "overloaded", message: "try later" } }), { status: 503, headers: { "retry-after": "1" } });
    }
    const res = await fetch(url, init);
    entry.answer = await res.clone().json();
    if (event.type === "progress" && !lostOne) {
      lostOne = true;
      throw new TypeError("fetch failed", { cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) });
    }
    return res;
  }
  return { fetch: lossy, seen };
}

test("a report whose answer was lost is sent again as the same callback; a 503 is waited out", async (t) => {
  const k = kind("resend");
  const lossy = lossyFetch();
  startWorker(t, server, {
    [k]: async (job) => {
      await job.progress(40, "c40");
      return { resultRef: "mem://resent", resultHash: "sha256:r" };
    },
  }, { fetch: lossy.fetch });
  const created = await createTask(server, { kind: k });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(done.attempts, 1);

  const progress = lossy.seen.filter((s) => s.type === "progress");
  assert.equal(progress.length, 2, "sent twice");
  assert.equal(progress[1].id, progress[0].id, "the same webhook-id");
  assert.equal(progress[1].body, progress[0].body, "the same body");
  assert.equal(progress[0].answer.changed, true, "the first try was applied; only its answer was lost");
  assert.equal(progress[1].answer.changed, false);
  assert.equal(progress[1].answer.next, "continue");

  const succeed = lossy.seen.filter((s) => s.type === "succeed");
  assert.equal(succeed.length, 2);
  assert.equal(succeed[1].id, succeed[0].id);
  assert.equal(succeed[1].answer.reason, "succeeded");

  const types = (await history(server, created.id)).map((e) => e.type);
  assert.deepEqual(types, ["start", "progress", "succeed"], "one progress in the history");
});

test("reports that cannot get through before the lease runs out fire 'lease-lost'; the task goes to another attempt", async (t) => {
  const k = kind("lease-lost");
  let cut = false;
  const attempts = [];
  const lost = deferred();
  // Once `cut`, every report of this worker fails as a network error does.
  const cutFetch = (url, init) =>
    cut && String(url).includes("/callbacks") ? Promise.reject(new TypeError("fetch failed", { cause: Object.assign(new Error("connect"), { code: "ECONNRESET" }) })) : fetch(url, init);
  startWorker(t, server, {
    [k]: async (job) => {
      attempts.push(job.attempt);
      if (job.attempt > 1) return { resultRef: "mem://second", resultHash: "sha256:2" };
      await job.progress(10, "before");
      cut = true;
      await new Promise((resolve) => job.signal.addEventListener("abort", resolve, { once: true }));
      lost.resolve(job.signal.reason.code);
      cut = false;
      job.checkpoint();
    },
  }, { leaseMs: 1000, fetch: cutFetch });
  const created = await createTask(server, { kind: k, unknownGraceMs: 200 });
  assert.equal(await within(lost.promise, "the signal"), "lease-lost");
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded by the next attempt");
  assert.equal(done.attempts, 2);
  assert.deepEqual(attempts, [1, 2]);
});

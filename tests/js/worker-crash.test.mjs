// taskwire/worker when things go wrong, against the real server: a
// worker killed mid-step is replaced after its lease and the grace, and
// the dead attempt's late report is told to stop; a clock 10 minutes off
// keeps its lease; a graceful shutdown hands unfinished work back.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "./server.mjs";
import { createTask, deferred, history, kind, startWorker, waitForTask, within } from "./worker-helpers.mjs";
import { createWorker } from "../../js/worker.js";

const here = dirname(fileURLToPath(import.meta.url));
let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

test("a worker killed mid-step is replaced after lease + grace, and its late report is told to stop", async (t) => {
  const k = kind("crash");
  const created = await createTask(server, { kind: k, unknownGraceMs: 500 });
  const child = spawn(process.execPath, [join(here, "worker-child.mjs")], {
    env: { ...process.env, TASKWIRE_URL: server.baseUrl, TASKWIRE_TENANT: "tenant", TASKWIRE_SECRET: server.secret, TASKWIRE_KIND: k, TASKWIRE_LEASE_MS: "1000" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.after(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"));
  const [line] = await within(createInterface({ input: child.stdout })[Symbol.asyncIterator]().next().then((r) => [r.value]), "the child's claim");
  assert.deepEqual(JSON.parse(line), { claimed: created.id, attempt: 1 });
  child.kill("SIGKILL");
  await new Promise((r) => child.once("exit", r));

  const late = deferred();
  startWorker(t, server, {
    [k]: async (job) => {
      // The dead attempt's report, signed with the right secret, arrives now.
      const answer = await server.callback(job.id, { type: "progress", atMs: Date.now(), progress: 20, cursor: "late", attempt: 1 }, "late-1");
      late.resolve({ attempt: job.attempt, answer });
      await job.progress(50, "step-5");
      return { resultRef: "mem://crash", resultHash: "sha256:c" };
    },
  });
  const { attempt, answer } = await within(late.promise, "the second worker's claim");
  assert.equal(attempt, 2);
  assert.equal(answer.next, "stop");
  assert.equal(answer.attempt, 2);
  assert.equal(answer.changed, false);
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(done.attempts, 2);
  assert.equal(done.resultRef, "mem://crash");
});

for (const [label, skewMs] of [["ahead", 10 * 60_000], ["behind", -10 * 60_000]]) {
  test(`a worker whose clock is 10 minutes ${label} keeps its lease and finishes`, async (t) => {
    const k = kind(`clock-${label}`);
    // leaseMs 1500, and the job takes three leases: only heartbeats and
    // progress stamped on the server's clock keep it alive.
    startWorker(t, server, {
      [k]: async (job) => {
        await job.progress(10, "a");
        await new Promise((r) => setTimeout(r, 4500));
        await job.progress(90, "b");
        return { resultRef: "mem://clock", resultHash: "sha256:k" };
      },
    }, { leaseMs: 1500, now: () => Date.now() + skewMs });
    const created = await createTask(server, { kind: k, unknownGraceMs: 0 });
    const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
    assert.equal(done.attempts, 1);
    const types = (await history(server, created.id)).map((e) => e.type);
    assert.deepEqual(types, ["start", "progress", "progress", "succeed"], "no lapse in the history");
  });
}

test("shutdown waits for a job within the grace, then fires 'shutdown' and hands the task back", async (t) => {
  const k = kind("shutdown");
  const reasons = [];
  const started = deferred();
  const worker = createWorker({ url: server.baseUrl, tenant: "tenant", secret: server.secret, waitMs: 1000, concurrency: 2, onWarning: () => {} });
  worker.handle(k, async (job) => {
    started.resolve();
    if (job.input.quick) {
      await new Promise((r) => setTimeout(r, 200));
      return { resultRef: "mem://quick", resultHash: "sha256:q" };
    }
    await new Promise((resolve) => job.signal.addEventListener("abort", resolve, { once: true }));
    reasons.push(job.signal.reason.code);
    job.checkpoint();
  });
  const quick = await createTask(server, { kind: k, input: { quick: true } });
  const running = worker.run();
  await within(started.promise, "the first job");
  const slow = await createTask(server, { kind: k, input: {} });
  await waitForTask(server, slow.id, (x) => x.state === "running", "running");
  await within(worker.shutdown(2000), "the shutdown");
  await running;
  assert.deepEqual(reasons, ["shutdown"]);
  assert.equal((await server.task(quick.id)).state, "succeeded", "a job done within the grace finishes");
  const back = await server.task(slow.id);
  assert.equal(back.state, "queued");
  assert.equal(back.error, "worker shut down");
  assert.equal(back.attempts, 1);

  // A handler that ignores its signal does not hold the shutdown up.
  // (Another kind: the task handed back above is first in its queue.)
  const k2 = kind("shutdown-stuck");
  const stuck = await createTask(server, { kind: k2 });
  const second = createWorker({ url: server.baseUrl, tenant: "tenant", secret: server.secret, waitMs: 1000, onWarning: () => {} });
  second.handle(k2, () => new Promise(() => {}));
  const secondRuns = second.run();
  await waitForTask(server, stuck.id, (x) => x.state === "running", "running");
  await within(second.shutdown(100), "the shutdown past a stuck handler");
  await secondRuns;
  const handedBack = await server.task(stuck.id);
  assert.equal(handedBack.state, "queued");
  assert.equal(handedBack.error, "worker shut down");
});

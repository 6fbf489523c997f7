// taskwire/worker against the real reference server: a claimed task
// runs, reports progress and succeeds; a cancel reaches the job's signal
// through a heartbeat; failures are classified; a hold waits for a
// person and the next attempt reads the decision. States are read with
// the tenant token, as an application would.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./server.mjs";
import { act, createTask, deferred, kind, startWorker, waitForTask, within } from "./worker-helpers.mjs";
import { FatalError, RetryableError } from "../../js/worker.js";

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

test("a claimed task reports progress and succeeds, each step visible to the tenant", async (t) => {
  const k = kind("summary");
  const seen = deferred();
  startWorker(t, server, {
    [k]: async (job) => {
      await job.progress(50, "half");
      const midway = await server.task(job.id);
      seen.resolve({ midway, job: { id: job.id, kind: job.kind, input: job.input, attempt: job.attempt, key: job.key("publish", "post") } });
      return { resultRef: `mem://${job.input.doc}`, resultHash: "sha256:abc" };
    },
  });
  const created = await createTask(server, { kind: k, input: { doc: "d1" } });
  const { midway, job } = await within(seen.promise, "the handler");
  assert.deepEqual(job, { id: created.id, kind: k, input: { doc: "d1" }, attempt: 1, key: `${created.id}:publish:post` });
  assert.equal(midway.state, "running");
  assert.equal(midway.progress, 50);
  assert.equal(midway.attempts, 1);
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(done.resultRef, "mem://d1");
  assert.equal(done.resultHash, "sha256:abc");
  assert.equal(done.attempts, 1);
});

test("a cancel reaches job.signal through a heartbeat and the task ends cancelled", async (t) => {
  const k = kind("cancel");
  const started = deferred();
  const aborted = deferred();
  // leaseMs 3000: a heartbeat every second. The handler sends nothing
  // itself, so only a heartbeat's answer can fire its signal.
  startWorker(t, server, {
    [k]: async (job) => {
      started.resolve(job.id);
      await new Promise((resolve) => job.signal.addEventListener("abort", resolve, { once: true }));
      aborted.resolve(job.signal.reason);
      job.checkpoint();
    },
  }, { leaseMs: 3000 });
  const created = await createTask(server, { kind: k });
  await within(started.promise, "the job to start");
  const answer = await act(server, created.id, "cancel", { reason: "changed my mind" });
  assert.equal(answer.task.state, "cancelling");
  const reason = await within(aborted.promise, "the signal to fire");
  assert.ok(reason instanceof Error);
  assert.equal(reason.code, "cancel");
  const done = await waitForTask(server, created.id, (x) => x.state === "cancelled", "cancelled");
  assert.equal(done.attempts, 1);
});

test("RetryableError and 5xx retry; FatalError, 4xx and bugs fail at once", async (t) => {
  const k = kind("classify");
  const attempts = {};
  startWorker(t, server, {
    [k]: async (job) => {
      attempts[job.input.mode] = job.attempt;
      if (job.attempt === 1) {
        switch (job.input.mode) {
          case "retryable": throw new RetryableError("vendor busy");
          case "vendor-503": throw Object.assign(new Error("vendor said 503"), { status: 503 });
          case "fatal": throw new FatalError("the document is empty");
          case "vendor-400": throw Object.assign(new Error("vendor said 400"), { status: 400 });
          case "bug": return job.input.missing.field;
        }
      }
      return { resultRef: `mem://${job.input.mode}`, resultHash: "sha256:1" };
    },
  }, { concurrency: 5 });
  const ids = {};
  for (const mode of ["retryable", "vendor-503", "fatal", "vendor-400", "bug"]) {
    ids[mode] = (await createTask(server, { kind: k, input: { mode }, maxAttempts: 2 })).id;
  }
  for (const mode of ["retryable", "vendor-503"]) {
    const task = await waitForTask(server, ids[mode], (x) => x.state === "succeeded", `${mode}: succeeded`);
    assert.equal(task.attempts, 2, mode);
  }
  const expected = {
    fatal: "FatalError: the document is empty",
    "vendor-400": "Error: vendor said 400",
    bug: "TypeError: Cannot read properties of undefined (reading 'field')",
  };
  for (const [mode, error] of Object.entries(expected)) {
    const task = await waitForTask(server, ids[mode], (x) => x.state === "failed", `${mode}: failed`);
    assert.equal(task.attempts, 1, mode);
    assert.equal(task.error, error);
  }
});

test("a hold waits for a person; the next attempt reads job.task.decision", async (t) => {
  const k = kind("approval");
  const seen = [];
  startWorker(t, server, {
    [k]: async (job) => {
      seen.push({ attempt: job.attempt, decision: job.task.decision, reason: job.task.decisionReason, artifact: job.task.artifactHash });
      if (job.task.decision === undefined) {
        await job.progress(60, "draft");
        await job.hold("mem://draft-1", "sha256:d1", "Publish this summary?");
        assert.equal(job.signal.reason?.code, "stop", "the attempt ended with the hold");
        return;
      }
      return { resultRef: `mem://final-${job.task.decision}`, resultHash: "sha256:f1" };
    },
  });
  const created = await createTask(server, { kind: k, input: { approval: true } });
  const held = await waitForTask(server, created.id, (x) => x.state === "waiting_approval", "waiting_approval");
  assert.equal(held.question, "Publish this summary?");
  assert.equal(held.artifactRef, "mem://draft-1");
  await act(server, created.id, "decisions", { decision: "approve", artifactHash: "sha256:d1", version: held.version, reason: "looks right" });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(done.resultRef, "mem://final-approve");
  assert.deepEqual(seen, [
    { attempt: 1, decision: undefined, reason: undefined, artifact: undefined },
    { attempt: 2, decision: "approve", reason: "looks right", artifact: "sha256:d1" },
  ]);
});

test("a handler's result without resultRef fails the task, naming the field", async (t) => {
  const k = kind("bad-result");
  startWorker(t, server, { [k]: async () => ({ resultHash: "sha256:1" }) });
  const created = await createTask(server, { kind: k });
  const task = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.match(task.error, /resultRef: must be a non-blank string/);
});

test("a task that ends under a running job (its deadline) fires 'stop', and nothing more is sent", async (t) => {
  const k = kind("deadline");
  const aborted = deferred();
  const { warnings } = startWorker(t, server, {
    [k]: async (job) => {
      await new Promise((resolve) => job.signal.addEventListener("abort", resolve, { once: true }));
      aborted.resolve(job.signal.reason.code);
      job.checkpoint();
    },
  }, { leaseMs: 3000 });
  const created = await createTask(server, { kind: k, deadlineMs: 1500 });
  assert.equal(await within(aborted.promise, "the signal"), "stop");
  const task = await waitForTask(server, created.id, (x) => x.state === "timed_out", "timed_out");
  assert.equal(task.attempts, 1);
  assert.deepEqual(warnings, [], "no report was refused: none was sent after the stop");
});

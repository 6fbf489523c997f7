// taskwire/worker's steps (PROTOCOL.md §Steps) against the real reference
// server: a three-step plan whose first attempt dies after its second
// step is finished by a second attempt that skips the finished steps and
// reads their checkpoints; a failing step is reported failed and its
// error reaches the handler; a step the plan does not have, or a task
// without a plan, is a `StepError` naming the server's reason, before the
// step's work runs; so is another checkpoint for a finished step.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./server.mjs";
import { createTask, deferred, kind, startWorker, waitForTask, within } from "./worker-helpers.mjs";
import { FatalError, RetryableError, StepError } from "../../js/worker.js";
import { Job } from "../../js/worker/job.js";

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

const PLAN = { workflowVersion: "2026-12-03.1", steps: ["load", "classify", "publish"] };
const checkpointOf = (name) => ({ outputRef: `mem://${name}`, outputHash: `sha256:${name}` });

test("a second attempt skips the steps the first finished and continues from their checkpoints", async (t) => {
  const k = kind("steps");
  const runs = { load: 0, classify: 0, publish: 0 };
  const seen = {};
  const run = (job, name) =>
    job.step(
      name,
      async () => {
        runs[name]++;
        return { ...checkpointOf(name), usage: { tokens: 100 + runs[name], costCents: 2, toolCalls: 1 } };
      },
      { label: `${PLAN.steps.indexOf(name) + 1}/3: ${name}` },
    );
  startWorker(t, server, {
    [k]: async (job) => {
      seen[job.attempt] = { doneBefore: PLAN.steps.map((s) => job.stepDone(s)), checkpoints: PLAN.steps.map((s) => job.stepCheckpoint(s)) };
      const results = [];
      for (const name of PLAN.steps) {
        results.push(await run(job, name));
        // The first attempt dies after its second step (a passing failure).
        if (job.attempt === 1 && name === "classify") throw new RetryableError("the model went away");
      }
      seen[job.attempt].results = results;
      seen[job.attempt].doneAfter = PLAN.steps.map((s) => job.stepDone(s));
      return { resultRef: results[2].outputRef, resultHash: results[2].outputHash };
    },
  });
  const created = await createTask(server, { kind: k, ...PLAN });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(done.attempts, 2);
  assert.deepEqual(runs, { load: 1, classify: 1, publish: 1 }, "no step ran twice");

  assert.deepEqual(seen[1].doneBefore, [false, false, false]);
  assert.deepEqual(seen[1].checkpoints, [undefined, undefined, undefined]);
  assert.deepEqual(seen[2].doneBefore, [true, true, false], "the second attempt sees what the first finished");
  assert.deepEqual(seen[2].checkpoints, [checkpointOf("load"), checkpointOf("classify"), undefined]);
  assert.deepEqual(seen[2].results, PLAN.steps.map(checkpointOf), "a finished step answers its checkpoint without running");
  assert.deepEqual(seen[2].doneAfter, [true, true, true], "this attempt's own steps count as done");

  assert.deepEqual(
    done.steps.map(({ name, status, attempt, outputRef, outputHash, usage }) => ({ name, status, attempt, outputRef, outputHash, usage })),
    PLAN.steps.map((name, i) => ({ name, status: "succeeded", attempt: i < 2 ? 1 : 2, ...checkpointOf(name), usage: { tokens: 101, costCents: 2, toolCalls: 1 } })),
  );
  assert.deepEqual(done.steps.map((s) => s.label), ["1/3: load", "2/3: classify", "3/3: publish"], "each step keeps its running report's label");
  assert.equal(done.resultRef, "mem://publish");
  assert.equal(done.progress, 100);
});

test("a failing step is reported failed, its error reaches the handler as it was thrown, and the task fails", async (t) => {
  const k = kind("steps-fail");
  const caught = deferred();
  const thrown = new FatalError("the document is empty");
  let publishRan = false;
  startWorker(t, server, {
    [k]: async (job) => {
      await job.step("load", async () => checkpointOf("load"));
      try {
        await job.step("classify", async () => {
          throw thrown;
        });
      } catch (e) {
        caught.resolve(e);
        throw e;
      }
      await job.step("publish", async () => ((publishRan = true), checkpointOf("publish")));
    },
  });
  const created = await createTask(server, { kind: k, ...PLAN });
  assert.equal(await within(caught.promise, "the step's error"), thrown, "the very error run threw");
  const failed = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.equal(failed.attempts, 1, "a FatalError: no other attempt");
  assert.equal(failed.error, "FatalError: the document is empty");
  assert.deepEqual(failed.steps.map((s) => [s.name, s.status]), [["load", "succeeded"], ["classify", "failed"], ["publish", "pending"]]);
  assert.equal(failed.steps[1].attempt, 1);
  assert.equal(publishRan, false);
});

test("a step's output is checked: a blank outputRef is a FatalError naming it, and the step is reported failed", async (t) => {
  const k = kind("steps-bad-output");
  const caught = deferred();
  startWorker(t, server, {
    [k]: async (job) => {
      const blank = await job.step("load", async () => ({ outputRef: " ", outputHash: "sha256:x" })).catch((e) => e);
      const usage = await job.step("classify", async () => ({ ...checkpointOf("classify"), usage: { tokens: -1, costCents: 0, toolCalls: 0 } })).catch((e) => e);
      caught.resolve([blank, usage]);
      return { resultRef: "mem://r", resultHash: "sha256:r" };
    },
  });
  const created = await createTask(server, { kind: k, ...PLAN });
  const [blank, usage] = await within(caught.promise, "the refusals");
  assert.ok(blank instanceof FatalError && usage instanceof FatalError);
  assert.match(blank.message, /^job\.step: outputRef: must be a non-blank string, got " "$/);
  assert.match(usage.message, /^job\.step: usage\.tokens: must be an integer ≥ 0, got -1$/);
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.deepEqual(done.steps.map((s) => s.status), ["failed", "failed", "pending"]);
});

test("a step the plan does not have, or a task without a plan, is a StepError naming the reason; the step does not run", async (t) => {
  const k = kind("steps-unknown");
  const errors = {};
  const ran = [];
  startWorker(t, server, {
    [k]: async (job) => {
      const name = job.input.plan ? "summarise" : "load";
      errors[job.input.plan ? "planned" : "unplanned"] = await job.step(name, async () => (ran.push(name), checkpointOf(name))).then(
        (v) => ({ resolved: v }),
        (e) => e,
      );
      return { resultRef: "mem://r", resultHash: "sha256:r" };
    },
  });
  const planned = await createTask(server, { kind: k, input: { plan: true }, ...PLAN });
  const unplanned = await createTask(server, { kind: k, input: { plan: false } });
  await waitForTask(server, planned.id, (x) => x.state === "succeeded", "succeeded");
  await waitForTask(server, unplanned.id, (x) => x.state === "succeeded", "succeeded");
  assert.deepEqual(ran, [], "neither step's work ran");
  for (const [which, code, step] of [["planned", "unknown-step", "summarise"], ["unplanned", "no-plan", "load"]]) {
    const e = errors[which];
    assert.ok(e instanceof StepError, `${which}: a StepError, got ${JSON.stringify(e)}`);
    assert.ok(e instanceof FatalError, "final: every attempt would be refused the same way");
    assert.equal(e.code, code);
    assert.equal(e.step, step);
    assert.match(e.message, new RegExp(`step "${step}" \\(running\\) refused: ${code}`));
  }
  const untouched = await server.task(planned.id);
  assert.deepEqual(untouched.steps.map((s) => s.status), ["pending", "pending", "pending"]);
});

test("a checkpoint other than the one a finished step holds is a StepError step-conflict", async (t) => {
  const k = kind("steps-conflict");
  const caught = deferred();
  startWorker(t, server, {
    [k]: async (job) => {
      const err = await job.step("load", async () => {
        // Meanwhile another executor of this attempt records the step
        // finished with its own checkpoint: a finished step never moves.
        await server.callback(job.id, { type: "step", atMs: Date.now(), name: "load", status: "succeeded", ...checkpointOf("elsewhere"), attempt: job.attempt }, "other");
        return checkpointOf("load");
      }).then(() => undefined, (e) => e);
      caught.resolve({ err, done: job.stepDone("load"), checkpoint: job.stepCheckpoint("load") });
      return { resultRef: "mem://r", resultHash: "sha256:r" };
    },
  });
  const created = await createTask(server, { kind: k, ...PLAN });
  const { err, done, checkpoint } = await within(caught.promise, "the refusal");
  assert.ok(err instanceof StepError, `a StepError, got ${err}`);
  assert.equal(err.code, "step-conflict");
  assert.equal(err.step, "load");
  assert.equal(done, false, "the claimed task said pending, and this attempt recorded nothing");
  assert.equal(checkpoint, undefined);
  const task = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.deepEqual({ outputRef: task.steps[0].outputRef, outputHash: task.steps[0].outputHash }, checkpointOf("elsewhere"), "the first checkpoint stays");
});

test("step names and run are checked, the error naming the field; checkpoint() is still the signal check", async () => {
  const job = new Job(
    { id: "tsk_1", attempts: 2, lease: { leaseMs: 30_000 }, steps: [{ name: "a", status: "succeeded", outputRef: "r", outputHash: "h" }, { name: "b", status: "skipped" }, { name: "c", status: "failed" }] },
    { wire: { clock: { offsetMs: 0, local: Date.now } }, warn() {} },
  );
  for (const bad of [undefined, "", "  ", 3]) {
    assert.throws(() => job.stepCheckpoint(bad), (e) => e instanceof TypeError && /^job\.stepCheckpoint: step: /.test(e.message));
    assert.throws(() => job.stepDone(bad), (e) => e instanceof TypeError && /^job\.stepDone: step: /.test(e.message));
    await assert.rejects(job.step(bad, async () => checkpointOf("x")), (e) => e instanceof TypeError && /^job\.step: step: /.test(e.message));
  }
  await assert.rejects(job.step("c", "not a function"), (e) => e instanceof TypeError && /^job\.step: run: /.test(e.message));
  await assert.rejects(job.step("c", async () => checkpointOf("c"), { label: 3 }), (e) => e instanceof TypeError && /^job\.step: options\.label: /.test(e.message));
  assert.equal(job.checkpoint(), undefined, "the signal check, which passes");
  assert.deepEqual([job.stepCheckpoint("a"), job.stepCheckpoint("b"), job.stepCheckpoint("c")], [{ outputRef: "r", outputHash: "h" }, undefined, undefined]);
  assert.deepEqual(["a", "b", "c", "zz"].map((s) => job.stepDone(s)), [true, true, false, false]);
  // Finished steps never run and send nothing (this job has no wire to send with).
  assert.deepEqual(await job.step("a", () => assert.fail("ran")), { outputRef: "r", outputHash: "h" });
  assert.equal(await job.step("b", () => assert.fail("ran")), undefined, "skipped: finished without a checkpoint");
});

test("a worker naming its workflow versions leaves a task planned for another to that version's worker", async (t) => {
  const k = kind("versions");
  const ran = [];
  const handler = (who) => async (job) => {
    ran.push([who, job.task.workflowVersion ?? null]);
    return { resultRef: "mem://r", resultHash: `sha256:${who}` };
  };
  const v1 = await createTask(server, { kind: k, workflowVersion: "v1", steps: ["a"] });
  const v2 = await createTask(server, { kind: k, workflowVersion: "v2", steps: ["a"] });
  startWorker(t, server, { [k]: handler("new") }, { workflowVersions: ["v2"] });
  await waitForTask(server, v2.id, (x) => x.state === "succeeded", "succeeded");
  assert.deepEqual(ran, [["new", "v2"]], "the new code did not take the v1 task");
  const waiting = await waitForTask(server, v1.id, (x) => x.state === "queued", "queued");
  assert.equal(waiting.attempts, 0);
  startWorker(t, server, { [k]: handler("old") }, { workflowVersions: ["v1"] });
  await waitForTask(server, v1.id, (x) => x.state === "succeeded", "succeeded");
  assert.deepEqual(ran, [["new", "v2"], ["old", "v1"]]);
  assert.throws(() => startWorker(t, server, {}, { workflowVersions: [" "] }), /workflowVersions\[0\]/);
});

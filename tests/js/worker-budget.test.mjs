// taskwire/worker's budgets and side effects (PROTOCOL.md §Budgets and
// side effects) against the real reference server: a call within the
// budget runs and its usage is settled; one past it is `OverBudget` and
// never runs; a failing call releases its whole reservation; an external
// write is made once across two attempts, the second answered from the
// claimed task's record; `budgetExhausted` ends the task failed with
// `budget-exhausted`, keeping the partial result.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./server.mjs";
import { createTask, kind, startWorker, waitForTask } from "./worker-helpers.mjs";
import { FatalError, OverBudget, RetryableError, budgetExhausted } from "../../js/worker.js";

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

const BUDGET = { maxTokens: 1000, maxCostCents: 50 };

test("a call within the budget runs and settles its usage; one past it is OverBudget and never runs", async (t) => {
  const k = kind("spend");
  const seen = { ran: [] };
  startWorker(t, server, {
    [k]: async (job) => {
      seen.value = await job.spend("draft", { tokens: 600, costCents: 20 }, async () => {
        seen.ran.push("draft");
        seen.reservedDuring = (await server.task(job.id)).reserved;
        return { value: "a draft", usage: { tokens: 400, costCents: 15, toolCalls: 2 } };
      });
      try {
        // 400 used + 700 > 1000: refused before the call.
        await job.spend("polish", { tokens: 700 }, async () => {
          seen.ran.push("polish");
          return { value: "never", usage: {} };
        });
      } catch (e) {
        seen.refused = e;
      }
      return { resultRef: "mem://draft", resultHash: "sha256:draft" };
    },
  });
  const created = await createTask(server, { kind: k, budget: BUDGET });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(seen.value, "a draft", "spend answers the call's value");
  assert.deepEqual(seen.ran, ["draft"], "the refused call was not made");
  assert.deepEqual(seen.reservedDuring, { tokens: 600, costCents: 20 }, "the estimate was reserved before the call ran");
  assert.ok(seen.refused instanceof OverBudget, `OverBudget, got ${seen.refused}`);
  assert.ok(seen.refused instanceof FatalError, "final: another attempt meets the same budget");
  assert.equal(seen.refused.reason, "over-budget");
  assert.equal(seen.refused.code, "over-budget");
  assert.equal(seen.refused.reservation, "1:polish", "the reservation id is <attempt>:<name>");
  assert.deepEqual(done.budget, BUDGET);
  assert.deepEqual(done.used, { tokens: 400, costCents: 15, toolCalls: 2 });
  assert.equal(done.reserved ?? null, null, "nothing left reserved");
  assert.deepEqual(
    done.reservations.map(({ id, attempt, tokens, costCents, settled }) => ({ id, attempt, tokens, costCents, settled })),
    [{ id: "1:draft", attempt: 1, tokens: 600, costCents: 20, settled: { tokens: 400, costCents: 15, toolCalls: 2 } }],
    "the refused reservation left no record",
  );
});

test("a failing call releases its whole reservation and its error reaches the handler as thrown", async (t) => {
  const k = kind("spend-fail");
  const thrown = new TypeError("the model answered garbage");
  const seen = {};
  startWorker(t, server, {
    [k]: async (job) => {
      try {
        await job.spend("draft", { tokens: 900, costCents: 40 }, async () => {
          throw thrown;
        }, { step: "draft" });
      } catch (e) {
        seen.caught = e;
      }
      seen.after = await server.task(job.id);
      // The released budget is there again for the next call.
      seen.next = await job.spend("retry", { tokens: 900, costCents: 40 }, () => ({ value: 7, usage: { tokens: 10 } }));
      return { resultRef: "mem://r", resultHash: "sha256:r" };
    },
  });
  const created = await createTask(server, { kind: k, budget: BUDGET, workflowVersion: "v1", steps: ["draft"] });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(seen.caught, thrown, "the call's own error, not a settle's");
  assert.equal(seen.after.reserved ?? null, null, "the reservation is released");
  assert.deepEqual(seen.after.reservations.map((r) => [r.id, r.step, r.settled]), [["1:draft", "draft", { tokens: 0, costCents: 0, toolCalls: 0 }]]);
  assert.equal(seen.next, 7);
  assert.deepEqual(done.used, { tokens: 10, costCents: 0, toolCalls: 0 });
});

test("an external write is made once across two attempts: the second answers the recorded id without writing", async (t) => {
  const k = kind("effect");
  const writes = [];
  const answers = {};
  startWorker(t, server, {
    [k]: async (job) => {
      answers[job.attempt] = {
        before: job.recordedEffect("publish", "ticket"),
        id: await job.effect("publish", "ticket", async (key) => {
          writes.push({ attempt: job.attempt, key });
          return `T-${job.attempt}`;
        }),
      };
      if (job.attempt === 1) throw new RetryableError("crashed after the write");
      return { resultRef: "mem://r", resultHash: "sha256:r" };
    },
  });
  const created = await createTask(server, { kind: k });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(done.attempts, 2);
  assert.deepEqual(writes, [{ attempt: 1, key: `${created.id}:publish:ticket` }], "written once, under job.key(step, action)");
  assert.deepEqual(answers[1], { before: undefined, id: "T-1" });
  assert.deepEqual(answers[2], { before: "T-1", id: "T-1" }, "the second attempt reads the first's record");
  assert.deepEqual(done.effects, [{ step: "publish", action: "ticket", resourceId: "T-1", attempt: 1 }]);
});

test("a write made again within the attempt is answered with the id recorded first", async (t) => {
  const k = kind("effect-again");
  const ids = [];
  startWorker(t, server, {
    [k]: async (job) => {
      // The claimed task records nothing yet, so both writes are made
      // (the outside system dedups by the key); the server keeps the first.
      ids.push(await job.effect("publish", "ticket", async () => "T-first"));
      ids.push(await job.effect("publish", "ticket", async () => "T-second"));
      return { resultRef: "mem://r", resultHash: "sha256:r" };
    },
  });
  const created = await createTask(server, { kind: k });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.deepEqual(ids, ["T-first", "T-first"]);
  assert.deepEqual(done.effects.map((e) => e.resourceId), ["T-first"]);
});

test("budgetExhausted ends the task failed with budget-exhausted and keeps the partial result", async (t) => {
  const k = kind("exhausted");
  startWorker(t, server, {
    [k]: async (job) => {
      await job.spend("draft", { tokens: 100 }, () => ({ value: "d", usage: { tokens: 100 } }));
      try {
        await job.spend("more", { tokens: 1 }, () => ({ value: "never", usage: {} }));
      } catch (e) {
        if (e instanceof OverBudget) return budgetExhausted({ resultRef: "mem://partial", resultHash: "sha256:partial" });
        throw e;
      }
      return { resultRef: "mem://all", resultHash: "sha256:all" };
    },
  });
  const created = await createTask(server, { kind: k, budget: { maxTokens: 100 } });
  const done = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.equal(done.error, "budget-exhausted");
  assert.equal(done.resultRef, "mem://partial");
  assert.equal(done.resultHash, "sha256:partial");
  assert.equal(done.attempts, 1, "not retried");
});

test("budgetExhausted without a partial result, and its checks naming the field", async (t) => {
  const k = kind("exhausted-bare");
  startWorker(t, server, { [k]: () => budgetExhausted() });
  const created = await createTask(server, { kind: k, budget: { maxTokens: 1 } });
  const done = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.equal(done.error, "budget-exhausted");
  assert.equal(done.resultRef, undefined);
  assert.throws(() => budgetExhausted({ resultRef: "r" }), /partial\.resultHash: must be a non-blank string/);
  assert.throws(() => budgetExhausted("r"), /partial: must be an object/);
});

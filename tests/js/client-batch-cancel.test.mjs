// "Cancel the rest" of a 200-item batch from a page, with a batch token
// (issue 29): one `cancelBatch` request, authorised by a browser token
// whose `batch` claim names the batch and which grants `cancel`. The
// page's batch watch then sees every item end: the queued ones
// `cancelled`, the running one `cancelling` until its worker answers.
// The real npm client in Node against the real server; tokens minted as
// an application's backend would, with `jose`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { SignJWT } from "jose";
import { TaskClient } from "../../dist/client/node.js";
import { startServer } from "./server.mjs";

const KEY = randomBytes(32);
let api;

before(async () => {
  api = await startServer(["--browser-token-key", `tenant:k1=HS256:${KEY.toString("base64")}`]);
});
after(async () => {
  await api?.stop();
});

/** A browser token for batch `batch` only. */
function mintForBatch(batch, rights) {
  return new SignJWT({ batch, rights })
    .setProtectedHeader({ alg: "HS256", kid: "k1" })
    .setSubject("page-user")
    .setAudience("taskwire")
    .setExpirationTime(Math.floor(Date.now() / 1000) + 600)
    .sign(KEY);
}

async function until(what, check, ms = 15_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("a page cancels the rest of a 200-item batch in one request with a batch token, and its watch sees every item end", async () => {
  // The app's backend creates the batch (tenant token) and starts one item.
  const backend = new TaskClient({ baseUrl: api.baseUrl, headers: api.headers });
  const items = Array.from({ length: 200 }, (_, n) => ({ ttlMs: 600_000, maxAttempts: 1, kind: "moderation", input: { n } }));
  const batch = await backend.createBatch(items);
  const running = batch.tasks[0].id;
  await api.callback(running, { type: "start", atMs: Date.now(), worker: "w" }, "s");

  // The page: one client, a token function asked per scope.
  const asked = [];
  const page = new TaskClient({
    baseUrl: api.baseUrl,
    waitMs: 1000,
    token: (scope) => {
      asked.push(scope);
      return mintForBatch(scope.batch, ["watch", "cancel"]);
    },
  });
  const watch = page.watchBatch(batch.batchId);
  await until("the batch known", () => watch.tasks.length === 200);

  const answer = await page.cancelBatch(batch.batchId, { reason: "the rest is not needed" });
  assert.equal(answer.batchId, batch.batchId);
  assert.equal(answer.size, 200);
  assert.equal(answer.changed, 200);
  assert.deepEqual(answer.reasons, { cancelled: 199, "cancel-requested": 1 });
  assert.ok(asked.every((scope) => scope.batch === batch.batchId && scope.tasks === undefined), `asked for the batch only: ${JSON.stringify(asked)}`);

  await until("every item ended or asked to stop", () => watch.tasks.filter((t) => t.state === "cancelled").length === 199);
  assert.equal(watch.tasks.find((t) => t.id === running).state, "cancelling");
  // The worker acknowledges: the batch is done.
  await api.callback(running, { type: "ack_cancel", atMs: Date.now() }, "ack");
  await watch.done;
  assert.ok(watch.tasks.every((t) => t.state === "cancelled"));

  // Again: nothing more changes; a token without `cancel` is refused.
  assert.equal((await page.cancelBatch(batch.batchId)).changed, 0);
  const watchOnly = new TaskClient({ baseUrl: api.baseUrl, token: (scope) => mintForBatch(scope.batch, ["watch"]) });
  await assert.rejects(watchOnly.cancelBatch(batch.batchId), { code: "right-not-granted", status: 403 });
  await assert.rejects(page.cancelBatch(42), { code: "invalid-request", message: /^batchId: must be a string/ });
});

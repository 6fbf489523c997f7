// Tokens per scope (issue 29) against the real reference server: one
// TaskClient follows 12 tasks, each authorised alone by a single-task
// browser token. The token function is asked for what it must cover
// (`{tasks: [id]}`), once per task; an expiry refreshes that task's
// token only. A token function that ignores its scope (one token for
// everything, as before scopes) is refused on every task but its own:
// that is what the scope fixes. Tokens are minted as an application's
// backend would, with `jose`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { SignJWT } from "jose";
import { TaskClient } from "../../dist/client/node.js";
import { startServer } from "./server.mjs";
import { newTaskId } from "./pages.mjs";

const KEY = randomBytes(32);
let api;

before(async () => {
  api = await startServer(["--browser-token-key", `tenant:k1=HS256:${KEY.toString("base64")}`, "--browser-token-leeway-secs", "0"]);
});
after(async () => {
  await api?.stop();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A browser token for the tasks `tasks` only, living `ttlSecs`. */
function mint(tasks, ttlSecs = 600) {
  return new SignJWT({ tasks, rights: ["watch", "cancel"] })
    .setProtectedHeader({ alg: "HS256", kid: "k1" })
    .setSubject("page-user")
    .setAudience("taskwire")
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSecs)
    .sign(KEY);
}

/** Starts and ends `id` with the executor's signed callbacks. */
async function run(id, n) {
  const t0 = Date.now();
  await api.callback(id, { type: "start", atMs: t0, worker: "w" }, "s");
  await api.callback(id, { type: "succeed", atMs: t0 + 1, resultRef: `r${n}`, resultHash: "sha256:ab12" }, "ok");
}

test("one client follows 12 tasks with 12 single-task tokens, each asked once for its own task", async () => {
  const ids = [];
  for (let i = 0; i < 12; i++) ids.push(await newTaskId(api));
  const asked = [];
  const client = new TaskClient({
    baseUrl: api.baseUrl,
    waitMs: 1000,
    token: (scope) => {
      asked.push(scope);
      return mint(scope.tasks);
    },
  });
  const watches = ids.map((id) => client.watch(id));
  await sleep(300);
  await Promise.all(ids.map((id, n) => run(id, n)));
  const done = await Promise.all(watches.map((w) => w.done));
  assert.deepEqual(
    done.map((t) => [t.id, t.state]),
    ids.map((id) => [id, "succeeded"]),
  );
  assert.deepEqual(
    asked.map((s) => s.tasks[0]).sort(),
    [...ids].sort(),
    "one ask per task, for that task alone",
  );
  assert.ok(asked.every((s) => Object.keys(s).join() === "tasks" && s.tasks.length === 1), JSON.stringify(asked));
  // A POST on a task is in that task's scope: its token is the one kept.
  const cancel = await client.cancel(ids[0]);
  assert.equal(cancel.reason, "terminal-conflict");
  assert.equal(asked.length, 12, "the task's token was reused");
  client.dispose();
});

test("a token function that ignores the scope is refused on the other tasks (what the scope fixes)", async () => {
  const [first, second] = [await newTaskId(api), await newTaskId(api)];
  const token = await mint([first]);
  // Declares no parameter: one token for everything, as before scopes.
  const client = new TaskClient({ baseUrl: api.baseUrl, waitMs: 1000, token: () => token });
  const own = client.watch(first);
  const other = client.watch(second);
  await assert.rejects(other.done, (e) => e.code === "not-found" && e.status === 404);
  await run(first, 1);
  assert.equal((await own.done).state, "succeeded");
});

test("an expired token refreshes its own task's scope only", async () => {
  const [shortLived, longLived] = [await newTaskId(api), await newTaskId(api)];
  const asked = new Map();
  const client = new TaskClient({
    baseUrl: api.baseUrl,
    waitMs: 1000,
    token: ({ tasks: [id] }) => {
      asked.set(id, (asked.get(id) ?? 0) + 1);
      // The first token of `shortLived` lives 1 s; every other, 10 min.
      return mint([id], id === shortLived && asked.get(id) === 1 ? 1 : 600);
    },
  });
  const watches = [client.watch(shortLived), client.watch(longLived)];
  // Past the short token's expiry (refused from its exp + 1 s), with both
  // watches polling all along (1 s holds).
  await sleep(3500);
  await run(shortLived, 1);
  await run(longLived, 2);
  const done = await Promise.all(watches.map((w) => w.done));
  assert.deepEqual(
    done.map((t) => t.state),
    ["succeeded", "succeeded"],
  );
  assert.equal(asked.get(shortLived), 2, "one refresh for the expired scope");
  assert.equal(asked.get(longLived), 1, "the other scope kept its token");
});

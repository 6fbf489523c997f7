// No ordering trap (issue 29): a TaskClient made before `init()` (at
// module scope, in a module that runs before the page's `await init()`)
// works. Its POSTs wait for an `init()` in progress; a watch started
// before `init()` resolved, or a POST with no `init()` at all, is
// refused with `not-initialized` and a message that says what to do.
// Through the browser entry (dist/client/index.js), which Node can load
// when given the .wasm bytes; the Node entry initialises on import.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import init, { TaskClient, TaskwireError } from "../../dist/client/index.js";

const wasm = readFileSync(new URL("../../dist/client/taskwire_wasm_bg.wasm", import.meta.url));
const created = () => new Response(JSON.stringify({ id: "t1", state: "queued", attempts: 0, maxAttempts: 1, progress: 0, version: 0, expiresAtMs: 1e13 }), { status: 201 });

test("a TaskClient made before init() waits for it, and says what to do when used too early", async () => {
  let sent = 0;
  const client = new TaskClient({ baseUrl: "http://backend.test", fetch: async () => (sent++, created()) });
  // Made before init(), with bad options the wasm side checks: told at first use.
  const early = new TaskClient({ baseUrl: "ftp://nowhere", fetch: async () => created() });
  const notYet = (e) => e instanceof TaskwireError && e.code === "not-initialized" && /await init\(\)/.test(e.message);
  assert.throws(() => client.watch("t1"), notYet);
  await assert.rejects(client.createTask({ ttlMs: 1000, maxAttempts: 1 }), notYet);
  assert.equal(sent, 0);
  // init() in progress: the POST waits for it rather than failing.
  const starting = init(wasm);
  const task = client.createTask({ ttlMs: 1000, maxAttempts: 1 });
  await starting;
  assert.equal((await task).id, "t1");
  assert.equal(sent, 1);
  assert.throws(() => early.watch("t1"), (e) => e instanceof TaskwireError && e.code === "invalid-request" && /baseUrl/.test(e.message));
  // Made after init(): bad options throw at once, as ever.
  assert.throws(() => new TaskClient({ baseUrl: "ftp://nowhere" }), (e) => e.code === "invalid-request");
});

// TaskClient against a reference server with per-tenant quotas
// (PROTOCOL.md §Quotas per tenant): a refusal reaches the page as a
// TaskwireError with the server's own code and status, not `http-429`;
// a create with an Idempotency-Key waits `Retry-After` and goes through.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { TaskClient, TaskwireError } from "../../dist/client/node.js";
import { startServer } from "./server.mjs";

let server;
before(async () => {
  server = await startServer(["--tenant-quota", "tenant:create-rate=1,create-burst=1,max-open-tasks=3"]);
});
after(async () => {
  await server?.stop();
});

const client = () => new TaskClient({ baseUrl: server.baseUrl, headers: server.headers, backoff: { initialMs: 5, maxMs: 20 } });
const body = { ttlMs: 600_000, maxAttempts: 1 };

test("a create past the tenant's rate is refused with create-rate-limited, and a keyed one waits it out", async () => {
  const c = client();
  await c.createTask(body);
  await assert.rejects(c.createTask(body), (e) => {
    assert.ok(e instanceof TaskwireError, String(e));
    assert.equal(e.code, "create-rate-limited", e.message);
    assert.equal(e.status, 429);
    return true;
  });
  // With a key the client retries after Retry-After (1 s) and succeeds.
  const started = Date.now();
  const task = await c.createTask(body, { idempotencyKey: "quota-wait-1" });
  assert.equal(task.state, "queued");
  assert.ok(Date.now() - started >= 900, `waited only ${Date.now() - started} ms`);
});

test("a create past the tenant's open tasks is refused with open-task-quota", async () => {
  const c = client();
  // Two open already (the test above); one more fits after the rate allows it.
  await new Promise((r) => setTimeout(r, 1100));
  await c.createTask(body);
  await new Promise((r) => setTimeout(r, 1100));
  await assert.rejects(c.createTask(body), (e) => e instanceof TaskwireError && e.code === "open-task-quota" && e.status === 429);
});

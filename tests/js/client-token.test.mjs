// TaskClient's `token` option in Node, through a fetch that plays the
// server: the token goes in `Authorization`; a token function is asked
// first, then once per expiry (a 401 `token-expired`), with the request
// sent again; other 401s are not retried; bad options are coded errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { TaskClient, TaskwireError } from "../../dist/client/node.js";

const BASE = "http://backend.test";
const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
const expired = () => json(401, { error: { code: "token-expired", message: "token: expired" } });
const refused = () => json(401, { error: { code: "unauthorized", message: "token: bad signature" } });
const created = (id = "t1") => json(201, { id, state: "queued", attempts: 0, maxAttempts: 1, progress: 0, version: 0 });

/** A fetch answering `answer(authorization, url)`, recording what it saw. */
function server(answer) {
  const seen = [];
  const fetch = async (url, init) => {
    const auth = init.headers.authorization ?? init.headers.Authorization;
    seen.push(auth);
    return answer(auth, url, seen.length);
  };
  return { fetch, seen };
}

test("a string token is sent as Authorization: Bearer", async () => {
  const s = server(() => created());
  const client = new TaskClient({ baseUrl: BASE, token: "tok-1", fetch: s.fetch });
  await client.createTask({ ttlMs: 1000, maxAttempts: 1 });
  assert.deepEqual(s.seen, ["Bearer tok-1"]);
});

test("a token function is asked once, then again on token-expired, and the request retried", async () => {
  let asked = 0;
  const token = async () => `tok-${++asked}`;
  const s = server((auth) => (auth === "Bearer tok-1" ? expired() : created()));
  const client = new TaskClient({ baseUrl: BASE, token, fetch: s.fetch });
  const first = await client.createTask({ ttlMs: 1000, maxAttempts: 1 });
  assert.equal(first.id, "t1");
  assert.deepEqual(s.seen, ["Bearer tok-1", "Bearer tok-2"]);
  assert.equal(asked, 2);
  // The fresh token is kept for the next requests.
  await client.createTask({ ttlMs: 1000, maxAttempts: 1 });
  assert.deepEqual(s.seen.slice(2), ["Bearer tok-2"]);
  assert.equal(asked, 2);
});

test("a synchronous token function works the same", async () => {
  let asked = 0;
  const s = server((auth) => (auth === "Bearer a" ? expired() : created()));
  const client = new TaskClient({ baseUrl: BASE, token: () => (++asked === 1 ? "a" : "b"), fetch: s.fetch });
  await client.createTask({ ttlMs: 1000, maxAttempts: 1 });
  assert.deepEqual(s.seen, ["Bearer a", "Bearer b"]);
});

test("requests that expire together share one ask", async () => {
  let asked = 0;
  const token = async () => `tok-${++asked}`;
  const s = server(async (auth) => {
    await new Promise((r) => setTimeout(r, 20));
    return auth === "Bearer tok-1" ? expired() : created();
  });
  const client = new TaskClient({ baseUrl: BASE, token, fetch: s.fetch });
  await Promise.all([1, 2, 3].map(() => client.createTask({ ttlMs: 1000, maxAttempts: 1 })));
  assert.equal(asked, 2, "one first token, one refresh");
  assert.deepEqual(s.seen.filter((a) => a === "Bearer tok-2").length, 3);
});

test("only once: a fresh token that is refused again ends with the 401", async () => {
  let asked = 0;
  const s = server(() => expired());
  const client = new TaskClient({ baseUrl: BASE, token: () => `tok-${++asked}`, fetch: s.fetch });
  await assert.rejects(client.createTask({ ttlMs: 1000, maxAttempts: 1 }), (e) => e instanceof TaskwireError && e.status === 401);
  assert.equal(asked, 2);
  assert.equal(s.seen.length, 2);
});

test("another 401 is not a reason to ask for a token", async () => {
  let asked = 0;
  const s = server(() => refused());
  const client = new TaskClient({ baseUrl: BASE, token: () => `tok-${++asked}`, fetch: s.fetch });
  await assert.rejects(client.createTask({ ttlMs: 1000, maxAttempts: 1 }), (e) => e.code === "unauthorized" && e.status === 401);
  assert.equal(asked, 1);
  assert.equal(s.seen.length, 1);
});

test("a watch goes on through an expiry, and stops on a 401 that is not one", async () => {
  let asked = 0;
  const view = (version, state) => ({ id: "t1", state, attempts: 1, maxAttempts: 1, progress: 0, version, expiresAtMs: Date.now() + 60_000 });
  const s = server((auth, url, n) => {
    if (n === 1) return json(200, { mode: "snapshot", events: [], task: view(1, "running") });
    if (auth === "Bearer tok-1") return expired();
    return json(200, { mode: "snapshot", events: [], task: { ...view(2, "succeeded"), progress: 100, resultRef: "r", resultHash: "sha256:ab" } });
  });
  const client = new TaskClient({ baseUrl: BASE, token: async () => `tok-${++asked}`, fetch: s.fetch, waitMs: 0 });
  const done = await client.watch("t1").done;
  assert.equal(done.state, "succeeded");
  assert.equal(asked, 2);

  const stop = server(() => refused());
  const w = new TaskClient({ baseUrl: BASE, token: "x", fetch: stop.fetch }).watch("t1");
  await assert.rejects(w.done, (e) => e.code === "unauthorized" && e.status === 401);
});

test("a token function that fails or returns no string fails the request, and is asked again next time", async () => {
  const answers = [() => Promise.reject(new Error("backend down")), () => 42, () => "good"];
  const s = server(() => created());
  const client = new TaskClient({ baseUrl: BASE, token: () => answers.shift()(), fetch: s.fetch });
  await assert.rejects(client.createTask({ ttlMs: 1000, maxAttempts: 1 }), (e) => e.code === "network" && /backend down/.test(e.message));
  await assert.rejects(client.createTask({ ttlMs: 1000, maxAttempts: 1 }), (e) => e.code === "network" && /options\.token/.test(e.message));
  await client.createTask({ ttlMs: 1000, maxAttempts: 1 });
  assert.deepEqual(s.seen, ["Bearer good"]);
});

test("bad token options are invalid-request errors naming options.token", () => {
  for (const token of [42, "", null, {}]) {
    assert.throws(
      () => new TaskClient({ baseUrl: BASE, token }),
      (e) => e instanceof TaskwireError && e.code === "invalid-request" && /options\.token/.test(e.message),
      String(token),
    );
  }
  assert.throws(
    () => new TaskClient({ baseUrl: BASE, token: "t", headers: { Authorization: "Bearer u" } }),
    (e) => e.code === "invalid-request" && /options\.token/.test(e.message) && /not both/.test(e.message),
  );
});

test("a token function with a parameter is asked per scope; one without is asked once for all", async () => {
  const view = (id) => ({ id, state: "succeeded", attempts: 1, maxAttempts: 1, progress: 100, version: 2, expiresAtMs: Date.now() + 60_000, resultRef: "r", resultHash: "sha256:ab" });
  const answer = (auth, url) => {
    if (url.endsWith("/v1/tasks")) return created();
    const id = decodeURIComponent(url.split("/v1/tasks/")[1].split("/")[0]);
    return json(200, { mode: "snapshot", events: [], task: view(id) });
  };
  const scopes = [];
  const scoped = server(answer);
  const client = new TaskClient({ baseUrl: BASE, fetch: scoped.fetch, token: (scope) => (scopes.push(scope), `tok-${JSON.stringify(scope)}`) });
  await client.createTask({ ttlMs: 1000, maxAttempts: 1 });
  await client.watch("a").done;
  await client.watch("b").done;
  await client.watch("a").done;
  assert.deepEqual(scopes, [{}, { tasks: ["a"] }, { tasks: ["b"] }], "asked once per scope, then kept");
  assert.deepEqual(scoped.seen, ['Bearer tok-{}', 'Bearer tok-{"tasks":["a"]}', 'Bearer tok-{"tasks":["b"]}', 'Bearer tok-{"tasks":["a"]}']);

  let asked = 0;
  const shared = server(answer);
  const old = new TaskClient({ baseUrl: BASE, fetch: shared.fetch, token: () => `tok-${++asked}` });
  await old.createTask({ ttlMs: 1000, maxAttempts: 1 });
  await old.watch("a").done;
  await old.watch("b").done;
  assert.equal(asked, 1, "no parameter: one token for everything, as before scopes");
});

test("a batch watch asks for the batch's scope", async () => {
  const scopes = [];
  const s = server(() =>
    json(200, { batchId: "b1", mode: "snapshot", cursor: 3, size: 1, open: 0, tasks: [{ mode: "snapshot", task: { id: "t1", state: "cancelled", attempts: 0, maxAttempts: 1, progress: 0, version: 1, expiresAtMs: Date.now() + 60_000 } }] }),
  );
  const client = new TaskClient({ baseUrl: BASE, fetch: s.fetch, token: async (scope) => (scopes.push(scope), "tok") });
  const tasks = await client.watchBatch("b1").done;
  assert.equal(tasks[0].state, "cancelled");
  assert.deepEqual(scopes, [{ batch: "b1" }]);
});

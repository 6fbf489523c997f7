// Thousands of random and malformed JavaScript values into every function
// and constructor of the package. Every call must either return or throw
// an Error with a `.code`; a wasm trap (`RuntimeError: unreachable`) or any
// other throw fails. Afterwards the module must still work: the seed's
// summary scenario runs and gives the right result. Seeded; the failing
// seed and call are printed.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as tw from "../../dist/full/node.js";
import { rng } from "./rng.mjs";

const { TaskBook, TaskMirror, TaskClient, TaskwireError, createTask, applyEvent, expireTask, worthHolding, planBatch, checkStreamName, OutputLog } = tw;

function revoked() {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

// The client never reaches a server here: its fetch answers 503 at once
// (watches started by the fuzz are stopped at the end).
const offlineFetch = async () => new Response("", { status: 503 });
const watches = [];

const HUGE = "x".repeat(1 << 20);
const TOO_HUGE = "y".repeat(33 * 1024 * 1024);

function throwingGetter(field) {
  return Object.defineProperty({ type: "start", atMs: 1, worker: "w" }, field, {
    enumerable: true,
    get() {
      throw new Error("getter exploded");
    },
  });
}

function cyclic() {
  const o = { type: "start", atMs: 1, worker: "w" };
  o.self = o;
  return o;
}

function deep(n) {
  let v = [];
  for (let i = 0; i < n; i++) v = [v];
  return v;
}

const SCALARS = [
  null, undefined, true, false, 0, -0, 1, -1, 1.5, NaN, Infinity, -Infinity, 2 ** 60, 2 ** 53, 2 ** 53 + 2,
  Number.MAX_VALUE, Number.MIN_VALUE, 1e-320, "", " ", "\uFEFF", "0", "1", "t", "summary", "NaN", "\ud800",
  "\u0000", "😀", HUGE, 10n, Symbol("s"), () => 1, new Date(0), /re/, new Map(), new Uint8Array(4),
  revoked(),
];

const TEMPLATES = {
  start: { type: "start", atMs: 1200, worker: "w" },
  progress: { type: "progress", atMs: 6400, progress: 25, cursor: "c" },
  succeed: { type: "succeed", atMs: 24300, resultRef: "r", resultHash: "sha256:ab12" },
  fail: { type: "fail", atMs: 10, error: "e", retryable: true },
  expire: { type: "expire", atMs: 5 },
  input: { id: "t", nowMs: 0, ttlMs: 1000, maxAttempts: 3 },
  view: { id: "t", state: "running", expiresAtMs: 1000, attempts: 1, maxAttempts: 3, progress: 10, version: 2 },
  task: { id: "t", state: "queued", expiresAtMs: 1000, attempts: 0, maxAttempts: 3, progress: 0, version: 0, history: [] },
  delta: { mode: "delta", events: [{ version: 1, event: { type: "start", atMs: 1, worker: "w" } }], task: { id: "t", state: "running", expiresAtMs: 1000, attempts: 1, maxAttempts: 3, progress: 0, version: 1 } },
  snapshot: { mode: "snapshot", events: [], task: { id: "t", state: "queued", expiresAtMs: 1000, attempts: 0, maxAttempts: 3, progress: 0, version: 0 } },
  mirror: { taskId: "t", task: null },
};

function junk(r, depth = 0) {
  const k = r();
  if (k < 0.45 || depth > 3) return SCALARS[Math.floor(r() * SCALARS.length)];
  if (k < 0.55) return [junk(r, depth + 1), junk(r, depth + 1)];
  if (k < 0.6) return throwingGetter(["atMs", "type", "worker"][Math.floor(r() * 3)]);
  if (k < 0.63) return cyclic();
  if (k < 0.65) return deep(r() < 0.5 ? 100 : 20_000);
  if (k < 0.66) return TOO_HUGE;
  if (k < 0.68) return new Proxy({}, { get() { throw new Error("proxy"); }, ownKeys() { throw new Error("proxy"); } });
  return mutate(r, Object.values(TEMPLATES)[Math.floor(r() * Object.keys(TEMPLATES).length)], depth + 1);
}

/** A near-valid value: a template (plain data) with a few fields
 * replaced, removed or added. */
function mutate(r, template, depth = 0) {
  const v = structuredClone(template);
  const keys = Object.keys(v);
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const key = keys[Math.floor(r() * keys.length)];
    const what = r();
    if (what < 0.5) v[key] = junk(r, depth + 1);
    else if (what < 0.7) delete v[key];
    else if (what < 0.85) v["extra" + i] = junk(r, depth + 1);
    // Recurse into the template's own (plain) value, never into junk.
    else if (template[key] && typeof template[key] === "object") v[key] = mutate(r, template[key], depth + 1);
  }
  return v;
}

function arg(r) {
  return r() < 0.5 ? junk(r) : mutate(r, Object.values(TEMPLATES)[Math.floor(r() * Object.keys(TEMPLATES).length)]);
}

/** JSON text of a value, as a server might send it (the harness's own
 * stringify must not throw on the proxies and cycles it generates). */
function safeText(v) {
  try {
    return JSON.stringify(v) ?? "null";
  } catch {
    return "{";
  }
}

function validBook() {
  const book = new TaskBook({ retentionVersions: 8 });
  book.create({ id: "t", nowMs: 0, ttlMs: 1000, maxAttempts: 3 });
  book.apply("t", { type: "start", atMs: 1, worker: "w" });
  return book;
}

const CALLS = [
  ["createTask", (r) => createTask(arg(r))],
  ["applyEvent", (r) => applyEvent(arg(r), arg(r))],
  ["expireTask", (r) => expireTask(arg(r))],
  ["planBatch", (r) => planBatch(junk(r), junk(r), junk(r))],
  ["worthHolding", (r) => worthHolding(r() < 0.5 ? junk(r) : { waitMs: junk(r), mode: r() < 0.5 ? "caught-up" : junk(r), live: r() < 0.5 ? true : junk(r), askedEpoch: junk(r), epoch: junk(r) })],
  ["checkStreamName", (r) => checkStreamName(junk(r), r() < 0.5 ? undefined : junk(r))],
  ["new OutputLog", () => new OutputLog()],
  ["output.append", (r, ctx) => ctx.output.append(r() < 0.3 ? junk(r) : { attempt: r() < 0.5 ? 1 : junk(r), offset: junk(r), text: r() < 0.5 ? "draft" : junk(r) }, r() < 0.5 ? 1 : junk(r), junk(r), r() < 0.5 ? undefined : junk(r))],
  ["output.since", (r, ctx) => ctx.output.since(junk(r), junk(r), r() < 0.5 ? 1 : junk(r), junk(r))],
  ["new TaskBook", (r) => new TaskBook(arg(r))],
  ["book.create", (r, ctx) => ctx.book.create(arg(r))],
  ["book.get", (r, ctx) => ctx.book.get(junk(r))],
  ["book.apply", (r, ctx) => ctx.book.apply(r() < 0.7 ? "t" : junk(r), arg(r), r() < 0.5 ? undefined : junk(r))],
  ["book.resume", (r, ctx) => ctx.book.resume(r() < 0.7 ? "t" : junk(r), junk(r))],
  ["book.resumeJson", (r, ctx) => ctx.book.resumeJson(r() < 0.7 ? "t" : junk(r), junk(r))],
  ["book.deliverResult", (r, ctx) => ctx.book.deliverResult(r() < 0.7 ? "t" : junk(r), junk(r), junk(r))],
  ["book.expireDue", (r, ctx) => ctx.book.expireDue(junk(r))],
  ["book.sweepDue", (r, ctx) => ctx.book.sweepDue(junk(r))],
  ["book.drainNotifications", (_r, ctx) => ctx.book.drainNotifications()],
  ["new TaskMirror", (r) => new TaskMirror(junk(r))],
  ["TaskMirror.fromSnapshot", (r) => TaskMirror.fromSnapshot(arg(r))],
  ["TaskMirror.fromJSON", (r) => TaskMirror.fromJSON(arg(r))],
  ["mirror.merge", (r, ctx) => ctx.mirror.merge(arg(r))],
  ["mirror.mergeJson", (r, ctx) => ctx.mirror.mergeJson(r() < 0.5 ? safeText(arg(r)) : junk(r))],
  ["new TaskClient", (r) => new TaskClient(r() < 0.5 ? junk(r) : { baseUrl: junk(r), headers: junk(r), fetch: offlineFetch, backoff: junk(r), persist: junk(r), transport: junk(r) })],
  ["client.watch", (r, ctx) => {
    const w = ctx.client.watch(r() < 0.5 ? "t" : junk(r), r() < 0.5 ? junk(r) : { cursor: junk(r), onUpdate: junk(r), onStatus: junk(r) });
    watches.push(w);
    return w;
  }],
  ["client.createTask", (r, ctx) => ctx.client.createTask(arg(r), r() < 0.5 ? junk(r) : { idempotencyKey: junk(r) })],
  ["client.deliver", (r, ctx) => ctx.client.deliver(junk(r), junk(r))],
];

test("no input traps the module or throws anything but a coded Error", async () => {
  const seed = Number(process.env.FUZZ_SEED ?? 20261129);
  const rounds = Number(process.env.FUZZ_ROUNDS ?? 10000);
  const r = rng(seed);
  const ctx = {
    book: validBook(),
    mirror: new TaskMirror("t"),
    output: new OutputLog(),
    client: new TaskClient({ baseUrl: "http://127.0.0.1:9", fetch: offlineFetch, backoff: { initialMs: 1000, maxMs: 1000 } }),
  };
  const bad = (name, i, e) =>
    !(e instanceof Error) || typeof e.code !== "string" || e.code === "internal" || e instanceof WebAssembly.RuntimeError
      ? `seed ${seed}, call ${i} (${name}): threw ${e instanceof Error ? `${e.name} ${e.code ?? ""}: ${e.message}` : String(e)}`
      : undefined;
  const pending = [];
  let threw = 0;
  try {
  for (let i = 0; i < rounds; i++) {
    const [name, call] = CALLS[Math.floor(r() * CALLS.length)];
    if (process.env.FUZZ_TRACE) console.error(i, name);
    try {
      const result = call(r, ctx);
      // Async calls must reject the same way.
      if (result instanceof Promise) pending.push(result.then(() => undefined, (e) => bad(name, i, e)));
    } catch (e) {
      threw++;
      const problem = bad(name, i, e);
      if (problem) assert.fail(problem);
    }
  }
  } finally {
    // Started watches retry forever against the 503 fetch: end them, even
    // when an assertion failed, or the process would never exit.
    for (const w of watches) w.stop();
  }
  const asyncProblems = (await Promise.all(pending)).filter(Boolean);
  assert.deepEqual(asyncProblems, []);
  assert.ok(threw > rounds / 10, `only ${threw} of ${rounds} calls were rejected: the fuzz is too tame`);

  // The module still works: the fuzzed book keeps its task, and a fresh
  // run of the seed's summary gives the right answer.
  assert.equal(ctx.book.get("t").id, "t");
  const book = new TaskBook();
  book.create({ id: "summary", nowMs: 0, ttlMs: 3_600_000, maxAttempts: 3 });
  for (const [event, cb] of [
    [{ type: "start", atMs: 1200, worker: "w" }, "1"],
    [{ type: "progress", atMs: 6400, progress: 25, cursor: "c" }, "2"],
    [{ type: "progress", atMs: 13100, progress: 55, cursor: "c" }, "3"],
    [{ type: "progress", atMs: 20700, progress: 82, cursor: "c" }, "4"],
    [{ type: "succeed", atMs: 24300, resultRef: "r", resultHash: "sha256:ab12" }, "5"],
  ]) {
    assert.equal(book.apply("summary", event, cb).changed, true);
  }
  assert.equal(book.apply("summary", { type: "succeed", atMs: 24400, resultRef: "r", resultHash: "sha256:ab12" }, "6").reason, "duplicate-result");
  assert.deepEqual(book.resume("summary", 3).events.map((e) => e.version), [4, 5]);
  assert.equal(book.drainNotifications().length, 1);
});

test("a revoked Proxy in any argument is a coded error (it used to escape as a codeless TypeError)", () => {
  const book = validBook();
  const mirror = new TaskMirror("t");
  const client = new TaskClient({ baseUrl: "http://127.0.0.1:9", fetch: offlineFetch });
  const event = { type: "start", atMs: 1, worker: "w" };
  const calls = {
    "new TaskBook": (p) => new TaskBook(p),
    "new TaskBook({retentionVersions})": (p) => new TaskBook({ retentionVersions: p }),
    "new TaskMirror": (p) => new TaskMirror(p),
    "new TaskClient": (p) => new TaskClient(p),
    "new TaskClient({baseUrl})": (p) => new TaskClient({ baseUrl: p }),
    "new TaskClient({headers})": (p) => new TaskClient({ baseUrl: "http://x", headers: p }),
    "book.get": (p) => book.get(p),
    "book.apply(id)": (p) => book.apply(p, event),
    "book.apply(event)": (p) => book.apply("t", p),
    "book.apply(callbackId)": (p) => book.apply("t", event, p),
    "book.resume": (p) => book.resume("t", p),
    "book.deliverResult": (p) => book.deliverResult("t", p, 1),
    "book.expireDue": (p) => book.expireDue(p),
    "book.sweepDue": (p) => book.sweepDue(p),
    "mirror.merge": (p) => mirror.merge(p),
    "mirror.mergeJson": (p) => mirror.mergeJson(p),
    "TaskMirror.fromJSON": (p) => TaskMirror.fromJSON(p),
    createTask: (p) => createTask(p),
    "client.watch": (p) => client.watch(p),
    "client.watch(options)": (p) => client.watch("t", p),
  };
  for (const [name, call] of Object.entries(calls)) {
    assert.throws(() => call(revoked()), (e) => e instanceof TaskwireError && e.code === "invalid-request", name);
  }
});

test("the client build (JSON.parse walked into the readers) gives coded errors for any text", async () => {
  const small = await import("../../dist/client/node.js");
  const mirror = new small.TaskMirror("t");
  const r = rng(7);
  const texts = [
    "{", "", "null", "[]", "1e400", '{"mode":"delta","events":[],"task":{"version":1e400}}', "[".repeat(20_000) + "]".repeat(20_000),
    '{"mode":"snapshot","events":[],"task":' + "[".repeat(100) + "]".repeat(100) + "}", '"\\ud800"', '{"mode":"caught-up","events":[]} x',
    JSON.stringify(TEMPLATES.delta), JSON.stringify(TEMPLATES.snapshot),
  ];
  for (let i = 0; i < 500; i++) texts.push(safeText(arg(r)));
  for (const text of texts) {
    try {
      mirror.mergeJson(text);
    } catch (e) {
      assert.ok(e instanceof small.TaskwireError && e.code === "invalid-request", `${text.slice(0, 60)}: ${e}`);
    }
  }
  assert.throws(() => mirror.mergeJson("{"), (e) => e.code === "invalid-request" && e.message.startsWith("answer: invalid JSON"));
  assert.throws(() => mirror.mergeJson('{"mode":"delta","events":[{"version":1,"event":{"type":"start","atMs":-1,"worker":"w"}}]}'), (e) => e.message === "answer.events[0].event.atMs: must be a finite number >= 0, got -1");
  assert.equal(new small.TaskMirror("t").mergeJson(JSON.stringify(TEMPLATES.delta)).changed, true, "still works");
});

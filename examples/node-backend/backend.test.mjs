// Tests of what the conformance suite does not see: durability across a
// crash (SIGKILL), a torn last journal line, a damaged journal, exact
// input across restarts and old journals, --help, callback secret rotation
// and the callback body time limit.
//
//   node --test examples/node-backend/
//
// (The protocol itself: node tests/conformance/local.mjs --server
// "node examples/node-backend/server.mjs", see README.md.)

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { SECRET, SERVER, TOKEN, call, callback, kill, observe, signatureHeaders, sleep, start, tempDir } from "./testing.mjs";

describe("restart persistence", () => {
  test("everything acknowledged before a SIGKILL is there after the restart", async () => {
    const data = tempDir();
    let server = await start(data);
    const { base } = server;
    const key = `create-${randomBytes(4).toString("hex")}`;
    const body = { ttlMs: 3_600_000, maxAttempts: 2, kind: "summary", input: { doc: "d", n: [1, 2.5] } };

    // A task that succeeds (and is delivered), one that is retried, one
    // that the sweeper expires, and one left running.
    const created = await call(base, "POST", "/v1/tasks", { body, headers: { "idempotency-key": key } });
    assert.equal(created.status, 201);
    const done = created.json.id;
    const retried = (await call(base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 3 } })).json.id;
    const expiring = (await call(base, "POST", "/v1/tasks", { body: { ttlMs: 300, maxAttempts: 1 } })).json.id;
    const running = (await call(base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 1 } })).json.id;

    const steps = [
      [done, { type: "start", atMs: 1200, worker: "w1" }, "cb-1"],
      [done, { type: "progress", atMs: 6400, progress: 25, cursor: "c25" }, "cb-2"],
      [done, { type: "succeed", atMs: 24300, resultRef: "blob://r", resultHash: "sha256:ab" }, "cb-3"],
      [retried, { type: "start", atMs: 10, worker: "w1" }, "cb-1"],
      [retried, { type: "fail", atMs: 20, error: "timeout", retryable: true }, "cb-2"],
      [retried, { type: "start", atMs: 30, worker: "w2" }, "cb-3"],
      [running, { type: "start", atMs: 10, worker: "w1" }, "cb-1"],
      [running, { type: "progress", atMs: 20, progress: 40, cursor: "c40" }, "cb-2"],
    ];
    for (const [id, event, cb] of steps) {
      const t = await callback(base, id, event, cb);
      assert.equal(t.status, 200);
      assert.equal(t.json.changed, true, `${event.type} on ${id}: ${t.json.reason}`);
    }
    // Callbacks that change nothing are not journaled; their answers must not change either.
    assert.equal((await callback(base, running, { type: "progress", atMs: 25, progress: 30, cursor: "c30" })).json.reason, "stale-progress");
    const delivered = await call(base, "POST", `/v1/tasks/${done}/deliveries`, { headers: { "idempotency-key": "d-1" } });
    assert.equal(delivered.status, 201);
    // Wait for the sweeper to expire the short task.
    for (let i = 0; i < 50; i++) {
      if ((await call(base, "GET", `/v1/tasks/${expiring}`)).json.state === "expired") break;
      await sleep(100);
    }
    const ids = [done, retried, expiring, running];
    const before = await observe(base, ids);
    assert.equal(before[expiring].task.state, "expired");
    assert.deepEqual(before.feed.notifications.map((n) => n.key).sort(), [`${done}:succeeded:3`, `${expiring}:expired:1`].sort());

    await kill(server);
    server = await start(data);
    try {
      const base2 = server.base;
      assert.match(server.output(), /records replayed/);
      assert.deepEqual(await observe(base2, ids), before, "the same tasks, versions, answers and feed");
      assert.deepEqual(before[done].task, { ...before[done].task, version: 3, state: "succeeded" });

      // Resume from a cursor still gets its delta.
      const delta = await call(base2, "GET", `/v1/tasks/${done}/resume?cursor=1`);
      assert.equal(delta.json.mode, "delta");
      assert.deepEqual(delta.json.events.map((e) => e.version), [2, 3]);
      // The idempotency key still maps to the same task ("as it is now").
      const again = await call(base2, "POST", "/v1/tasks", { body, headers: { "idempotency-key": key } });
      assert.equal(again.status, 200);
      assert.equal(again.json.id, done);
      assert.equal(again.json.version, 3);
      const other = await call(base2, "POST", "/v1/tasks", { body: { ...body, maxAttempts: 3 }, headers: { "idempotency-key": key } });
      assert.equal(other.status, 422);
      // Callback ids are remembered: a redelivery is a duplicate, a different event a conflict.
      const redelivered = await callback(base2, done, steps[2][1], "cb-3");
      assert.equal(redelivered.json.reason, "duplicate-callback");
      const conflict = await callback(base2, running, { type: "progress", atMs: 30, progress: 50, cursor: "c50" }, "cb-2");
      assert.equal(conflict.json.reason, "callback-conflict");
      // The delivery key still holds its receipt.
      const redelivery = await call(base2, "POST", `/v1/tasks/${done}/deliveries`, { headers: { "idempotency-key": "d-1" } });
      assert.equal(redelivery.status, 200);
      assert.deepEqual(redelivery.json.receipt, delivered.json.receipt);

      // Work goes on: a held request wakes, the feed continues after the old seqs.
      const held = call(base2, "GET", `/v1/tasks/${running}/resume?cursor=2&waitMs=10000`);
      await sleep(200);
      const progressed = await callback(base2, running, { type: "progress", atMs: 40, progress: 60, cursor: "c60" });
      assert.equal(progressed.json.version, 3);
      assert.deepEqual((await held).json.events.map((e) => e.version), [3]);
      await callback(base2, retried, { type: "succeed", atMs: 50, resultRef: "r", resultHash: "h" });
      const feed = (await call(base2, "GET", `/v1/notifications?after=${before.feed.next}`)).json;
      assert.deepEqual(feed.notifications.map((n) => n.key), [`${retried}:succeeded:4`]);
      assert.ok(feed.notifications[0].seq > before.feed.next);

      // And all of that survives a second crash too.
      const beforeSecond = await observe(base2, ids);
      await kill(server);
      server = await start(data);
      assert.deepEqual(await observe(server.base, ids), beforeSecond);
    } finally {
      await kill(server);
    }
  });

  test("without --data nothing is kept", async () => {
    let server = await start(undefined);
    const id = (await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 60_000, maxAttempts: 1 } })).json.id;
    await kill(server);
    server = await start(undefined);
    try {
      assert.equal((await call(server.base, "GET", `/v1/tasks/${id}`)).status, 404);
    } finally {
      await kill(server);
    }
  });
});

describe("the journal", () => {
  test("a torn last line (a write cut by a crash) is ignored and cut off", async () => {
    const data = tempDir();
    let server = await start(data);
    const id = (await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 1 } })).json.id;
    await callback(server.base, id, { type: "start", atMs: 1, worker: "w" });
    await kill(server);

    const file = join(data, "journal.jsonl");
    const intact = readFileSync(file, "utf8");
    // Half of a callback record, without its newline: never acknowledged.
    appendFileSync(file, `{"op":"callback","taskId":"${id}","callbackId":"cb-x","event":{"type":"progr`);
    server = await start(data);
    try {
      assert.match(server.output(), /ignored a torn last line/);
      const task = (await call(server.base, "GET", `/v1/tasks/${id}`)).json;
      assert.equal(task.version, 1);
      assert.equal(readFileSync(file, "utf8"), intact, "the fragment is cut off before anything is appended");
      // New writes land on a clean line and replay.
      const t = await callback(server.base, id, { type: "progress", atMs: 2, progress: 10, cursor: "c" }, "cb-x");
      assert.equal(t.json.version, 2);
      await kill(server);
      server = await start(data);
      assert.equal((await call(server.base, "GET", `/v1/tasks/${id}`)).json.version, 2);
    } finally {
      await kill(server);
    }
  });

  test("a torn header (a crash while creating the journal) starts empty", async () => {
    const data = tempDir();
    writeFileSync(join(data, "journal.jsonl"), '{"journal":"taskw');
    const server = await start(data);
    try {
      const created = await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 60_000, maxAttempts: 1 } });
      assert.equal(created.status, 201);
    } finally {
      await kill(server);
    }
  });

  test("a damaged line in the middle refuses to start (exit 2) and says where", async () => {
    const data = tempDir();
    const server = await start(data);
    await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 60_000, maxAttempts: 1 } });
    await kill(server);
    const file = join(data, "journal.jsonl");
    const lines = readFileSync(file, "utf8").split("\n");
    lines[1] = lines[1].slice(0, 10);
    writeFileSync(file, lines.join("\n"));
    const run = spawnSync(process.execPath, [SERVER, "--listen", "127.0.0.1:0", "--data", data], { encoding: "utf8", timeout: 10_000 });
    assert.equal(run.status, 2);
    assert.match(run.stderr, /journal\.jsonl:2: not a JSON line/);
  });

  test("a record that replays differently refuses to start", async () => {
    const data = tempDir();
    const server = await start(data);
    const id = (await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 60_000, maxAttempts: 1 } })).json.id;
    await callback(server.base, id, { type: "start", atMs: 1, worker: "w" });
    await kill(server);
    const file = join(data, "journal.jsonl");
    // The same callback twice (the last line: the header, the epoch and
    // the create come first): the second changes nothing on replay.
    const lines = readFileSync(file, "utf8").trimEnd().split("\n");
    assert.equal(JSON.parse(lines.at(-1)).op, "callback");
    writeFileSync(file, `${[...lines, lines.at(-1)].join("\n")}\n`);
    const run = spawnSync(process.execPath, [SERVER, "--listen", "127.0.0.1:0", "--data", data], { encoding: "utf8", timeout: 10_000 });
    assert.equal(run.status, 2);
    assert.match(run.stderr, new RegExp(`journal\\.jsonl:${lines.length + 1}: replay failed`));
  });
});

describe("callback secrets and limits", () => {
  const OLD = `whsec_${randomBytes(32).toString("base64")}`;
  const NEW = `whsec_${randomBytes(32).toString("base64")}`;

  test("a rotation accepts every listed secret; a removed one is refused after the restart", async () => {
    const data = tempDir();
    let server = await start(data, [], { secrets: [`tenant-a=${OLD}`, `tenant-a=${NEW}`] });
    const id = (await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 1 } })).json.id;
    try {
      assert.equal((await callback(server.base, id, { type: "start", atMs: 1, worker: "w" }, "s", OLD)).json.reason, "started");
      assert.equal((await callback(server.base, id, { type: "progress", atMs: 2, progress: 10, cursor: "c" }, "p1", NEW)).json.reason, "progress");
      assert.equal((await callback(server.base, id, { type: "progress", atMs: 3, progress: 20, cursor: "c" }, "p2", SECRET)).status, 401);
      await kill(server);
      server = await start(data, [], { secrets: [`tenant-a=${NEW}`] });
      const refused = await callback(server.base, id, { type: "progress", atMs: 3, progress: 20, cursor: "c" }, "p2", OLD);
      assert.equal(refused.status, 401);
      assert.match(refused.json.error.message, /^webhook-signature:/);
      assert.equal((await callback(server.base, id, { type: "progress", atMs: 3, progress: 20, cursor: "c" }, "p2", NEW)).json.version, 3);
    } finally {
      await kill(server);
    }
  });

  test("a callback id stays its task's after a restart (the journal replay remembers it)", async () => {
    const data = tempDir();
    let server = await start(data);
    const create = async () => (await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 1 } })).json.id;
    const [t1, t2] = [await create(), await create()];
    const send = (taskId) => {
      const body = { taskId, type: "start", atMs: 1, worker: "w" };
      return call(server.base, "POST", `/v1/tasks/${taskId}/callbacks`, { body, token: null, headers: signatureHeaders(SECRET, "one-id", JSON.stringify(body)) });
    };
    try {
      assert.equal((await send(t1)).json.reason, "started");
      await kill(server);
      server = await start(data);
      const refused = await send(t2);
      assert.equal(refused.status, 422);
      assert.equal(refused.json.error.code, "callback-id-reused-for-other-task");
      assert.equal((await send(t1)).json.reason, "duplicate-callback");
    } finally {
      await kill(server);
    }
  });

  test("a callback body that does not arrive in time is 408 request-timeout", async () => {
    const server = await start(undefined, ["--callback-body-timeout-ms", "300"]);
    try {
      const id = (await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 1 } })).json.id;
      const { hostname, port } = new URL(server.base);
      const headers = Object.entries(signatureHeaders(SECRET, "slow", "never sent")).map(([k, v]) => `${k}: ${v}\r\n`).join("");
      const started = Date.now();
      const answer = await new Promise((resolve) => {
        const socket = connect(Number(port), hostname.replace(/^\[|\]$/g, ""));
        let got = "";
        socket.on("data", (c) => (got += c));
        socket.on("close", () => resolve(got));
        socket.write(`POST /v1/tasks/${id}/callbacks HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n${headers}\r\n{ `);
        setTimeout(() => socket.destroy(), 5000);
      });
      assert.match(answer, /^HTTP\/1\.1 408 /);
      assert.match(answer, /"request-timeout"/);
      assert.ok(Date.now() - started >= 250, "not before the limit");
      assert.equal((await call(server.base, "GET", `/v1/tasks/${id}`)).json.version, 0);
    } finally {
      await kill(server);
    }
  });

  test("secrets that would leave a tenant without one, or name no tenant, refuse to start", () => {
    const cases = [
      [["--token", "tb=tenant-b", "--callback-secret", `tenant-a=${OLD}`], /no secret for tenant\(s\) tenant-b/],
      [["--callback-secret", `nobody=${OLD}`], /tenant "nobody" has no --token/],
      [["--token", "tb=tenant-b", "--callback-secret", `tenant-a=${OLD}`, "--callback-secret", `tenant-b=${OLD}`], /is also tenant "tenant-b"/],
    ];
    for (const [args, says] of cases) {
      const run = spawnSync(process.execPath, [SERVER, "--listen", "127.0.0.1:0", "--token", `${TOKEN}=tenant-a`, ...args], { encoding: "utf8", timeout: 10_000 });
      assert.equal(run.status, 2, `${args.join(" ")}: exit ${run.status}`);
      assert.match(run.stderr, says);
    }
  });
});

describe("exact input", () => {
  /** A create with a body given as text; resolves to {status, text}. */
  async function createText(base, text, key) {
    const res = await fetch(`${base}/v1/tasks`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...(key && { "idempotency-key": key }) },
      body: text,
    });
    return { status: res.status, text: await res.text() };
  }
  const getText = async (base, id) => (await fetch(`${base}/v1/tasks/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  const input = '{"n": 9007199254740993, "big": 123456789012345678901234567890}';
  const body = `{"ttlMs":3600000,"maxAttempts":1,"input":${input}}`;

  test("input and its key survive a restart exactly", async () => {
    const data = tempDir();
    let server = await start(data);
    try {
      const created = await createText(server.base, body, "exact-1");
      assert.equal(created.status, 201);
      assert.ok(created.text.endsWith(`,"input":${input}}`), created.text);
      const { id } = JSON.parse(created.text);
      await kill(server);
      server = await start(data);
      assert.ok((await getText(server.base, id)).endsWith(`,"input":${input}}`));
      const replay = await createText(server.base, body.replace("9007199254740993", "9007199254740993.0"), "exact-1");
      assert.equal(replay.status, 200, replay.text);
      const other = await createText(server.base, body.replace("9007199254740993", "9007199254740992"), "exact-1");
      assert.equal(other.status, 422, other.text);
    } finally {
      await kill(server);
    }
  });

  test("a journal written before exact input still replays, and its keys still match", async () => {
    const data = tempDir();
    const id = `tsk_${randomBytes(16).toString("hex")}`;
    const old = { op: "create", id, tenant: "tenant-a", nowMs: Date.now(), ttlMs: 3_600_000, maxAttempts: 2, kind: "k", input: { a: [1, 2.5] }, key: "old-1" };
    writeFileSync(join(data, "journal.jsonl"), `${JSON.stringify({ journal: "taskwire-node-backend", format: 1 })}\n${JSON.stringify(old)}\n`);
    const server = await start(data);
    try {
      assert.ok((await getText(server.base, id)).endsWith(',"input":{"a":[1,2.5]}}'));
      const same = await createText(server.base, '{"maxAttempts":2,"ttlMs":3600000,"kind":"k","input":{"a":[1,2.5]}}', "old-1");
      assert.equal(same.status, 200, same.text);
      assert.equal(JSON.parse(same.text).id, id);
      const other = await createText(server.base, '{"maxAttempts":3,"ttlMs":3600000,"kind":"k","input":{"a":[1,2.5]}}', "old-1");
      assert.equal(other.status, 422, other.text);
    } finally {
      await kill(server);
    }
  });
});

describe("command line", () => {
  test("--help prints the flags and exits 0", () => {
    const run = spawnSync(process.execPath, [SERVER, "--help"], { encoding: "utf8", timeout: 10_000 });
    assert.equal(run.status, 0);
    for (const flag of ["--listen", "--data", "--token", "--callback-secret", "--retention", "--cors-origin", "--lease-ms", "--unknown-grace-ms"]) {
      assert.ok(run.stdout.includes(flag), `--help mentions ${flag}`);
    }
  });

  test("a bad flag exits 2 with the usage", () => {
    for (const args of [["--nope"], ["--token", "no-equals"], ["--callback-secret", "secret"], ["--retention", "-1"], ["--listen", "nowhere"]]) {
      const run = spawnSync(process.execPath, [SERVER, ...args], { encoding: "utf8", timeout: 10_000 });
      assert.equal(run.status, 2, `${args.join(" ")}: exit ${run.status}`);
      assert.match(run.stderr, /usage:/);
    }
  });
});

describe("epoch", () => {
  test("a journal put back from a backup and marked restored answers with a new epoch that a mirror starts over from", async () => {
    const { TaskMirror } = await import("taskwire");
    const data = tempDir();
    let server = await start(data);
    const created = await call(server.base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 2 } });
    const id = created.json.id;
    const epoch = created.json.epoch;
    assert.match(epoch, /^[0-9a-f]{32}$/);
    await callback(server.base, id, { type: "start", atMs: 10, worker: "w" }, "cb-1");
    await callback(server.base, id, { type: "progress", atMs: 20, progress: 25, cursor: "a" }, "cb-2");
    const backup = readFileSync(join(data, "journal.jsonl"));
    await callback(server.base, id, { type: "progress", atMs: 30, progress: 55, cursor: "b" }, "cb-3");
    await callback(server.base, id, { type: "progress", atMs: 40, progress: 82, cursor: "c" }, "cb-4");
    // A client's mirror of the lost future: version 4, this epoch.
    const mirror = new TaskMirror(id);
    mirror.merge((await call(server.base, "GET", `/v1/tasks/${id}/resume?cursor=0`)).json);
    assert.equal(mirror.version, 4);
    await kill(server);
    server = await start(data);
    assert.equal((await call(server.base, "GET", `/v1/tasks/${id}`)).json.epoch, epoch, "a restart keeps the epoch");
    await kill(server);

    writeFileSync(join(data, "journal.jsonl"), backup);
    const marked = spawnSync(process.execPath, [SERVER, "--data", data, "--mark-restored"], { encoding: "utf8" });
    assert.equal(marked.status, 0, marked.stderr);
    const [, before, after] = /epoch (\S+) -> ([0-9a-f]{32})/.exec(marked.stdout) ?? [];
    assert.equal(before, epoch);
    server = await start(data);
    try {
      const got = await call(server.base, "GET", `/v1/tasks/${id}`);
      assert.deepEqual([got.json.version, got.json.epoch], [2, after]);
      const answer = (await call(server.base, "GET", `/v1/tasks/${id}/resume?cursor=4`)).json;
      assert.deepEqual([answer.mode, answer.task.version, answer.epoch], ["snapshot", 2, after]);
      const outcome = mirror.merge(answer);
      assert.deepEqual([outcome.changed, outcome.reason, mirror.version], [true, "epoch-changed", 2]);
      const cb = await callback(server.base, id, { type: "progress", atMs: 50, progress: 60, cursor: "d" }, "cb-5");
      assert.deepEqual([cb.json.version, cb.json.epoch], [3, after]);
    } finally {
      await kill(server);
    }
    const missing = spawnSync(process.execPath, [SERVER, "--data", tempDir(), "--mark-restored"], { encoding: "utf8" });
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /no such journal/);
  });
});

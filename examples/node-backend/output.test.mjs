// Live output (PROTOCOL.md §Live output) where the conformance suite does
// not look: appends are journaled, so a restart after SIGKILL serves the
// very text acknowledged (a superseded attempt's text stays gone, an ended
// task's stream stays closed); the event stream carries `output` messages
// and ends after the terminal version and the complete output; an append
// wakes only the followers of its stream.
//
//   node --test examples/node-backend/

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { SECRET, TOKEN, call, callback, kill, signatureHeaders, sleep, start, tempDir } from "./testing.mjs";

const startOf = (attempt) => ({ type: "start", atMs: Date.now(), attempt, worker: `w${attempt}`, leaseMs: 60_000 });

/** A signed append of `chunk` ({attempt, offset, text}) to `stream`. */
function append(base, taskId, stream, chunk) {
  const body = { taskId, stream, ...chunk };
  return call(base, "POST", `/v1/tasks/${taskId}/output/${stream}`, {
    body,
    token: null,
    headers: signatureHeaders(SECRET, `out_${randomBytes(6).toString("hex")}`, JSON.stringify(body)),
  });
}

async function ok(promise, reason) {
  const r = await promise;
  assert.equal(r.status, 200, JSON.stringify(r.json));
  if (reason) assert.equal(r.json.reason, reason, JSON.stringify(r.json));
  return r.json;
}

/** A task running attempt 1. */
async function running(base) {
  const r = await call(base, "POST", "/v1/tasks", { body: { ttlMs: 3_600_000, maxAttempts: 3 } });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  await ok(callback(base, r.json.id, startOf(1)));
  return r.json.id;
}

const output = async (base, id, attempt = 0, offset = 0) =>
  (await call(base, "GET", `/v1/tasks/${id}/resume?cursor=0&output=draft&outputAttempt=${attempt}&outputOffset=${offset}`)).json.output;

/** The messages of an event stream that ends by itself (5 s at most): [{event, id?, data}]. */
async function sse(base, path) {
  const res = await fetch(base + path, { headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(5000) });
  assert.equal(res.status, 200);
  const text = await res.text();
  return text.split("\n\n").filter((m) => m.startsWith("event:")).map((m) => {
    const fields = Object.fromEntries(m.split("\n").map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 2)]));
    return { event: fields.event, id: fields.id, data: JSON.parse(fields.data) };
  });
}

describe("live output", () => {
  test("appends survive a crash: the text acknowledged, the newer attempt's only, closed once the task ended", async () => {
    const dir = tempDir();
    let server = await start(dir);
    const id = await running(server.base);
    const done = await running(server.base);
    await ok(append(server.base, id, "draft", { attempt: 1, offset: 0, text: "Old draft" }), "appended");
    await ok(callback(server.base, id, { type: "fail", atMs: Date.now(), attempt: 1, error: "boom", retryable: true }));
    await ok(callback(server.base, id, startOf(2)));
    await ok(append(server.base, id, "draft", { attempt: 2, offset: 0, text: "naïve 😀" }), "appended");
    await ok(append(server.base, id, "draft", { attempt: 2, offset: 6, text: "😀 café" }), "appended");
    await ok(append(server.base, id, "log", { attempt: 2, offset: 0, text: "step 1\n" }), "appended");
    await ok(append(server.base, done, "draft", { attempt: 1, offset: 0, text: "Done." }), "appended");
    await ok(callback(server.base, done, { type: "succeed", atMs: Date.now(), attempt: 1, resultRef: "blob://r", resultHash: "sha256:r" }));
    const version = (await call(server.base, "GET", `/v1/tasks/${id}`)).json.version;
    const before = [await output(server.base, id), await output(server.base, done)];
    assert.deepEqual(before[0], { stream: "draft", attempt: 2, offset: 0, text: "naïve 😀 café", complete: false });

    await kill(server);
    server = await start(dir);
    assert.deepEqual([await output(server.base, id), await output(server.base, done)], before, "the output after a restart");
    assert.equal((await call(server.base, "GET", `/v1/tasks/${id}`)).json.version, version, "appends made no version");
    // The judgement goes on from the replayed text.
    await ok(append(server.base, id, "draft", { attempt: 2, offset: 8, text: " café" }), "duplicate-chunk");
    assert.equal((await append(server.base, id, "draft", { attempt: 1, offset: 9, text: "!" })).json.error.code, "stale-attempt");
    assert.equal((await append(server.base, done, "draft", { attempt: 1, offset: 5, text: "!" })).json.error.code, "output-closed");
    assert.deepEqual(await ok(append(server.base, id, "draft", { attempt: 2, offset: 13, text: "!" }), "appended"),
      { reason: "appended", attempt: 2, offset: 13, expected: 14, superseded: false });
    await kill(server);

    // Only the appends that changed a stream are records (a duplicate or a refusal is not).
    const records = readFileSync(join(dir, "journal.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(records.filter((r) => r.op === "output").map((r) => [r.stream, r.attempt, r.offset, r.expected]),
      [["draft", 1, 0, 9], ["draft", 2, 0, 8], ["draft", 2, 6, 13], ["log", 2, 0, 7], ["draft", 1, 0, 5], ["draft", 2, 13, 14]]);
  });

  test("the event stream with output: output messages without an id, ending after the terminal version and the complete output", async () => {
    const server = await start();
    try {
      const id = await running(server.base);
      await ok(append(server.base, id, "draft", { attempt: 1, offset: 0, text: "Hello" }));
      const messages = sse(server.base, `/v1/tasks/${id}/events?output=draft&outputAttempt=1&outputOffset=2`);
      await sleep(200);
      await ok(append(server.base, id, "log", { attempt: 1, offset: 0, text: "not followed" }));
      await ok(append(server.base, id, "draft", { attempt: 1, offset: 5, text: ", world" }));
      await sleep(100);
      await ok(callback(server.base, id, { type: "succeed", atMs: Date.now(), attempt: 1, resultRef: "blob://r", resultHash: "sha256:r" }));
      const got = await messages;
      const outputs = got.filter((m) => m.event === "output");
      assert.ok(outputs.every((m) => m.id === undefined), "output messages carry no id");
      assert.deepEqual(outputs.map((m) => m.data), [
        { stream: "draft", attempt: 1, offset: 2, text: "llo", complete: false },
        { stream: "draft", attempt: 1, offset: 5, text: ", world", complete: false },
        { stream: "draft", attempt: 1, offset: 12, text: "", complete: true },
      ]);
      const last = got.filter((m) => m.event === "resume").at(-1);
      assert.equal(last.data.task.state, "succeeded");
      assert.equal(got.at(-1).event, "output", "the complete output comes last");

      // The terminal version, holding all the text: 204, nothing follows.
      const end = await fetch(`${server.base}/v1/tasks/${id}/events?cursor=${last.data.task.version}&output=draft&outputAttempt=1&outputOffset=12`, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(end.status, 204);
      // Lacking text, the same cursor opens a stream that sends it and ends.
      const rest = await sse(server.base, `/v1/tasks/${id}/events?cursor=${last.data.task.version}&output=draft&outputAttempt=1&outputOffset=7`);
      assert.deepEqual(rest.filter((m) => m.event === "output").map((m) => m.data), [{ stream: "draft", attempt: 1, offset: 7, text: "world", complete: true }]);
    } finally {
      await kill(server);
    }
  });

  test("an append wakes only the long-polls that follow its stream", async () => {
    const server = await start();
    try {
      const id = await running(server.base);
      const version = (await call(server.base, "GET", `/v1/tasks/${id}`)).json.version;
      const timed = (path) => {
        const sent = Date.now();
        return call(server.base, "GET", path).then((r) => ({ ...r, ms: Date.now() - sent }));
      };
      const plain = timed(`/v1/tasks/${id}/resume?cursor=${version}&waitMs=1500`);
      const other = timed(`/v1/tasks/${id}/resume?cursor=${version}&waitMs=1500&output=log&outputAttempt=1`);
      const follower = timed(`/v1/tasks/${id}/resume?cursor=${version}&waitMs=1500&output=draft&outputAttempt=1`);
      await sleep(200);
      await ok(append(server.base, id, "draft", { attempt: 1, offset: 0, text: "Hi" }));
      const [p, o, f] = await Promise.all([plain, other, follower]);
      assert.ok(f.ms < 1000, `the follower of draft answered after ${f.ms} ms`);
      assert.deepEqual(f.json.output, { stream: "draft", attempt: 1, offset: 0, text: "Hi", complete: false });
      assert.ok(p.ms >= 1400 && o.ms >= 1400, `the others were held to their waitMs (${p.ms}, ${o.ms} ms)`);
      assert.equal(p.json.output, undefined, "no output without asking");
      assert.deepEqual(o.json.output, { stream: "log", attempt: 1, offset: 0, text: "", complete: false });
      // A bad output parameter is a 400 naming it.
      const bad = await call(server.base, "GET", `/v1/tasks/${id}/resume?cursor=0&output=Draft!`);
      assert.equal(bad.status, 400);
      assert.match(bad.json.error.message, /^output: /);
    } finally {
      await kill(server);
    }
  });
});

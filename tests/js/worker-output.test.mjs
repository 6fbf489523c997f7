// taskwire/worker's live output (PROTOCOL.md §Live output) against the
// real reference server: what a job writes reaches a follower of
// `resume?output=…` exactly, in chunks within the limits; an append whose
// answer was lost is resent as the same request and adds nothing twice;
// a stream closed by the task's end stops the job's signal; a refusal no
// resend fixes is an `OutputError` naming the server's code.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "./server.mjs";
import { createTask, deferred, kind, startWorker, waitForTask, within } from "./worker-helpers.mjs";
import { CancelledError, FatalError, OutputError } from "../../js/worker.js";
import { Job } from "../../js/worker/job.js";
import { cutAt } from "../../js/worker/output.js";

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

/**
 * Follows `stream` of task `id` by long-poll as a page would, until the
 * server says it is complete: appends what it is sent when it is the
 * attempt it holds (checking the offset is where its text ends), replaces
 * its text when a newer attempt's comes. Returns the text and the
 * attempt it belongs to.
 */
async function follow(id, stream) {
  let cursor = 0, attempt = 0, text = "";
  for (let i = 0; i < 200; i++) {
    const url = `${server.baseUrl}/v1/tasks/${id}/resume?cursor=${cursor}&waitMs=5000&output=${stream}&outputAttempt=${attempt}&outputOffset=${text.length}`;
    const r = await fetch(url, { headers: server.headers });
    assert.equal(r.status, 200, await r.clone().text());
    const answer = await r.json();
    cursor = answer.task.version;
    const out = answer.output;
    assert.equal(out.stream, stream);
    if (out.attempt === attempt) {
      assert.equal(out.offset, text.length, "the server sends from where the follower's text ends");
      text += out.text;
    } else {
      assert.equal(out.offset, 0, "another attempt's text comes whole");
      attempt = out.attempt;
      text = out.text;
    }
    if (out.complete) return { text, attempt };
  }
  throw new Error(`output ${stream} of ${id} never complete; so far ${JSON.stringify(text)}`);
}

/** The real fetch, recording each output append: its webhook-id, body and answer. `hook` may answer instead. */
function recordingFetch(hook = () => undefined) {
  const appends = [];
  async function recording(url, init) {
    if (!String(url).includes("/output/")) return fetch(url, init);
    const entry = { id: init.headers["webhook-id"], body: init.body, chunk: JSON.parse(init.body) };
    appends.push(entry);
    return hook(entry, url, init) ?? fetch(url, init).then(async (res) => ((entry.answer = await res.clone().json()), res));
  }
  return { fetch: recording, appends };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A draft with accents and characters outside the BMP (two UTF-16 units
// each), and one piece long enough to need three requests: its emoji
// straddle the 16,384-unit chunk limit.
const WORDS = "The summary, written word by word: naïve café 😀 done. ".split(/(?<= )/);
const LONG = "x".repeat(16_383) + "😀".repeat(10_000) + " end";

test("several writes reach a follower of resume?output=draft exactly, batched and chunked within the limits", async (t) => {
  const k = kind("draft");
  const rec = recordingFetch();
  let writes = 0;
  startWorker(t, server, {
    [k]: async (job) => {
      const draft = job.output("draft");
      assert.equal(job.output("draft"), draft, "the same name gives the same writer");
      for (const word of WORDS) {
        await draft.write(word);
        writes++;
        await sleep(5);
      }
      await draft.flush(); // so that LONG starts a chunk: its cuts fall where the test says
      await draft.write(LONG);
      writes++;
      await draft.write("Fin.");
      writes++;
      // No flush: the last words go before the succeed.
      return { resultRef: "mem://draft", resultHash: "sha256:d" };
    },
  }, { fetch: rec.fetch });
  const created = await createTask(server, { kind: k });
  const { text, attempt } = await within(follow(created.id, "draft"), "the follower");
  const expected = WORDS.join("") + LONG + "Fin.";
  assert.equal(text.length, expected.length);
  assert.ok(text === expected, "the follower's text is the job's, unit for unit");
  assert.equal(attempt, 1);
  assert.equal((await server.task(created.id)).state, "succeeded");

  // Batched: fewer requests than writes. Chunked: within the limit,
  // contiguous, never half a surrogate pair, each appended once.
  assert.ok(rec.appends.length < writes, `${rec.appends.length} appends for ${writes} writes`);
  let offset = 0;
  for (const { chunk, answer } of rec.appends) {
    assert.equal(chunk.taskId, created.id);
    assert.equal(chunk.stream, "draft");
    assert.equal(chunk.attempt, 1);
    assert.equal(chunk.offset, offset);
    assert.ok(chunk.text.length >= 1 && chunk.text.length <= 16_384, `a chunk of ${chunk.text.length} units`);
    assert.ok(!/[\ud800-\udbff]$/.test(chunk.text), "no chunk ends inside a surrogate pair");
    assert.equal(answer.reason, "appended");
    offset += chunk.text.length;
  }
  assert.equal(offset, expected.length);
  assert.ok(rec.appends.some((a) => a.chunk.text.length === 16_383), "the cut before an emoji at the limit keeps it whole");
});

test("an append whose answer was lost is sent again as the same request; the text is not duplicated", async (t) => {
  const k = kind("draft-lost");
  let lost = false, refused = false;
  // The first append reaches the server and its answer is lost (a reset
  // after sending); the next one is answered 503 without reaching it.
  const rec = recordingFetch((entry, url, init) => {
    if (!lost) {
      lost = true;
      return fetch(url, init).then(async (res) => {
        entry.answer = await res.json();
        throw new TypeError("fetch failed", { cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) });
      });
    }
    if (!refused) {
      refused = true;
      entry.answer = "503 (never reached the server)";
      return Promise.resolve(new Response(JSON.stringify({ error: { code: "overloaded", message: "later" } }), { status: 503, headers: { "retry-after": "0" } }));
    }
  });
  const acknowledged = deferred();
  startWorker(t, server, {
    [k]: async (job) => {
      const draft = job.output("draft");
      await draft.write("Hello, ");
      await draft.flush();
      acknowledged.resolve(draft.acknowledged);
      await draft.write("world.");
      return { resultRef: "mem://hello", resultHash: "sha256:h" };
    },
  }, { fetch: rec.fetch });
  const created = await createTask(server, { kind: k });
  const { text } = await within(follow(created.id, "draft"), "the follower");
  assert.equal(text, "Hello, world.");
  assert.equal(await acknowledged.promise, "Hello, ".length);

  const [first, second, third, fourth] = rec.appends;
  assert.equal(rec.appends.length, 4, JSON.stringify(rec.appends.map((a) => a.answer)));
  assert.equal(first.answer.reason, "appended", "the first try landed; only its answer was lost");
  for (const again of [second, third]) {
    assert.equal(again.id, first.id, "the same webhook-id");
    assert.equal(again.body, first.body, "the same bytes");
  }
  assert.equal(third.answer.reason, "duplicate-chunk", "the resend is recognised, nothing appended twice");
  assert.equal(fourth.chunk.offset, "Hello, ".length);
  assert.notEqual(fourth.id, first.id, "a new chunk, a new id");
  assert.equal(fourth.answer.reason, "appended");
});

test("a write after the task ended is refused output-closed: the stream ends and the signal fires stop", async (t) => {
  const k = kind("draft-closed");
  const rec = recordingFetch();
  const ended = deferred();
  // leaseMs 30,000: no heartbeat (every 10 s) learns of the end before
  // the append does.
  startWorker(t, server, {
    [k]: async (job) => {
      const draft = job.output("draft");
      await draft.write("Before the deadline.");
      await draft.flush();
      await waitForTask(server, job.id, (x) => x.state === "timed_out", "timed_out");
      const abortedBefore = job.signal.aborted;
      await draft.write(" Zombie.");
      const err = await draft.flush().then(() => undefined, (e) => e);
      const again = await draft.write("more").then(() => undefined, (e) => e);
      ended.resolve({ err, again, abortedBefore, why: job.signal.reason?.code });
      throw err;
    },
  }, { leaseMs: 30_000, fetch: rec.fetch });
  const created = await createTask(server, { kind: k, deadlineMs: 1500 });
  const { err, again, abortedBefore, why } = await within(ended.promise, "the fenced write");
  assert.equal(abortedBefore, false, "nothing told the job of the end before the append");
  assert.ok(err instanceof CancelledError, `a cancellation, got ${err}`);
  assert.equal(err.code, "stop");
  assert.equal(why, "stop", "the job's signal fired");
  assert.equal(again, err, "every later write throws what ended the stream");
  assert.deepEqual(rec.appends.map((a) => a.answer.reason ?? a.answer.error?.code), ["appended", "output-closed"]);
  assert.deepEqual(await follow(created.id, "draft"), { text: "Before the deadline.", attempt: 1 });
});

test("a refusal no resend fixes (output-gap) is an OutputError naming the server's code; the task fails final", async (t) => {
  const k = kind("draft-gap");
  // The first append never reaches the server but is answered as
  // delivered, so the second starts past the end of the server's text.
  const rec = recordingFetch((entry) => {
    if (entry.chunk.offset !== 0) return undefined;
    entry.answer = "faked: appended";
    return Promise.resolve(new Response(JSON.stringify({ reason: "appended", attempt: 1, offset: 0, expected: entry.chunk.text.length, superseded: false }), { status: 200 }));
  });
  const seen = deferred();
  startWorker(t, server, {
    [k]: async (job) => {
      const draft = job.output("draft");
      await draft.write("lost ");
      await draft.flush();
      await draft.write("then this");
      try {
        await draft.flush();
      } catch (e) {
        seen.resolve(e);
        throw e;
      }
    },
  }, { fetch: rec.fetch });
  const created = await createTask(server, { kind: k });
  const err = await within(seen.promise, "the refusal");
  assert.ok(err instanceof OutputError && err instanceof FatalError, `an OutputError, got ${err}`);
  assert.equal(err.code, "output-gap");
  assert.equal(err.stream, "draft");
  assert.equal(err.status, 409);
  const failed = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.equal(failed.attempts, 1, "final: no other attempt");
  assert.match(failed.error, /^OutputError: output draft of \S+: HTTP 409 output-gap: /);
});

test("a stream's name and a write's text are checked, the error naming the field; a cut keeps pairs whole", () => {
  const job = new Job({ id: "tsk_1", attempts: 1, lease: { leaseMs: 30_000 } }, { wire: { clock: { offsetMs: 0, local: Date.now } }, warn() {} });
  for (const bad of ["Draft", "", "a".repeat(65), "dr aft", "draft/x", 7, undefined]) {
    assert.throws(() => job.output(bad), (e) => e instanceof TypeError && /^job\.output: stream: /.test(e.message), String(bad));
  }
  assert.equal(job.output("log_2-x").name, "log_2-x");
  return assert.rejects(job.output("draft").write(42), (e) => e instanceof TypeError && /^output\.write: text: /.test(e.message)).then(() => {
    assert.equal(cutAt("abc", 10), 3);
    assert.equal(cutAt("abcd", 2), 2);
    assert.equal(cutAt("a😀b", 2), 1);
    assert.equal(cutAt("a😀b", 3), 3);
  });
});

// examples/workers/node/summary-worker.mjs, run as a user runs it (a
// process importing `taskwire/worker` from the built package) against
// the real server: eight steps to a result; with approval asked, a hold,
// a request for changes, a second hold and an approval.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "./server.mjs";
import { act, createTask, history, waitForTask } from "./worker-helpers.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
let server, child, output = "";

before(async () => {
  if (!existsSync(join(root, "dist/worker.js"))) throw new Error("dist/worker.js is missing: run npm run build");
  server = await startServer();
  child = spawn(process.execPath, [join(root, "examples/workers/node/summary-worker.mjs")], {
    env: { ...process.env, TASKWIRE_URL: server.baseUrl, TASKWIRE_TENANT: "tenant", TASKWIRE_SECRET: server.secret },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
});
after(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  }
  await server?.stop();
});

const doc = "Taskwire follows long tasks. It survives disconnects. It resumes exactly. It never shows a stop that did not happen.";

test("the summary worker runs the eight steps to a result", async () => {
  const created = await createTask(server, { kind: "summary", input: { doc, stepMs: 10 } });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded" || x.state === "failed", "an end");
  assert.equal(done.state, "succeeded", output);
  assert.equal(done.resultRef, `mem://summary/${created.id}`);
  // Versions: the start, eight progress reports, the success. The
  // resume window holds the last eight: ask from the third step on.
  assert.equal(done.version, 10);
  const cursors = (await history(server, created.id, 3)).filter((e) => e.type === "progress").map((e) => e.cursor);
  assert.deepEqual(cursors, ["extract_facts", "summarise_sections", "merge_summary", "check_length", "request_approval", "publish"]);
});

test("with approval: hold, request changes, hold again, approve, publish", async () => {
  const created = await createTask(server, { kind: "summary", input: { doc, approval: true, stepMs: 10 } });
  const first = await waitForTask(server, created.id, (x) => x.state === "waiting_approval", "the first hold");
  await act(server, created.id, "decisions", { decision: "request_changes", artifactHash: first.artifactHash, version: first.version, reason: "shorter" });
  const second = await waitForTask(server, created.id, (x) => x.state === "waiting_approval" && x.version > first.version, "the second hold");
  assert.notEqual(second.artifactHash, first.artifactHash, "the revised draft is another artifact");
  assert.match(second.question, /^Publish this summary\? "Taskwire follows long tasks\."$/);
  await act(server, created.id, "decisions", { decision: "approve", artifactHash: second.artifactHash, version: second.version });
  const done = await waitForTask(server, created.id, (x) => x.state === "succeeded", "succeeded");
  assert.equal(done.resultHash, second.artifactHash, "the approved draft is the one published");
});

test("bad input fails the task at once, naming the field", async () => {
  const created = await createTask(server, { kind: "summary", input: { doc: "" } });
  const failed = await waitForTask(server, created.id, (x) => x.state === "failed", "failed");
  assert.equal(failed.attempts, 1);
  assert.equal(failed.error, "FatalError: input.doc: must be a non-blank string");
});

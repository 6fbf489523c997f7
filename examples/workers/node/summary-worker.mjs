// A worker for tasks of kind "summary": eight steps that summarise a
// document, with progress after each, cancel honoured before and after
// each step, and a person's approval before publishing when the input
// asks for one.
//
//   TASKWIRE_URL=http://127.0.0.1:8080 TASKWIRE_TENANT=demo \
//   TASKWIRE_SECRET=whsec_… node examples/workers/node/summary-worker.mjs
//
// Input: {"doc": "…", "approval": true?, "stepMs": 300?}. Ctrl-C stops
// claiming, lets running jobs finish for 10 s, then hands them back.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { FatalError, createWorker } from "taskwire/worker";

const STEPS = [
  "load_document",
  "split_sections",
  "extract_facts",
  "summarise_sections",
  "merge_summary",
  "check_length",
  "request_approval",
  "publish",
];
const APPROVAL = STEPS.indexOf("request_approval");

for (const name of ["TASKWIRE_URL", "TASKWIRE_TENANT", "TASKWIRE_SECRET"]) {
  if (!process.env[name]) {
    console.error(`summary-worker: ${name} is not set (see the comment at the top of this file)`);
    process.exit(2);
  }
}

const worker = createWorker({
  url: process.env.TASKWIRE_URL,
  tenant: process.env.TASKWIRE_TENANT,
  secret: process.env.TASKWIRE_SECRET,
  concurrency: 4,
});

/** The draft is a pure function of the input (and of a person's request for changes), so any attempt rebuilds the same one. */
function draftOf(doc, shorter) {
  const sentences = doc.split(/(?<=[.!?])\s+/).filter(Boolean);
  return sentences.slice(0, shorter ? 1 : 3).join(" ");
}

const sha256 = (text) => "sha256:" + createHash("sha256").update(text).digest("hex");

worker.handle("summary", async (job) => {
  const { doc, approval = false, stepMs = 300 } = job.input ?? {};
  // Bad input fails at once: another attempt would fail the same way.
  if (typeof doc !== "string" || doc.trim() === "") throw new FatalError("input.doc: must be a non-blank string");
  if (!Number.isFinite(stepMs) || stepMs < 0) throw new FatalError("input.stepMs: must be a number ≥ 0");
  const { decision, decisionReason } = job.task;
  const draft = draftOf(doc, decision === "request_changes");
  // Once approved, what is published is the artifact the person saw
  // (named by its hash), not a draft written again.
  const draftHash = decision === "approve" ? job.task.artifactHash : sha256(draft);
  console.log(`${job.id}: attempt ${job.attempt}${decision ? `, decision ${decision}${decisionReason ? ` (${decisionReason})` : ""}` : ""}`);

  // After a decision the work goes on from the artifact: publish it once
  // approved, or write the draft again (shorter) and ask again.
  const first = decision === "approve" ? APPROVAL + 1 : decision === "request_changes" ? STEPS.indexOf("merge_summary") : 0;
  for (let i = first; i < STEPS.length; i++) {
    const step = STEPS[i];
    if (step === "request_approval" && approval && decision !== "approve") {
      await job.hold(`mem://summary/${job.id}/draft`, draftHash, `Publish this summary? "${draft}"`);
      console.log(`${job.id}: waiting for a person`);
      return;
    }
    job.checkpoint();
    // A tool call: the signal aborts it when the task is cancelled.
    await sleep(stepMs, undefined, { signal: job.signal });
    if (step === "publish") console.log(`${job.id}: publishing ${draftHash} under idempotency key ${job.key("publish", "post")}`);
    job.checkpoint();
    await job.progress(Math.round(((i + 1) * 100) / STEPS.length), step);
  }
  return { resultRef: `mem://summary/${job.id}`, resultHash: draftHash };
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => {
    console.log("summary-worker: shutting down (10 s for running jobs)");
    worker.shutdown(10_000);
  });
}

console.log(`summary-worker ${worker.name}: claiming "summary" tasks from ${process.env.TASKWIRE_URL}`);
await worker.run();
console.log("summary-worker: stopped");

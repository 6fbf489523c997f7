// Steps with checkpoints (PROTOCOL.md §Steps): `job.step(name, run)` runs
// one step of the task's plan at most once across attempts. A step an
// earlier attempt finished is not run again: its checkpoint (where its
// output is, and the output's hash) comes from the claimed task, so a new
// attempt after a lapse, a retry or an approval starts at the first step
// not yet finished. The rules (what a report does, that a finished step
// never moves) are the server's; this only reports them, through the
// job's own report path (`send`), and reads whether each report was taken
// (PROTOCOL.md §Steps; core's `work::report_taken`): a step report about a
// step the plan does not have is still answered `next: "continue"`, and a
// worker that read only `next` would run the step and believe it recorded.
import { FatalError, StepError } from "./errors.js";
import { describe, taken } from "./wire.js";

const FINAL = new Set(["succeeded", "skipped"]);

function stepName(name, what) {
  if (typeof name !== "string" || name.trim() === "") throw new TypeError(`${what}: step: must be a non-blank string, got ${describe(name)}`);
  return name;
}

/** The claimed task's record of step `name`, if its plan has one. */
function record(task, name) {
  return Array.isArray(task.steps) ? task.steps.find((s) => s?.name === name) : undefined;
}

/**
 * `{outputRef, outputHash}` of step `name` when it is finished with a
 * checkpoint: by this attempt (`done`, the steps it recorded) or, as the
 * claimed task says, by an earlier one. Undefined otherwise.
 */
export function checkpointOf(task, done, name) {
  stepName(name, "job.stepCheckpoint");
  if (done.has(name)) return { ...done.get(name) };
  const s = record(task, name);
  if (s?.status !== "succeeded" || typeof s.outputRef !== "string" || typeof s.outputHash !== "string") return undefined;
  return { outputRef: s.outputRef, outputHash: s.outputHash };
}

/** True when step `name` is finished (succeeded or skipped): `job.step` will not run it. */
export function isStepDone(task, done, name) {
  stepName(name, "job.stepDone");
  return done.has(name) || FINAL.has(record(task, name)?.status);
}

/** A non-negative safe integer, or a TypeError naming `usage.<field>`. */
function count(usage, field) {
  const v = usage[field];
  if (!Number.isSafeInteger(v) || v < 0) throw new TypeError(`job.step: usage.${field}: must be an integer ≥ 0, got ${describe(v)}`);
  return v;
}

/** `run()`'s answer as the `succeeded` report's fields; a FatalError naming the field otherwise. */
function output(value) {
  if (value === null || typeof value !== "object") throw new FatalError(`job.step: the step's output: must be an object {outputRef, outputHash, usage?}, got ${describe(value)}`);
  for (const f of ["outputRef", "outputHash"]) {
    if (typeof value[f] !== "string" || value[f].trim() === "") throw new FatalError(`job.step: ${f}: must be a non-blank string, got ${describe(value[f])}`);
  }
  const fields = { outputRef: value.outputRef, outputHash: value.outputHash };
  if (value.usage !== undefined) {
    if (value.usage === null || typeof value.usage !== "object") throw new FatalError(`job.step: usage: must be an object {tokens, costCents, toolCalls}, got ${describe(value.usage)}`);
    try {
      fields.usage = { tokens: count(value.usage, "tokens"), costCents: count(value.usage, "costCents"), toolCalls: count(value.usage, "toolCalls") };
    } catch (e) {
      throw new FatalError(e.message);
    }
  }
  return fields;
}

/**
 * Runs step `name` of the task's plan (see `Job.step` in worker.d.ts).
 * `job` gives `task`, `check()` (the signal check) and `done` (the
 * steps this attempt recorded); `send(event)` is the job's report path,
 * answering the server's `{next, reason, …}` (its `next` has already
 * fired the signal when it said to stop).
 */
export async function runStep(job, done, send, name, run, { label } = {}) {
  stepName(name, "job.step");
  if (typeof run !== "function") throw new TypeError(`job.step: run: must be an async function returning {outputRef, outputHash, usage?}, got ${describe(run)}`);
  if (label !== undefined && typeof label !== "string") throw new TypeError(`job.step: options.label: must be a string, got ${describe(label)}`);
  if (isStepDone(job.task, done, name)) return checkpointOf(job.task, done, name);
  const report = async (fields) => {
    const answer = await send({ type: "step", name, ...fields });
    // The attempt first: a report fenced off (`stale-attempt`, `next:
    // "stop"`) is the job's stop, not the step's refusal.
    job.check();
    if (!taken(answer)) {
      throw new StepError(answer.reason, name, `job.step: step ${describe(name)} (${fields.status}) refused: ${answer.reason}`);
    }
  };
  job.check();
  // Renews the lease, and asks the server whether the step is the plan's
  // before any of its work is done.
  await report(label === undefined ? { status: "running" } : { status: "running", label });
  let fields;
  try {
    fields = output(await run());
  } catch (e) {
    // Best effort: the attempt's own end (its `fail`) follows, and the
    // handler is told the step's error, not this report's.
    await send({ type: "step", name, status: "failed" }).catch(() => {});
    throw e;
  }
  await report({ status: "succeeded", ...fields });
  const checkpoint = { outputRef: fields.outputRef, outputHash: fields.outputHash };
  done.set(name, checkpoint);
  return { ...checkpoint };
}

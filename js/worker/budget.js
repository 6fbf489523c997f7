// Budgets and side effects (PROTOCOL.md §Budgets and side effects; seed
// 001 §5, §8): `job.spend` reserves before a paid call and settles after
// it, `job.effect` makes an external write under its idempotency key and
// records it once, and `budgetExhausted` ends a job whose budget ran out
// with what it has. The rules (whether a reservation fits, which record
// of a key wins) are core's, judged by the server; this only reports them
// through the job's own report path and reads each answer's `changed`,
// `duplicate`, `reason` and `resourceId`. The Rust worker's `Job::spend`,
// `Job::effect` and `Done::budget_exhausted` do the same, step for step.
import { FatalError, OverBudget } from "./errors.js";
import { describe, taken } from "./wire.js";

/** A non-negative safe integer at `obj[field]` (absent is 0), or a TypeError naming `where.field`. */
function counter(obj, field, where) {
  const v = obj[field] ?? 0;
  if (!Number.isSafeInteger(v) || v < 0) throw new TypeError(`${where}.${field}: must be an integer ≥ 0, got ${describe(v)}`);
  return v;
}

function nonBlank(value, where) {
  if (typeof value !== "string" || value.trim() === "") throw new TypeError(`${where}: must be a non-blank string, got ${describe(value)}`);
  return value;
}

/** `call()`'s answer, `{value, usage}`, with its usage as the settle's fields; a FatalError naming the field otherwise. */
function spent(ran) {
  if (ran === null || typeof ran !== "object" || !Object.hasOwn(ran, "value")) {
    throw new FatalError(`job.spend: the call's answer: must be an object {value, usage}, got ${describe(ran)}`);
  }
  const usage = ran.usage;
  if (usage === null || typeof usage !== "object") throw new FatalError(`job.spend: usage: must be an object {tokens, costCents, toolCalls}, got ${describe(usage)}`);
  try {
    return { tokens: counter(usage, "tokens", "job.spend: usage"), costCents: counter(usage, "costCents", "job.spend: usage"), toolCalls: counter(usage, "toolCalls", "job.spend: usage") };
  } catch (e) {
    throw new FatalError(e.message);
  }
}

/**
 * `job.spend` (see Job.spend in worker.d.ts). `job` gives `attempt`,
 * `check()` (the signal check); `send(event)` is the job's report path.
 */
export async function spend(job, send, name, estimate, call, { step } = {}) {
  nonBlank(name, "job.spend: name");
  if (estimate === null || typeof estimate !== "object") throw new TypeError(`job.spend: estimate: must be an object {tokens?, costCents?}, got ${describe(estimate)}`);
  const amount = { tokens: counter(estimate, "tokens", "job.spend: estimate"), costCents: counter(estimate, "costCents", "job.spend: estimate") };
  if (typeof call !== "function") throw new TypeError(`job.spend: call: must be an async function returning {value, usage}, got ${describe(call)}`);
  if (step !== undefined) nonBlank(step, "job.spend: options.step");
  // Per attempt: a resent reserve is the same reservation (a duplicate),
  // and a new attempt reserves afresh while the old one's open
  // reservations are charged in full by the server.
  const reservation = `${job.attempt}:${name}`;
  job.check();
  const answer = await send({ type: "reserve", reservation, ...(step === undefined ? {} : { step }), ...amount });
  if (!taken(answer)) throw new OverBudget(reservation, answer.reason);
  job.check();
  let ran;
  let usage;
  let failure;
  try {
    ran = await call();
    usage = spent(ran);
  } catch (e) {
    // A call that failed used nothing it can report: the whole
    // reservation is released, and the call's error is what the handler sees.
    failure = { error: e };
    usage = { tokens: 0, costCents: 0, toolCalls: 0 };
  }
  let settled;
  try {
    await send({ type: "settle", reservation, ...usage });
  } catch (e) {
    settled = { error: e };
  }
  if (failure !== undefined) throw failure.error;
  if (settled !== undefined) throw settled.error;
  return ran.value;
}

/** The resource id the claimed task records under `(step, action)`, if any. */
export function recordedEffect(task, step, action) {
  const found = Array.isArray(task.effects) ? task.effects.find((e) => e?.step === step && e?.action === action) : undefined;
  return typeof found?.resourceId === "string" ? found.resourceId : undefined;
}

/** `job.effect` (see Job.effect in worker.d.ts). */
export async function effect(job, send, step, action, write) {
  const known = recordedEffect(job.task, step, action);
  if (known !== undefined) return known;
  // The same key in every attempt; job.key names a blank step or action.
  const key = job.key(step, action);
  if (typeof write !== "function") throw new TypeError(`job.effect: write: must be an async function (key) => resourceId, got ${describe(write)}`);
  job.check();
  const resourceId = nonBlank(await write(key), "job.effect: the write's resourceId");
  const answer = await send({ type: "effect", step, action, resourceId });
  if (!taken(answer)) {
    throw new FatalError(`job.effect: side effect ${step}/${action} (${resourceId}) not recorded: ${answer.reason}`);
  }
  // The first write's id: a write made again after a crash between the
  // write and its record is answered with the id recorded first.
  return typeof answer.resourceId === "string" ? answer.resourceId : resourceId;
}

/** How a job ends when its budget ran out (made by `budgetExhausted`). */
export class Exhausted {
  constructor(partial) {
    this.partial = partial;
    Object.freeze(this);
  }
}

/**
 * What a handler returns when its budget ran out: the task ends `failed`
 * with the error `budget-exhausted`, keeping `partial` (`{resultRef,
 * resultHash}`, both or none) as its result so the work done is not lost.
 * Reported as `exhaust`, the attempt's last report.
 */
export function budgetExhausted(partial) {
  if (partial === undefined || partial === null) return new Exhausted(undefined);
  if (typeof partial !== "object") throw new TypeError(`budgetExhausted: partial: must be an object {resultRef, resultHash}, got ${describe(partial)}`);
  const resultRef = nonBlank(partial.resultRef, "budgetExhausted: partial.resultRef");
  const resultHash = nonBlank(partial.resultHash, "budgetExhausted: partial.resultHash");
  return new Exhausted({ resultRef, resultHash });
}

/** The attempt's last report for an `Exhausted` ending. */
export function exhaustEvent(ending) {
  return { type: "exhaust", ...(ending.partial ?? {}) };
}

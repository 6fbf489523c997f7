// Seed 004's vendor pattern for one step of a job: submit once under an
// idempotency key, then poll with bounded backoff. The loop, the backoff
// and the "unknown outcome" rule live here, so a handler only says how
// to submit, poll and (optionally) look a submission up.
import { FatalError, RetryableError, SubmitUnknownError, classifyError, errorText, isNetworkError, statusOf } from "./errors.js";
import { describe, sleep } from "./wire.js";

// Codes of a connection that never carried the request: the vendor
// cannot have received it, so the outcome is known (not submitted).
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ERR_INVALID_URL"]);

/**
 * Whether a submit that threw may still have been received: true for a
 * network error after connecting, a timeout, or an HTTP 5xx; false for a
 * refusal (4xx), a connection that never opened, or an error thrown
 * before anything was sent. An error may say so itself with
 * `outcomeUnknown: true | false`.
 */
export function isOutcomeUnknown(err) {
  if (typeof err?.outcomeUnknown === "boolean") return err.outcomeUnknown;
  const status = statusOf(err);
  if (status !== undefined) return status >= 500;
  for (let e = err, depth = 0; e && depth < 8; e = e.cause, depth++) {
    if (typeof e.code === "string" && NEVER_SENT.has(e.code)) return false;
  }
  if (isNetworkError(err)) return true;
  return err?.name === "TimeoutError" || err?.name === "AbortError";
}

function fn(options, name, required) {
  const f = options?.[name];
  if (f === undefined && !required) return undefined;
  if (typeof f !== "function") throw new TypeError(`job.vendor: ${name}: must be a function, got ${describe(f)}`);
  return f;
}

function positive(options, name, fallback) {
  const v = options?.[name] ?? fallback;
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) throw new TypeError(`job.vendor: ${name}: must be a finite number > 0, got ${describe(v)}`);
  return v;
}

/** At most this many submits, each after a lookup found nothing under the key. */
const MAX_SUBMITS = 3;

/**
 * Submits once, then polls until the vendor is done. See `Job.vendor`
 * in worker.d.ts for the options. Resolves to the `value` of the first
 * `{done: true, value}` poll.
 */
export async function submitOnceThenPoll(job, options, clock) {
  if (typeof options?.step !== "string" || options.step.trim() === "") {
    throw new TypeError(`job.vendor: step: must be a non-blank string, got ${describe(options?.step)}`);
  }
  const { step } = options;
  const submit = fn(options, "submit", true);
  const poll = fn(options, "poll", true);
  const lookup = fn(options, "lookup", false);
  const timeoutMs = positive(options, "timeoutMs");
  const firstDelayMs = positive(options, "firstDelayMs", 1000);
  const maxDelayMs = positive(options, "maxDelayMs", 30_000);
  const maxPollErrors = positive(options, "maxPollErrors", 5);
  const key = job.key(step, "submit");
  const signal = job.signal;
  // A throw after the signal fired is the signal's doing, whatever it says.
  const rethrow = (e) => {
    if (signal.aborted) throw signal.reason;
    throw e;
  };

  let handle;
  for (let submits = 1; handle === undefined; submits++) {
    job.checkpoint();
    try {
      handle = await submit(key, signal);
      if (handle === undefined || handle === null) throw new TypeError(`job.vendor: submit: must return the vendor's handle, got ${describe(handle)}`);
      break;
    } catch (e) {
      if (signal.aborted || !isOutcomeUnknown(e)) rethrow(e);
      if (!lookup) {
        throw new SubmitUnknownError(
          `vendor step ${step}: the outcome of the submit under key ${key} is unknown (${errorText(e)}); ` +
            `it is not sent again, since the vendor may have created the work: check the vendor for this key, or give job.vendor a lookup(key)`,
          key,
          { cause: e },
        );
      }
    }
    job.checkpoint();
    const found = await lookup(key, signal).catch(rethrow);
    if (found !== undefined && found !== null) {
      handle = found;
      break;
    }
    // The vendor has nothing under the key: the submit never reached it,
    // so sending it again is no blind repeat.
    if (submits >= MAX_SUBMITS) throw new RetryableError(`vendor step ${step}: ${submits} submits under key ${key} reached nothing the vendor knows`);
  }

  // The task's deadline is on the server's clock; the polls wait on this one.
  const taskDeadline = Number.isFinite(job.task.deadlineAtMs) ? job.task.deadlineAtMs - clock.offsetMs : Infinity;
  const deadline = Math.min(taskDeadline, timeoutMs === undefined ? Infinity : clock.local() + timeoutMs);
  let delay = firstDelayMs;
  let errors = 0;
  for (;;) {
    job.checkpoint();
    let answer;
    try {
      answer = await poll(handle, signal);
      errors = 0;
      if (answer?.done === true) return answer.value;
      if (answer?.done !== false) throw new TypeError(`job.vendor: poll: must return {done: true, value} or {done: false}, got ${describe(answer)}`);
    } catch (e) {
      if (signal.aborted || classifyError(e) !== "retryable" || ++errors >= maxPollErrors) rethrow(e);
    }
    const wait = delay / 2 + Math.random() * (delay / 2);
    if (clock.local() + wait > deadline) {
      throw new FatalError(`vendor step ${step}: no result before the ${deadline === taskDeadline ? "task's deadline" : "timeout"}; the vendor's work under key ${key} may still be running`);
    }
    await sleep(wait, signal);
    delay = Math.min(delay * 2, maxDelayMs);
  }
}

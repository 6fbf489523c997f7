// The errors of `taskwire/worker`, and the one table that decides whether
// a handler's failure is worth another attempt. Every error is a real
// `Error` with a stable `code`, so callers test `err.code`, never a
// message.

/**
 * Thrown by a handler when the failure is passing (a vendor's 503, a
 * timeout): the task is reported `fail` with `retryable: true` and another
 * attempt runs, while attempts are left.
 */
export class RetryableError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "RetryableError";
    this.code = "retryable";
  }
}

/**
 * Thrown by a handler when another attempt would fail the same way (bad
 * input, a missing credential): the task is reported `fail` with
 * `retryable: false` and ends `failed`.
 */
export class FatalError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "FatalError";
    this.code = "fatal";
  }
}

/**
 * A vendor submission whose outcome is unknown (the request left, no
 * answer came back) and that `job.vendor` will not send again blindly:
 * the vendor may have created the work, and a second submit could create
 * it twice or bill twice (seed 004, `SUBMIT_UNKNOWN`). Final: a person or
 * a `lookup(key)` has to find out. `key` is the idempotency key it was
 * submitted under.
 */
export class SubmitUnknownError extends FatalError {
  constructor(message, key, options) {
    super(message, options);
    this.name = "SubmitUnknownError";
    this.code = "submit-unknown";
    this.key = key;
  }
}

/**
 * A step report the server judged and refused (PROTOCOL.md §Steps):
 * `code` is its reason, `unknown-step` (the plan has no such name),
 * `no-plan` (the task has none) or `step-conflict` (the step is finished
 * already: it never moves again, nor takes another checkpoint). Final:
 * every attempt would send the same report and be refused the same way,
 * so a retry only burns attempts. `step` is the name reported.
 */
export class StepError extends FatalError {
  constructor(code, step, message) {
    super(message);
    this.name = "StepError";
    this.code = code;
    this.step = step;
  }
}

/**
 * A reservation the server refused (PROTOCOL.md §Budgets and side
 * effects): the task's budget cannot cover it (`over-budget`), or another
 * `reason` (`not-running` once a cancel was asked, `reservation-conflict`,
 * `unknown-step`, `ledger-full`, `stale-attempt`). `job.spend` did not
 * make the call. `code` and `reason` are the server's reason,
 * `reservation` the reservation's id. Final: the handler may degrade (a
 * smaller context, an optional step skipped) or end the task with what it
 * has (`return budgetExhausted(partial)`); rethrown, another attempt would
 * meet the same budget.
 */
export class OverBudget extends FatalError {
  constructor(reservation, reason) {
    super(`reservation ${JSON.stringify(reservation)} refused: ${reason}`);
    this.name = "OverBudget";
    this.code = reason;
    this.reason = reason;
    this.reservation = reservation;
  }
}

/**
 * A chunk of live output the server refused for a reason no resend
 * changes (PROTOCOL.md §Live output): `code` is the server's
 * (`chunk-conflict`, `output-gap`, `invalid-request`, …), `stream` the
 * stream's name. Final: it means the worker and the server disagree on
 * the stream's text, which another attempt would not fix by itself. (A
 * stream fenced off by a newer attempt or closed by the task's end is no
 * `OutputError`: the job's signal fires `stop`.)
 */
export class OutputError extends FatalError {
  constructor(code, stream, message, status) {
    super(message);
    this.name = "OutputError";
    this.code = code;
    this.stream = stream;
    if (status !== undefined) this.status = status;
  }
}

/** Why a job's signal fired; `CancelledError.code` is one of these. */
const WHY = {
  cancel: "a person cancelled the task",
  stop: "the server said stop: this attempt ended or was replaced",
  "lease-lost": "the server could not be reached before the lease ran out",
  shutdown: "the worker is shutting down",
};

/**
 * The reason of a fired `job.signal` (and what `job.checkpoint()` throws).
 * `code` says why: `cancel` (a person cancelled; the library answers
 * `ack_cancel`), `stop` (the attempt was replaced or ended; nothing more
 * is sent), `lease-lost` (the server stayed unreachable past the lease),
 * `shutdown` (`worker.shutdown()`; the task is handed back retryable).
 * Its name is `AbortError`, the name Node's own APIs give an abort, so
 * code that already tells aborts apart keeps working.
 */
export class CancelledError extends Error {
  constructor(code) {
    if (!Object.hasOwn(WHY, code)) throw new TypeError(`CancelledError: code: must be one of ${Object.keys(WHY).join(", ")}, got ${String(code)}`);
    super(`${code}: ${WHY[code]}`);
    this.name = "AbortError";
    this.code = code;
  }
}

/**
 * A failure of the worker itself rather than of a job: a configuration
 * the server refuses (`unauthorized`, `invalid-request`), an answer that
 * breaks the protocol (`protocol`), a report the server refused
 * (`report-refused`) or could not take before the lease ran out
 * (`lease-lost`). `status` is the HTTP status when there was one.
 */
export class WorkerError extends Error {
  constructor(code, message, status) {
    super(message);
    this.name = "WorkerError";
    this.code = code;
    if (status !== undefined) this.status = status;
  }
}

// Node's and undici's codes for a connection that failed or broke: the
// network, not the request, so another try may pass.
const NETWORK_CODES = new Set([
  "ECONNRESET", "ECONNREFUSED", "ECONNABORTED", "ETIMEDOUT", "EPIPE", "EAI_AGAIN", "ENOTFOUND",
  "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN", "EHOSTDOWN",
  "UND_ERR_SOCKET", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CLOSED",
]);

/** The HTTP status an error carries, in the shapes common clients use. */
export function statusOf(err) {
  for (const s of [err?.status, err?.statusCode, err?.response?.status]) {
    if (Number.isInteger(s) && s >= 100 && s <= 599) return s;
  }
  return undefined;
}

/** True when `err` (or an error in its `cause` chain) is a network failure. */
export function isNetworkError(err) {
  for (let e = err, depth = 0; e && depth < 8; e = e.cause, depth++) {
    if (typeof e.code === "string" && NETWORK_CODES.has(e.code)) return true;
    // undici's fetch wraps every network failure in this one TypeError.
    if (e instanceof TypeError && e.message === "fetch failed") return true;
  }
  return false;
}

/**
 * `"retryable"` or `"final"`: what a handler's error becomes. The table,
 * first match wins:
 *
 * | error | class |
 * |---|---|
 * | `RetryableError` | retryable |
 * | `FatalError` | final |
 * | a network error (`ECONNRESET`, `ETIMEDOUT`, `fetch failed`, …, in the `cause` chain too) | retryable |
 * | a timeout (`TimeoutError`, `AbortError` not from the job's signal) | retryable |
 * | an HTTP status (`status`, `statusCode`, `response.status`) 408, 429 or 5xx | retryable |
 * | any other HTTP status (400, 401, 403, 404, 422, …) | final |
 * | anything else: a `TypeError`, a validation error, a thrown non-Error | final |
 *
 * Final is the default because a retry of a bug burns attempts and money
 * for the same failure (seed 001 §7: only passing failures are retried).
 */
export function classifyError(err) {
  if (err instanceof RetryableError) return "retryable";
  if (err instanceof FatalError) return "final";
  if (isNetworkError(err)) return "retryable";
  if (err?.name === "TimeoutError" || err?.name === "AbortError") return "retryable";
  const status = statusOf(err);
  if (status !== undefined) return status === 408 || status === 429 || status >= 500 ? "retryable" : "final";
  return "final";
}

/** The error text a `fail` report carries: the message, never a stack. */
export function errorText(err) {
  if (err instanceof Error) return `${err.name}: ${err.message}`.slice(0, 2000);
  return `non-Error thrown: ${String(err)}`.slice(0, 2000);
}

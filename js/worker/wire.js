// The worker's one door to the server: signed requests (Standard
// Webhooks, PROTOCOL.md §Executor callback), the clock they are stamped
// with, and what to do with an answer that is not a judgement (a network
// error, 408, 429, 503, a stale timestamp). Jobs and the claim loop call
// `claim` and `report`; they never see a signature, a retry or a clock.
import { createHmac, randomBytes } from "node:crypto";
import { WorkerError } from "./errors.js";

/** How long one request may take before it counts as a network error. */
const REQUEST_TIMEOUT_MS = 10_000;
const BACKOFF_FIRST_MS = 250;
const BACKOFF_CAP_MS = 5_000;

/**
 * Local time plus an offset to the server's clock. The server refuses a
 * `webhook-timestamp` or an `atMs` more than 5 minutes off, and a
 * worker's clock can be wrong by more: every stamp goes through here.
 */
export class Clock {
  constructor(now) {
    this.local = now;
    this.offsetMs = 0;
  }
  /** The server's time, as well as this worker knows it. */
  now() {
    return this.local() + this.offsetMs;
  }
  /** From a claim answer's `nowMs`, taken when the answer was made: its arrival is the closest local time. */
  syncTo(serverNowMs, localAtArrival) {
    if (Number.isFinite(serverNowMs)) this.offsetMs = serverNowMs - localAtArrival;
  }
  /** From a `Date` header (whole seconds: the middle of that second is the best guess). */
  syncToDate(dateHeader, localAtArrival) {
    const ms = Date.parse(dateHeader ?? "");
    if (Number.isNaN(ms)) return false;
    this.offsetMs = ms + 500 - localAtArrival;
    return true;
  }
}

/** `cb_` / `clm_` / `out_` plus 96 random bits: a new id per report or chunk, kept across its resends. */
export function newId(prefix) {
  return prefix + randomBytes(12).toString("hex");
}

/** The HMAC key of a `whsec_<base64>` secret; a clear error naming `secret` otherwise. */
export function secretKey(secret) {
  if (typeof secret !== "string" || !secret.startsWith("whsec_")) {
    throw new TypeError(`taskwire/worker: secret: must be a string "whsec_<base64>" (the tenant's callback secret), got ${describe(secret)}`);
  }
  const b64 = secret.slice("whsec_".length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) {
    throw new TypeError(`taskwire/worker: secret: the part after "whsec_" must be base64`);
  }
  return Buffer.from(b64, "base64");
}

/**
 * Whether a report was taken: it changed the task, or repeated what the
 * task says already (`duplicate`, a resend included). One that is
 * neither was refused, and its `reason` says why (core's
 * `work::report_taken`): `next` speaks of the attempt, not of the report.
 */
export const taken = (answer) => answer.changed === true || answer.duplicate === true;

/** A value as an error message shows it: strings quoted and cut, numbers as written, other things by type. */
export function describe(v) {
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v);
  return v === null ? "null" : typeof v;
}

/** The three Standard Webhooks headers for `body` under `id`, stamped now. */
export function sign(key, id, timestampSecs, body) {
  const sig = createHmac("sha256", key).update(`${id}.${timestampSecs}.${body}`).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(timestampSecs), "webhook-signature": `v1,${sig}` };
}

/** A random wait from half to all of the exponential step, so workers that failed together do not retry together. */
function backoff(tries) {
  const step = Math.min(BACKOFF_CAP_MS, BACKOFF_FIRST_MS * 2 ** tries);
  return step / 2 + Math.random() * (step / 2);
}

/** Seconds of a `Retry-After` header as milliseconds, or undefined. */
function retryAfterMs(res) {
  const v = res.headers.get("retry-after");
  if (v === null || !/^\d+$/.test(v.trim())) return undefined;
  return Number(v.trim()) * 1000;
}

/** Whether a try ended in a way that says nothing of the request's fate, so it is sent again unchanged. */
function isPassing(status) {
  return status === 408 || status === 429 || status === 503;
}

/** Sleeps `ms`, or less when `signal` fires. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

async function errorOf(res) {
  const text = await res.text().catch(() => "");
  try {
    const e = JSON.parse(text).error;
    if (e && typeof e.code === "string") return { code: e.code, message: String(e.message ?? "") };
  } catch {
    // not the protocol's error shape
  }
  return { code: `http-${res.status}`, message: text.slice(0, 500) };
}

/**
 * Signed requests to one server. `fetch` is Node's own (undici), so the
 * worker adds no dependency.
 */
export class Wire {
  constructor({ url, tenant, key, clock, fetch: fetchImpl }) {
    this.url = url.replace(/\/+$/, "");
    this.tenant = tenant;
    this.key = key;
    this.clock = clock;
    this.fetch = fetchImpl ?? globalThis.fetch;
  }

  async #post(path, id, body, signal, timeoutMs) {
    const ts = Math.floor(this.clock.now() / 1000);
    const headers = { "content-type": "application/json", ...sign(this.key, id, ts, body) };
    if (this.tenant !== undefined) headers["taskwire-tenant"] = this.tenant;
    const timeout = AbortSignal.timeout(timeoutMs);
    const res = await this.fetch(this.url + path, {
      method: "POST",
      body,
      headers,
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    return { res, localAtArrival: this.clock.local() };
  }

  /**
   * One claim (PROTOCOL.md §Claim work). Answers `{tasks, nowMs}`, or
   * throws: `WorkerError` for a refusal that no retry fixes (a wrong
   * secret, a bad field), anything else (network, 429, 503) for the
   * caller's loop to back off and try again. A stale timestamp resyncs
   * the clock from `Date` and tries once more.
   */
  async claim(request, signal) {
    const body = JSON.stringify(request);
    for (let resynced = false; ; resynced = true) {
      const { res, localAtArrival } = await this.#post("/v1/work/claim", newId("clm_"), body, signal, (request.waitMs ?? 0) + REQUEST_TIMEOUT_MS);
      if (res.status === 200) {
        const answer = await res.json();
        if (!Array.isArray(answer?.tasks)) throw new WorkerError("protocol", "claim answer: tasks: must be an array");
        this.clock.syncTo(answer.nowMs, localAtArrival);
        return answer;
      }
      const err = await errorOf(res);
      if (res.status === 401 && !resynced && /webhook-timestamp/.test(err.message) && this.clock.syncToDate(res.headers.get("date"), localAtArrival)) continue;
      if (isPassing(res.status) || res.status >= 500) {
        const e = new WorkerError(err.code, `claim: HTTP ${res.status} ${err.message}`, res.status);
        e.retryAfterMs = retryAfterMs(res);
        throw e;
      }
      throw new WorkerError(err.code, `claim refused: HTTP ${res.status} ${err.code}: ${err.message}`, res.status);
    }
  }

  /**
   * Sends one report (an event of a claimed task) until it is judged, and
   * answers the server's `{next, attempt, changed, duplicate, reason, …}`
   * as sent (an `effect`'s answer also names `resourceId`, the id recorded
   * first under its key; `taken(answer)` says whether it was taken). `build(atMs)` makes the
   * event. `giveUpAt()` is the local time past which the lease cannot be
   * alive: then it throws `WorkerError` `lease-lost`.
   */
  async report(taskId, build, giveUpAt) {
    const answer = await this.#persist(`/v1/tasks/${encodeURIComponent(taskId)}/callbacks`, newId("cb_"), (atMs) => JSON.stringify({ taskId, ...build(atMs) }), giveUpAt, `report for ${taskId}`);
    if (!["continue", "cancel", "stop"].includes(answer?.next)) {
      throw new WorkerError("protocol", `callback answer: next: must be "continue", "cancel" or "stop", got ${describe(answer?.next)} (a server before the Workers protocol?)`);
    }
    return answer;
  }

  /**
   * Appends one chunk of live output (PROTOCOL.md §Live output, Append)
   * until it is delivered, through the reports' own resend path: the
   * chunk is addressed by `(attempt, offset)`, so its resend is judged a
   * `duplicate-chunk` when the first landed. Answers `{reason, expected,
   * …}` (`appended` or `duplicate-chunk`); a refusal (409 `stale-attempt`,
   * `output-closed`, `chunk-conflict`, `output-gap`, a 400) throws
   * `WorkerError` `report-refused` whose `reason` is the server's code.
   */
  append(taskId, stream, chunk, giveUpAt) {
    // The body names no time: every resend is the very same bytes.
    const body = JSON.stringify({ taskId, stream, ...chunk });
    const path = `/v1/tasks/${encodeURIComponent(taskId)}/output/${encodeURIComponent(stream)}`;
    return this.#persist(path, newId("out_"), () => body, giveUpAt, `output ${stream} of ${taskId}`);
  }

  /**
   * The one resend loop of signed requests that must land: sent until
   * judged (200, answered as parsed JSON) or refused. Resends keep the id
   * and the body (a request that may have been applied must be
   * recognised as the same), signed again with a fresh timestamp
   * (PROTOCOL.md: the same signed bytes twice are a duplicate). A network
   * error, 408, 429 or 503 is resent after a backoff until `giveUpAt()`
   * (`lease-lost`); a refused timestamp resyncs the clock and tries once
   * more, with the body stamped again (`build(atMs)`) unless an earlier
   * try may have been applied. Any other status throws `WorkerError`
   * (`unauthorized` for 401, else `report-refused`) carrying the
   * server's code as `reason`.
   */
  async #persist(path, id, build, giveUpAt, what) {
    let body = build(this.clock.now());
    // True once a try may have reached the state machine: from then on
    // the body may not change, or a resend would be a callback-conflict.
    let mayBeApplied = false;
    let resynced = false;
    for (let tries = 0; ; tries++) {
      let wait;
      let sentAt = this.clock.local();
      try {
        const { res, localAtArrival } = await this.#post(path, id, body, undefined, REQUEST_TIMEOUT_MS);
        if (res.status === 200) {
          const answer = await res.json();
          if (answer !== null && typeof answer === "object") answer.sentAtLocal = sentAt;
          return answer;
        }
        const err = await errorOf(res);
        const clockRefusal = (res.status === 401 && /webhook-timestamp/.test(err.message)) || (res.status === 400 && err.code === "clock-skew");
        if (clockRefusal && !resynced && this.clock.syncToDate(res.headers.get("date"), localAtArrival)) {
          resynced = true;
          // Refused before judgement: restamping `atMs` is safe unless
          // an earlier try may have been applied.
          if (!mayBeApplied) body = build(this.clock.now());
          tries--;
          continue;
        }
        if (!isPassing(res.status)) {
          const e = new WorkerError(res.status === 401 ? "unauthorized" : "report-refused", `${what}: HTTP ${res.status} ${err.code}: ${err.message}`, res.status);
          e.reason = err.code;
          throw e;
        }
        // 503 may have been applied (PROTOCOL.md §Conventions); 408 and 429 were not judged.
        if (res.status === 503) mayBeApplied = true;
        wait = retryAfterMs(res);
      } catch (e) {
        if (e instanceof WorkerError) throw e;
        mayBeApplied = true; // a network error after the bytes left
      }
      const delay = Math.max(wait ?? 0, backoff(tries));
      if (this.clock.local() + delay >= giveUpAt()) {
        throw new WorkerError("lease-lost", `${what}: the server could not be reached before the lease ran out`);
      }
      await sleep(delay);
    }
  }
}

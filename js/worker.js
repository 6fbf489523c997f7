// `taskwire/worker`: a worker for Node ≥ 20 that asks a taskwire server
// for work (PROTOCOL.md §Workers) and runs it. It is in no page bundle:
// it needs `node:crypto` and holds the tenant's callback secret.
//
// Driving it: `createWorker({...})`, `worker.handle(kind, handler)` for
// each kind, then `worker.run()`, which claims as many tasks as there are
// free slots (a held claim), runs each as a `Job`, and resolves once
// `worker.shutdown(graceMs)` has stopped it. The handler sees a plain
// function call: heartbeats, signatures, resends, the clock and the
// attempt number are the library's.
import { hostname } from "node:os";
import { Job } from "./worker/job.js";
import { Clock, Wire, describe, secretKey, sleep } from "./worker/wire.js";
import { WorkerError } from "./worker/errors.js";

export { CancelledError, FatalError, OutputError, OverBudget, RetryableError, StepError, SubmitUnknownError, WorkerError, classifyError } from "./worker/errors.js";
export { budgetExhausted } from "./worker/budget.js";
export { isOutcomeUnknown } from "./worker/vendor.js";

const CLAIM_BACKOFF_FIRST_MS = 500;
const CLAIM_BACKOFF_CAP_MS = 30_000;
// How long a shutdown lets the claim in flight come back before aborting
// it. The server may have claimed a task for it just before (its answer
// on the way): aborted, that task would wait for its lease and grace.
// Waited for, it runs within the grace like the others. A held claim
// with nothing to give is aborted after this, so an idle worker stops
// at once, or nearly.
const CLAIM_SETTLE_MS = 1_000;

function integer(options, name, fallback, min, max) {
  const v = options[name] ?? fallback;
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new TypeError(`taskwire/worker: ${name}: must be an integer from ${min} to ${max}, got ${describe(v)}`);
  }
  return v;
}

function text(options, name, fallback, maxBytes) {
  const v = options[name] ?? fallback;
  if (typeof v !== "string" || v.trim() === "" || Buffer.byteLength(v) > maxBytes) {
    throw new TypeError(`taskwire/worker: ${name}: must be a non-blank string of at most ${maxBytes} bytes, got ${describe(v)}`);
  }
  return v;
}

/** Checks the options once, with errors that name the field. */
function configure(options) {
  if (options === null || typeof options !== "object") throw new TypeError(`taskwire/worker: options: must be an object, got ${describe(options)}`);
  let url;
  try {
    url = new URL(options.url);
  } catch {
    throw new TypeError(`taskwire/worker: url: must be an absolute http(s) URL (the server's base), got ${describe(options.url)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`taskwire/worker: url: must be http: or https:, got ${describe(options.url)}`);
  const tenant = options.tenant === undefined ? undefined : text(options, "tenant", undefined, 255);
  const now = options.now ?? Date.now;
  if (typeof now !== "function") throw new TypeError(`taskwire/worker: now: must be a function returning milliseconds, got ${describe(now)}`);
  if (options.fetch !== undefined && typeof options.fetch !== "function") throw new TypeError(`taskwire/worker: fetch: must be a function, got ${describe(options.fetch)}`);
  const onWarning = options.onWarning ?? ((message) => console.warn(`taskwire/worker: ${message}`));
  if (typeof onWarning !== "function") throw new TypeError(`taskwire/worker: onWarning: must be a function, got ${describe(onWarning)}`);
  return {
    url: url.href,
    tenant,
    key: secretKey(options.secret),
    name: text(options, "name", `${hostname()}-${process.pid}`, 255),
    concurrency: integer(options, "concurrency", 1, 1, 100),
    leaseMs: integer(options, "leaseMs", 30_000, 1_000, 3_600_000),
    waitMs: integer(options, "waitMs", 25_000, 0, 30_000),
    workflowVersions: versions(options.workflowVersions),
    now,
    fetch: options.fetch,
    onWarning,
  };
}

/**
 * The workflow versions the worker's code runs (PROTOCOL.md §Workers ›
 * Claim work): its claims leave the tasks planned for other versions to
 * their own workers. Absent: any.
 */
function versions(list) {
  if (list === undefined) return [];
  if (!Array.isArray(list) || list.length > 16) throw new TypeError(`taskwire/worker: workflowVersions: must be an array of at most 16 versions, got ${describe(list)}`);
  return list.map((v, i) => {
    if (typeof v !== "string" || v.trim() === "" || Buffer.byteLength(v) > 255) throw new TypeError(`taskwire/worker: workflowVersions[${i}]: must be a non-blank string of at most 255 bytes, got ${describe(v)}`);
    return v;
  });
}

/** Claims tasks of the registered kinds and runs them; see worker.d.ts. */
export class Worker {
  #config;
  #wire;
  #handlers = new Map();
  #running = new Map(); // taskId → { job, done }
  #stopping = false;
  #stopped = new AbortController(); // fires at shutdown: ends the claim loop's waits
  #claimAbort = new AbortController(); // fires CLAIM_SETTLE_MS later: ends the claim in flight
  #claimTimer;
  #graceEnds = 0; // performance.now() at which the grace runs out
  #wake = () => {};
  #runs; // the promise of run()

  constructor(options) {
    this.#config = configure(options);
    this.#wire = new Wire({ ...this.#config, clock: new Clock(this.#config.now) });
  }

  /** The worker's name, as recorded in each `start`. */
  get name() {
    return this.#config.name;
  }

  /** Registers the handler of one task kind (`""` is the kind of a task created without one). */
  handle(kind, handler) {
    if (typeof kind !== "string" || Buffer.byteLength(kind) > 64) throw new TypeError(`worker.handle: kind: must be a string of at most 64 bytes, got ${describe(kind)}`);
    if (typeof handler !== "function") throw new TypeError(`worker.handle: handler: must be a function, got ${describe(handler)}`);
    if (this.#handlers.has(kind)) throw new TypeError(`worker.handle: kind: ${describe(kind)} already has a handler`);
    if (this.#handlers.size >= 32) throw new TypeError("worker.handle: kind: at most 32 kinds per worker (the claim's limit)");
    this.#handlers.set(kind, handler);
    return this;
  }

  /** Claims and runs work until `shutdown()`; rejects only when the server refuses the worker itself (a wrong secret or tenant). */
  run() {
    if (this.#runs) throw new TypeError("worker.run: already running");
    if (this.#handlers.size === 0) throw new TypeError("worker.run: no handler: call worker.handle(kind, handler) first");
    this.#runs = this.#loop();
    return this.#runs;
  }

  async #loop() {
    const kinds = [...this.#handlers.keys()];
    for (let failures = 0; !this.#stopping; ) {
      const free = this.#config.concurrency - this.#running.size;
      if (free <= 0) {
        await new Promise((resolve) => (this.#wake = resolve));
        continue;
      }
      let answer;
      try {
        answer = await this.#wire.claim(
          {
            worker: this.#config.name,
            kinds,
            max: free,
            waitMs: this.#config.waitMs,
            leaseMs: this.#config.leaseMs,
            ...(this.#config.workflowVersions.length > 0 && { workflowVersions: this.#config.workflowVersions }),
          },
          this.#claimAbort.signal,
        );
        failures = 0;
      } catch (e) {
        if (this.#stopping) break;
        if (e instanceof WorkerError && e.status !== undefined && e.status < 500 && e.status !== 408 && e.status !== 429) {
          // A refusal no retry fixes: stop here, hand back what runs.
          await this.#drain(0);
          throw e;
        }
        const step = Math.min(CLAIM_BACKOFF_CAP_MS, CLAIM_BACKOFF_FIRST_MS * 2 ** failures++);
        const wait = Math.max(e.retryAfterMs ?? 0, step / 2 + Math.random() * (step / 2));
        this.#config.onWarning(`claim failed (${e.message}); trying again in ${Math.round(wait)} ms`);
        await sleep(wait, this.#stopped.signal);
        continue;
      }
      for (const task of answer.tasks) this.#start(task);
    }
    clearTimeout(this.#claimTimer);
    await this.#drain(this.#graceEnds - performance.now());
  }

  #start(task) {
    const job = new Job(task, { wire: this.#wire, warn: this.#config.onWarning });
    const handler = this.#handlers.get(job.kind);
    const body = handler ?? (() => Promise.reject(new WorkerError("protocol", `no handler for kind ${describe(job.kind)}`)));
    const done = Job.run(job, body).then(() => {
      this.#running.delete(job.id);
      this.#wake();
    });
    this.#running.set(job.id, { job, done });
  }

  /** Waits for the running jobs up to `graceMs`, then hands back those left. */
  async #drain(graceMs) {
    if (graceMs > 0) {
      const timer = new AbortController();
      await Promise.race([Promise.all([...this.#running.values()].map((r) => r.done)), sleep(graceMs, timer.signal)]);
      timer.abort(); // so the grace's timer keeps no process alive
    }
    await Promise.all([...this.#running.values()].map((r) => Job.abandon(r.job)));
  }

  /**
   * Stops claiming, waits up to `graceMs` for the running jobs, then
   * fires the signal of each unfinished one (`reason.code` `shutdown`)
   * and reports it `fail` retryable, "worker shut down", so another
   * worker takes it. Resolves when `run()` has returned.
   */
  async shutdown(graceMs = 10_000) {
    if (!Number.isFinite(graceMs) || graceMs < 0) throw new TypeError(`worker.shutdown: graceMs: must be a finite number ≥ 0, got ${describe(graceMs)}`);
    if (!this.#stopping) {
      this.#stopping = true;
      this.#graceEnds = performance.now() + graceMs;
      this.#stopped.abort();
      this.#claimTimer = setTimeout(() => this.#claimAbort.abort(), Math.min(graceMs, CLAIM_SETTLE_MS));
      this.#wake();
    }
    if (this.#runs) await this.#runs.catch(() => {});
  }
}

/** `new Worker(options)`. */
export function createWorker(options) {
  return new Worker(options);
}

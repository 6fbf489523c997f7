// One claimed task while it runs: the `Job` a handler gets, its
// heartbeats, and the one place that turns how the handler ended into
// the attempt's last report.
//
// Driving it: `new Job(task, …)`, then `await Job.run(job, handler)`; it
// resolves once the attempt's last report was judged (or there was none
// to send). `Job.abandon(job)` from the worker's shutdown fires the
// signal (`shutdown`) and hands the task back at once, without waiting
// for a handler that ignores its signal.
import { CancelledError, FatalError, WorkerError, classifyError, errorText } from "./errors.js";
import { describe } from "./wire.js";
import { submitOnceThenPoll } from "./vendor.js";
import { Output, flushAll, streamName } from "./output.js";
import { checkpointOf, isStepDone, runStep } from "./steps.js";
import { Exhausted, effect, exhaustEvent, recordedEffect, spend } from "./budget.js";

/** The work of one attempt of one task, as a handler sees it. */
export class Job {
  #wire;
  #controller = new AbortController();
  #leaseMs;
  #aliveUntil; // local time past which the lease cannot be alive
  #heartbeat; // the timer
  #beating; // the heartbeat in flight, if any
  #ended = false; // the attempt's last report went out (or will not)
  #finishing; // that report in flight
  #warn;
  #outputs = new Map(); // stream name → Output
  #steps = new Map(); // step name → the checkpoint this attempt recorded

  constructor(task, { wire, warn }) {
    this.task = task;
    this.id = task.id;
    this.kind = task.kind ?? "";
    this.input = task.input;
    this.attempt = task.attempts;
    this.#wire = wire;
    this.#warn = warn;
    this.#leaseMs = task.lease?.leaseMs ?? 30_000;
    const expires = task.lease?.expiresAtMs;
    this.#aliveUntil = Number.isFinite(expires) ? expires - wire.clock.offsetMs : wire.clock.local() + this.#leaseMs;
  }

  /** Fires when the work should stop; `signal.reason` is a `CancelledError` whose `code` says why. */
  get signal() {
    return this.#controller.signal;
  }

  /**
   * Throws the signal's `CancelledError` when it fired (the same as
   * `check()`): call it before and after each tool call.
   */
  checkpoint() {
    this.check();
  }

  /**
   * Step `step`'s `{outputRef, outputHash}` when this attempt or an
   * earlier one finished it with one (PROTOCOL.md §Steps), else
   * undefined: the Rust and Python libraries' `checkpoint(name)`, named
   * apart here because `checkpoint()` was already the signal check.
   */
  stepCheckpoint(step) {
    return checkpointOf(this.task, this.#steps, step);
  }

  /** Throws the signal's `CancelledError` when it fired (the name the Rust and Python libraries use). */
  check() {
    if (this.signal.aborted) throw this.signal.reason;
  }

  /** True when step `name` is finished (succeeded or skipped), by this attempt or an earlier one: `step` will not run it. */
  stepDone(name) {
    return isStepDone(this.task, this.#steps, name);
  }

  /**
   * Runs step `name` of the task's plan at most once across attempts:
   * a finished step answers its checkpoint without calling `run`;
   * otherwise it is reported `running`, `run()` is awaited, and the step
   * reported `succeeded` with the checkpoint `run` resolved to (or
   * `failed`, and `run`'s error rethrown). `options.label`: what a page
   * shows while the step runs ("3/8: extracting key points"), sent with
   * its `running` report. See steps.js.
   */
  step(name, run, options = {}) {
    return runStep(this, this.#steps, (event) => this.#send(event), name, run, options);
  }

  /**
   * Runs one paid call within the task's budget: reserves `estimate`
   * (`{tokens?, costCents?}`, the call's ceiling: give the model the same
   * max tokens), awaits `call()` (answering `{value, usage}`), settles the
   * `usage` it reports (releasing the rest) and answers `value`. A call
   * that throws settles nothing used, releasing the whole reservation,
   * and its error is rethrown. The reservation's id is
   * `"<attempt>:<name>"`: a resent report is a duplicate, and a new
   * attempt reserves afresh. A refused reservation throws `OverBudget`
   * and the call is not made. See budget.js.
   */
  spend(name, estimate, call, options = {}) {
    return spend(this, (event) => this.#send(event), name, estimate, call, options);
  }

  /**
   * Makes one external write at most once for the task: `write(key)` gets
   * `key(step, action)` (the same in every attempt: pass it to the outside
   * system, which must deduplicate by it) and answers the id of what it
   * wrote; the write is then recorded under `(step, action)`, and the id
   * recorded first is answered. A write the claimed task already records
   * is not made again. A record the server refuses throws a FatalError.
   */
  effect(step, action, write) {
    return effect(this, (event) => this.#send(event), step, action, write);
  }

  /** The resource id the claimed task records under `(step, action)`, if any. */
  recordedEffect(step, action) {
    return recordedEffect(this.task, step, action);
  }

  /**
   * The writer on the task's output stream `name` (PROTOCOL.md §Live
   * output); the same name gives the same writer. Small writes are
   * batched (see output.js); what is buffered is sent before the
   * attempt's last report.
   */
  output(name) {
    streamName(name);
    let out = this.#outputs.get(name);
    if (out === undefined) {
      const self = this;
      out = new Output(
        {
          wire: this.#wire,
          taskId: this.id,
          attempt: this.attempt,
          giveUpAt: () => this.#aliveUntil,
          // The attempt is no longer this worker's: nothing more is sent.
          over: () => this.signal.aborted && ["stop", "lease-lost"].includes(this.signal.reason.code),
          end(code) {
            self.#abort(code);
            return self.signal.reason;
          },
        },
        name,
      );
      this.#outputs.set(name, out);
    }
    return out;
  }

  /**
   * `"<taskId>:<step>:<action>"`: an idempotency key for an external
   * write, the same in every attempt (seed 001 §5), so a vendor that
   * dedups by it does the write once however often the task is retried.
   */
  key(step, action) {
    for (const [name, v] of [["step", step], ["action", action]]) {
      if (typeof v !== "string" || v.trim() === "") throw new TypeError(`job.key: ${name}: must be a non-blank string, got ${describe(v)}`);
    }
    return `${this.id}:${step}:${action}`;
  }

  /** Reports progress (an integer 0 to 100, only upward) and renews the lease. Throws when the signal fired. */
  async progress(percent, cursor = "") {
    if (!Number.isInteger(percent) || percent < 0 || percent > 100) {
      throw new RangeError(`job.progress: percent: must be an integer from 0 to 100, got ${describe(percent)}`);
    }
    if (typeof cursor !== "string") throw new TypeError(`job.progress: cursor: must be a string, got ${describe(cursor)}`);
    this.checkpoint();
    await this.#send({ type: "progress", progress: percent, cursor });
    this.checkpoint();
  }

  /**
   * Hands the task to a person: the task waits (`waiting_approval`) for a
   * decision on the artifact, and this attempt ends. Return from the
   * handler after it; the next attempt reads `job.task.decision`.
   */
  async hold(artifactRef, artifactHash, question) {
    for (const [name, v] of [["artifactRef", artifactRef], ["artifactHash", artifactHash]]) {
      if (typeof v !== "string" || v.trim() === "") throw new TypeError(`job.hold: ${name}: must be a non-blank string, got ${describe(v)}`);
    }
    if (question !== undefined && typeof question !== "string") throw new TypeError(`job.hold: question: must be a string, got ${describe(question)}`);
    this.checkpoint();
    await this.#stopBeating();
    this.#ended = true;
    await flushAll(this.#outputs, this.#warn);
    await this.#send({ type: "hold", artifactRef, artifactHash, ...(question === undefined ? {} : { question }) }, true);
    this.#abort("stop");
  }

  /**
   * Seed 004's vendor pattern: `submit(key)` once under
   * `key(step, "submit")`, then `poll(handle)` with bounded backoff. A
   * submit whose outcome is unknown is never repeated blindly: see
   * `submitOnceThenPoll`.
   */
  vendor(options) {
    return submitOnceThenPoll(this, options, this.#wire.clock);
  }

  #abort(code) {
    if (!this.signal.aborted) this.#controller.abort(new CancelledError(code));
  }

  /** One report; its answer's `next` may fire the signal. */
  async #send(event, final = false) {
    let answer;
    try {
      answer = await this.#wire.report(this.id, (atMs) => ({ ...event, atMs, attempt: this.attempt }), () => this.#aliveUntil);
    } catch (e) {
      this.#abort(e instanceof WorkerError && e.code === "lease-lost" ? "lease-lost" : "stop");
      if (final) throw e;
      // The handler learns it through its signal; the cause goes to the log.
      this.#warn(`the ${event.type} report of ${this.id} (attempt ${this.attempt}) failed: ${e.message}`);
      throw this.signal.reason;
    }
    // A step report renews the lease as a progress does (PROTOCOL.md §Steps).
    if (["progress", "heartbeat", "step"].includes(event.type)) this.#aliveUntil = answer.sentAtLocal + this.#leaseMs;
    if (answer.next === "cancel") this.#abort("cancel");
    else if (answer.next === "stop") this.#abort("stop");
    return answer;
  }

  #beat = async () => {
    // After a cancel the lease is still kept while the handler winds
    // down; after a stop or a lost lease the attempt is no longer ours.
    if (this.#beating || this.#ended || (this.signal.aborted && this.signal.reason.code !== "cancel")) return;
    this.#beating = this.#send({ type: "heartbeat" }).catch(() => {});
    await this.#beating;
    this.#beating = undefined;
  };

  async #stopBeating() {
    clearInterval(this.#heartbeat);
    await this.#beating;
  }

  /** The attempt's last report, sent at most once; a second call waits for the first. */
  #finish(event) {
    if (this.#ended) return this.#finishing;
    this.#ended = true;
    this.#finishing = (async () => {
      await this.#stopBeating();
      // The whole text before the end: a follower never sees a closed
      // stream short of what the job wrote.
      await flushAll(this.#outputs, this.#warn);
      try {
        await this.#send(event, true);
      } catch (e) {
        this.#warn(`the ${event.type} report of ${this.id} (attempt ${this.attempt}) was not delivered: ${e.message}`);
      }
    })();
    return this.#finishing;
  }

  // The worker's two calls are static, so a handler, which holds the
  // job, cannot run or abandon it.

  /** Called by the worker's shutdown past its grace: fire, and hand the task back to the queue now. */
  static async abandon(job) {
    job.#abort("shutdown");
    await job.#finish({ type: "fail", error: "worker shut down", retryable: true });
  }

  /** Runs `handler(job)` with heartbeats, then sends what its ending means. */
  static run(job, handler) {
    return job.#run(handler);
  }

  async #run(handler) {
    this.#heartbeat = setInterval(this.#beat, Math.max(100, Math.floor(this.#leaseMs / 3)));
    let result, thrown, ok;
    try {
      result = await handler(this);
      ok = true;
    } catch (e) {
      thrown = e;
      ok = false;
    }
    if (this.#ended) return;
    const why = this.signal.aborted ? this.signal.reason.code : undefined;
    if (why === "stop" || why === "lease-lost") {
      this.#ended = true;
      await this.#stopBeating();
      return;
    }
    if (why === "shutdown") return this.#finish({ type: "fail", error: "worker shut down", retryable: true });
    // After a cancel too: the server ends the task cancelled, keeping the partial result.
    if (ok && result instanceof Exhausted) return this.#finish(exhaustEvent(result));
    if (ok) {
      const bad = ["resultRef", "resultHash"].find((f) => typeof result?.[f] !== "string" || result[f].trim() === "");
      // After a cancel a result is still reported: the task ends
      // cancelled and keeps the resultRef for compensation (PROTOCOL.md §Cancel).
      if (bad === undefined) return this.#finish({ type: "succeed", resultRef: result.resultRef, resultHash: result.resultHash });
      thrown = new FatalError(`the handler's result: ${bad}: must be a non-blank string, got ${describe(result?.[bad])}`);
    }
    if (why === "cancel") return this.#finish({ type: "ack_cancel" });
    const retryable = classifyError(thrown) === "retryable";
    return this.#finish({ type: "fail", error: errorText(thrown), retryable });
  }
}

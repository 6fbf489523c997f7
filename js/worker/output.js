// Live output (PROTOCOL.md §Live output): a job's text as it writes it,
// appended to one of the task's named streams with signed requests.
//
// `job.output("draft").write(text)` only buffers. The buffer goes out as
// one chunk when it reaches FLUSH_UNITS, FLUSH_AFTER_MS after its first
// write (a timer), on `flush()`, and before the attempt's last report
// (`succeed`, `fail`, `hold`, `ack_cancel`): a handler writing a token at
// a time sends a few requests a second, not one per token, and a
// follower never sees the task end before its text. The same limits as
// the Rust and Python libraries.
//
// Each chunk is addressed by `(attempt, offset)` in UTF-16 code units (a
// JS string's own `length`), so a resend is safe: a chunk whose first
// send landed is answered `duplicate-chunk`. Chunks go through the
// reports' resend path (`Wire.append`): the same webhook-id and bytes
// after a network error, 408, 429 or 503, until the lease could no longer
// be alive. A newer attempt (`stale-attempt`) or the task's end
// (`output-closed`) ends the stream and fires the job's signal `stop`;
// any other refusal ends it with an `OutputError`. Either is thrown to
// every later `write` and `flush`.
import { CancelledError, OutputError, WorkerError } from "./errors.js";
import { describe } from "./wire.js";

/** A buffer this long (UTF-16 units) is sent at once. */
export const FLUSH_UNITS = 4096;
/** A buffer is sent at the latest this long after its first write. */
export const FLUSH_AFTER_MS = 100;
/** The most units one request carries (the server's limit is 65,536). */
const CHUNK_UNITS = 16 * 1024;
const NAME = /^[a-z0-9_-]{1,64}$/;
/** The refusals that mean the stream is no longer this attempt's: not an error of the job. */
const FENCED = new Set(["stale-attempt", "output-closed"]);

/** How many units of `text` make a chunk of at most `units`, never half a surrogate pair. */
export function cutAt(text, units) {
  if (text.length <= units) return text.length;
  const high = text.charCodeAt(units - 1);
  return high >= 0xd800 && high <= 0xdbff ? units - 1 : units;
}

/** The stream's name, checked: the error names `stream`. */
export function streamName(name) {
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new TypeError(`job.output: stream: must be 1 to 64 characters of a-z, 0-9, - and _, got ${describe(name)}`);
  }
  return name;
}

/**
 * A job's writer on one output stream. `attempt` is how the stream
 * reaches its job: `{wire, taskId, attempt, giveUpAt(), over(), end(code)}`
 * (`over()`: the signal fired `stop` or `lease-lost`, so nothing more
 * may be sent; `end(code)`: fire the signal and answer its reason).
 */
export class Output {
  #job;
  #pending = "";
  #sent = 0; // units the server holds (acknowledged)
  #timer;
  #ended; // the error every later write and flush throws, once the stream ended
  #sending = Promise.resolve(); // one send at a time, in offset order

  constructor(job, name) {
    this.#job = job;
    this.name = name;
  }

  /** How many UTF-16 units the server has acknowledged. */
  get acknowledged() {
    return this.#sent;
  }

  /**
   * Adds `text` to the stream. It is sent at once past FLUSH_UNITS (and
   * then resolves when the server holds it), else within FLUSH_AFTER_MS.
   * Rejects with what ended the stream, if it ended.
   */
  async write(text) {
    if (typeof text !== "string") throw new TypeError(`output.write: text: must be a string, got ${describe(text)}`);
    if (this.#ended) throw this.#ended;
    this.#pending += text;
    if (this.#pending.length >= FLUSH_UNITS) return this.flush();
    if (this.#timer === undefined && this.#pending !== "") {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        // An error is kept in #ended and thrown to the next write or flush.
        this.flush().catch(() => {});
      }, FLUSH_AFTER_MS);
    }
  }

  /** Sends whatever is buffered; resolves when the server holds it. */
  flush() {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const run = this.#sending.then(() => this.#drain());
    this.#sending = run.catch(() => {});
    return run;
  }

  async #drain() {
    while (this.#pending !== "") {
      if (this.#ended) throw this.#ended;
      const cut = cutAt(this.#pending, CHUNK_UNITS);
      const chunk = this.#pending.slice(0, cut);
      this.#pending = this.#pending.slice(cut);
      try {
        await this.#send(this.#sent, chunk);
      } catch (e) {
        // Put back: nothing after an undelivered chunk is sent.
        this.#pending = chunk + this.#pending;
        this.#ended = e;
        throw e;
      }
      this.#sent += chunk.length;
    }
    if (this.#ended) throw this.#ended;
  }

  /** One chunk, through the reports' resend path; what ended the stream if it was not delivered. */
  async #send(offset, text) {
    const job = this.#job;
    if (job.over()) throw job.end("stop");
    try {
      await job.wire.append(job.taskId, this.name, { attempt: job.attempt, offset, text }, job.giveUpAt);
    } catch (e) {
      if (e instanceof WorkerError && e.code === "lease-lost") throw job.end("lease-lost");
      if (e instanceof WorkerError && FENCED.has(e.reason)) throw job.end("stop");
      if (e instanceof CancelledError) throw e;
      if (e instanceof WorkerError) throw new OutputError(e.reason ?? e.code, this.name, e.message, e.status);
      // Not the server's answer (a protocol error reading it): final too.
      throw new OutputError("protocol", this.name, `output ${this.name} of ${job.taskId}: ${e?.message ?? String(e)}`);
    }
  }
}

/**
 * Sends every stream's buffer before the attempt's last report, so a
 * follower gets the whole text before it learns the task ended. A
 * stream that cannot be sent is told to `warn`; the report goes anyway.
 */
export async function flushAll(outputs, warn) {
  for (const out of outputs.values()) {
    try {
      await out.flush();
    } catch (e) {
      warn(`output ${out.name} was not all delivered: ${e.message}`);
    }
  }
}

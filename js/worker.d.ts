// Types of `taskwire/worker`: a worker for Node ≥ 20 that claims tasks
// from a taskwire server (PROTOCOL.md §Workers) and runs them. Never in a
// page: it holds the tenant's callback secret.
import type { StepUsage, TaskView } from "./wire.js";

/** Options of `createWorker`. Every bad value is a `TypeError` naming the field. */
export interface WorkerOptions {
  /** The server's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** The tenant whose queue is claimed from (header `taskwire-tenant`). Omitted: the tenants that share the server's common secret. */
  tenant?: string;
  /** The tenant's callback secret, `whsec_<base64>`: claims and reports are signed with it. */
  secret: string;
  /** The worker's name, recorded in each attempt's `start`. Default `<hostname>-<pid>`. */
  name?: string;
  /** Jobs in flight at once, 1 to 100. Default 1. */
  concurrency?: number;
  /** The lease of each attempt, 1,000 to 3,600,000 ms; heartbeats go every third of it. Default 30,000. */
  leaseMs?: number;
  /** How long a claim is held while there is no work, 0 to 30,000 ms. Default 25,000. */
  waitMs?: number;
  /**
   * The workflow versions this code runs (at most 16, each non-blank): its
   * claims leave the tasks planned for other versions to their own
   * workers, so new code never takes over an older task (PROTOCOL.md
   * §Workers › Claim work). Default: any.
   */
  workflowVersions?: string[];
  /** The local clock in ms since the epoch (for tests). The worker keeps its own offset to the server's clock. Default `Date.now`. */
  now?: () => number;
  /** The `fetch` to use. Default Node's global `fetch`. */
  fetch?: typeof fetch;
  /** Told of what the worker survived (a failed claim, an undelivered report). Default `console.warn`. */
  onWarning?: (message: string) => void;
}

/** What a handler returns: the task succeeds with this result. */
export interface JobResult {
  resultRef: string;
  resultHash: string;
}

/** An amount of budget: a reservation's estimate, or what is reserved now. */
export interface BudgetAmount {
  tokens: number;
  costCents: number;
}

/** An external write the task records (PROTOCOL.md §Budgets and side effects): once under `(step, action)`. */
export interface RecordedEffect {
  step: string;
  action: string;
  /** The id of what the write made, recorded first under its key. */
  resourceId: string;
  /** The attempt that recorded it. */
  attempt: number;
}

/** A claimed task as the server sent it: its view, `kind`, `input` and the lease of this attempt. */
export type ClaimedTask = TaskView & {
  kind?: string;
  input?: unknown;
  lease: { attempt: number; expiresAtMs: number; leaseMs: number };
  /** The task's limits, when created with a `budget`. */
  budget?: { maxTokens?: number; maxCostCents?: number } | null;
  /** What settled calls used, charged open reservations of dead attempts included. */
  used?: StepUsage | null;
  /** What open reservations hold now. */
  reserved?: BudgetAmount | null;
  /** The external writes recorded so far: `job.effect` does not make these again. */
  effects?: RecordedEffect[];
};

/** What `job.spend`'s call resolves to: its value, and what it used (each an integer ≥ 0; absent counts 0). */
export interface SpendAnswer<T> {
  value: T;
  usage: Partial<StepUsage>;
}

/**
 * How a job ends when its budget ran out; made by `budgetExhausted`, and
 * returned by the handler.
 */
export interface BudgetExhausted {
  readonly partial: JobResult | undefined;
}

/** Why a job's signal fired. */
export type CancelCode = "cancel" | "stop" | "lease-lost" | "shutdown";

/** A vendor poll's answer: still running, or done with the value `job.vendor` resolves to. */
export type PollAnswer<T> = { done: false } | { done: true; value: T };

/** Options of `job.vendor`: seed 004's "submit once, query many". */
export interface VendorOptions<H, T> {
  /** The step's name: the submit's idempotency key is `job.key(step, "submit")`. */
  step: string;
  /** Creates the vendor's work under `key` (the vendor must dedup by it) and returns its handle (e.g. the vendor's task id). Called once, unless `lookup` proves the vendor never got it. */
  submit: (key: string, signal: AbortSignal) => Promise<H> | H;
  /** Asks the vendor once how the work is going. */
  poll: (handle: H, signal: AbortSignal) => Promise<PollAnswer<T>> | PollAnswer<T>;
  /** After a submit whose outcome is unknown: the handle of the work submitted under `key`, or undefined/null when the vendor has none. Without it such a submit fails the job with `SubmitUnknownError`. */
  lookup?: (key: string, signal: AbortSignal) => Promise<H | undefined | null> | H | undefined | null;
  /** Stop polling after this long (ms), failing the job final; the task's `deadlineAtMs` bounds it too. */
  timeoutMs?: number;
  /** The first wait between polls (ms), doubled up to `maxDelayMs`, with jitter. Default 1,000. */
  firstDelayMs?: number;
  /** Default 30,000. */
  maxDelayMs?: number;
  /** Retryable poll errors in a row before the job fails with the last. Default 5. */
  maxPollErrors?: number;
}

/** A finished step's checkpoint (PROTOCOL.md §Steps): where its output is stored, and the output's content hash. */
export interface StepCheckpoint {
  outputRef: string;
  outputHash: string;
}

/** What a step's `run` resolves to: its checkpoint and, optionally, what it used (its own totals). */
export interface StepOutput extends StepCheckpoint {
  usage?: StepUsage;
}

/**
 * A job's writer on one output stream (PROTOCOL.md §Live output). Writes
 * are batched: sent at 4,096 UTF-16 units, 100 ms after the first
 * buffered write, on `flush()`, and before the attempt's last report;
 * each request carries at most 16,384 units. A chunk whose answer was
 * lost is resent as the same request (the server answers
 * `duplicate-chunk`). A stream fenced off by a newer attempt or closed
 * by the task's end rejects with the job's `CancelledError` (`stop`); a
 * refusal no resend fixes with an `OutputError`. Every later call
 * rejects with the same error.
 */
export interface Output {
  /** The stream's name. */
  readonly name: string;
  /** How many UTF-16 units the server has acknowledged. */
  readonly acknowledged: number;
  /** Adds `text`; resolves at once, unless the buffer reached 4,096 units (then when the server holds it). */
  write(text: string): Promise<void>;
  /** Sends what is buffered; resolves when the server holds it. */
  flush(): Promise<void>;
}

/** One attempt of one task, as a handler sees it. */
export interface Job {
  readonly id: string;
  readonly kind: string;
  readonly input: unknown;
  /** The attempt this job runs (the claimed task's `attempts`); every report carries it. */
  readonly attempt: number;
  /** The task as claimed: `decision`, `decisionReason`, `artifactRef`, `artifactHash` after a person decided, `error` after a failed attempt. */
  readonly task: ClaimedTask;
  /**
   * Fires when the work should stop; pass it to `fetch` and other tool
   * calls. `signal.reason` is a `CancelledError` whose `code` says why.
   */
  readonly signal: AbortSignal & { readonly reason: CancelledError | undefined };
  /** Throws the signal's `CancelledError` if it fired: call it before and after each tool call. */
  checkpoint(): void;
  /** Step `step`'s checkpoint when this attempt or an earlier one finished it with one; undefined otherwise. */
  stepCheckpoint(step: string): StepCheckpoint | undefined;
  /** The same as `checkpoint()`. */
  check(): void;
  /** True when step `step` is finished (succeeded or skipped), by this attempt or an earlier one: `job.step` will not run it. */
  stepDone(step: string): boolean;
  /**
   * Runs step `step` of the task's plan at most once across attempts. A
   * finished step resolves to its checkpoint (undefined for a skipped
   * one) without calling `run`. Otherwise the step is reported
   * `running`, `run()` is awaited, and the step reported `succeeded`
   * with the checkpoint it resolved to, or `failed`, and `run`'s error
   * rethrown. A step the plan does not have, a task without a plan and
   * a finished step's conflict reject with a `StepError`.
   * `options.label` is sent with the `running` report: what a page shows
   * while the step runs ("3/8: extracting key points").
   *
   * @example
   * const facts = await job.step("extract", async () => {
   *   const ref = await store.put(await extract(job.input.doc));
   *   return { outputRef: ref.url, outputHash: ref.sha256, usage: { tokens: 812, costCents: 3, toolCalls: 1 } };
   * });
   */
  step(step: string, run: () => Promise<StepOutput> | StepOutput, options?: { label?: string }): Promise<StepCheckpoint | undefined>;
  /**
   * Runs one paid call within the task's budget (PROTOCOL.md §Budgets and
   * side effects): reserves `estimate` (the call's ceiling: give the model
   * the same max tokens; absent fields count 0), awaits `call()`, settles
   * the `usage` it resolves with (releasing the rest of the reservation)
   * and resolves to its `value`. A call that throws settles nothing used,
   * releasing the whole reservation, and its error is rethrown. `name`
   * names the call within the attempt (`"draft"`, `"draft-retry-1"`): the
   * reservation's id is `"<attempt>:<name>"`, so a resent report is a
   * duplicate and a new attempt reserves afresh. A refused reservation
   * rejects with `OverBudget`, and the call is not made. `options.step`
   * charges the reservation to a step of the plan.
   *
   * @example
   * const draft = await job.spend("draft", { tokens: 4000, costCents: 8 }, async () => {
   *   const r = await llm.complete(prompt, { maxTokens: 4000, signal: job.signal });
   *   return { value: r.text, usage: { tokens: r.usage.total, costCents: price(r.usage), toolCalls: 1 } };
   * }, { step: "draft" });
   */
  spend<T>(name: string, estimate: Partial<BudgetAmount>, call: () => Promise<SpendAnswer<T>> | SpendAnswer<T>, options?: { step?: string }): Promise<T>;
  /**
   * Makes one external write at most once for the task: `write(key)` gets
   * `key(step, action)` (the same in every attempt: pass it to the outside
   * system, which must deduplicate by it) and resolves to the id of what
   * it wrote. The write is then recorded under `(step, action)`, and the
   * id recorded first is the answer: a write made again after a crash
   * between the write and its record answers with the first one's id. A
   * write the claimed task already records is not made again. A record
   * the server refuses rejects with a `FatalError` naming its reason.
   *
   * @example
   * const ticketId = await job.effect("publish", "create-ticket", (key) => tracker.create({ title, idempotencyKey: key }).then((t) => t.id));
   */
  effect(step: string, action: string, write: (key: string) => Promise<string> | string): Promise<string>;
  /** The resource id the claimed task records under `(step, action)`, if any: what `job.effect` would answer without writing. */
  recordedEffect(step: string, action: string): string | undefined;
  /**
   * The writer on the task's output stream `stream` (1 to 64 of `a-z`,
   * `0-9`, `-`, `_`; else a `TypeError` naming `stream`). The same name
   * gives the same writer.
   *
   * @example
   * const draft = job.output("draft");
   * for await (const token of model.stream(prompt, { signal: job.signal })) await draft.write(token);
   */
  output(stream: string): Output;
  /** Reports progress, an integer 0 to 100 that only rises, and renews the lease. */
  progress(percent: number, cursor?: string): Promise<void>;
  /**
   * Ends the attempt with the task waiting for a person's decision on the
   * artifact. Return from the handler after it.
   *
   * @example
   * if (job.task.decision === undefined) { await job.hold(ref, hash, "Publish this?"); return; }
   */
  hold(artifactRef: string, artifactHash: string, question?: string): Promise<void>;
  /** `"<taskId>:<step>:<action>"`: an idempotency key for an external write, the same in every attempt. */
  key(step: string, action: string): string;
  /**
   * Submits once, then polls with bounded exponential backoff; resolves
   * to the value of the first `{done: true}` poll.
   *
   * @example
   * const text = await job.vendor({
   *   step: "ocr",
   *   submit: (key, signal) => ocr.create({ url, idempotencyKey: key }, { signal }).then((r) => r.id),
   *   poll: async (id, signal) => { const r = await ocr.get(id, { signal }); return r.done ? { done: true, value: r.text } : { done: false }; },
   *   lookup: (key) => ocr.findByKey(key).then((r) => r?.id),
   * });
   */
  vendor<H, T>(options: VendorOptions<H, T>): Promise<T>;
}

/**
 * A handler: resolves to the result (the task succeeds) or to
 * `budgetExhausted(…)` (the task fails `budget-exhausted`, keeping the
 * partial result), or throws (`RetryableError`, `FatalError`, or
 * anything, classified by `classifyError`). After `job.hold(…)` its
 * return value is ignored.
 */
export type Handler = (job: Job) => Promise<JobResult | BudgetExhausted | void> | JobResult | BudgetExhausted | void;

/**
 * What a handler returns when the budget ran out: reported as `exhaust`,
 * the attempt's last report. The task ends `failed` with the error
 * `budget-exhausted` (`cancelled` after a cancel), keeping `partial`
 * (both fields or none; a blank one is a `TypeError` naming it) as its
 * result, so the work done is not lost.
 *
 * @example
 * try { summary = await job.spend("summary", { tokens: 2000 }, summarise); }
 * catch (e) { if (e instanceof OverBudget) return budgetExhausted({ resultRef: draftRef, resultHash: draftHash }); throw e; }
 */
export declare function budgetExhausted(partial?: JobResult): BudgetExhausted;

export declare class Worker {
  constructor(options: WorkerOptions);
  readonly name: string;
  /** Registers the handler of a task kind (`""`: tasks created without one). At most 32 kinds. */
  handle(kind: string, handler: Handler): this;
  /** Claims and runs work until `shutdown()`. Rejects with a `WorkerError` when the server refuses the worker itself. */
  run(): Promise<void>;
  /**
   * Stops claiming, waits up to `graceMs` (default 10,000) for running
   * jobs (a claim in flight gets up to 1 s of it to come back), then
   * fires the signal of each left (`shutdown`) and hands its task back
   * (`fail`, retryable, "worker shut down").
   */
  shutdown(graceMs?: number): Promise<void>;
}

/** `new Worker(options)`. */
export declare function createWorker(options: WorkerOptions): Worker;

/** Thrown by a handler: the failure is passing; another attempt runs while attempts are left. */
export declare class RetryableError extends Error {
  readonly code: "retryable";
}

/** Thrown by a handler: another attempt would fail the same way; the task fails. */
export declare class FatalError extends Error {
  /** `fatal`, or a subclass's: `submit-unknown`, a `StepError`'s reason, an `OutputError`'s server code, an `OverBudget`'s reason. */
  readonly code: string;
}

/** Why the server refused a step report (PROTOCOL.md §Steps). */
export type StepRefusal = "unknown-step" | "no-plan" | "step-conflict";

/** `job.step`'s refusal by the server; `code` is its reason, `step` the step's name. Final. */
export declare class StepError extends FatalError {
  constructor(code: StepRefusal, step: string, message: string);
  readonly code: StepRefusal;
  readonly step: string;
}

/**
 * `job.spend`'s refused reservation; the call was not made. `code` and
 * `reason` are the server's reason: `over-budget` (the budget cannot
 * cover it), or `not-running` (a cancel was asked), `reservation-conflict`,
 * `unknown-step`, `ledger-full`, `stale-attempt`. Final.
 */
export declare class OverBudget extends FatalError {
  constructor(reservation: string, reason: string);
  readonly code: string;
  readonly reason: string;
  /** The reservation's id, `"<attempt>:<name>"`. */
  readonly reservation: string;
}

/** A chunk of output the server refused for good (`chunk-conflict`, `output-gap`, a 400, …); `code` is the server's. Final. */
export declare class OutputError extends FatalError {
  constructor(code: string, stream: string, message: string, status?: number);
  readonly code: string;
  readonly stream: string;
  /** The HTTP status, when the server answered. */
  readonly status?: number;
}

/** `job.vendor`'s refusal to repeat a submit whose outcome is unknown; `key` is its idempotency key. Final. */
export declare class SubmitUnknownError extends FatalError {
  constructor(message: string, key: string, options?: ErrorOptions);
  readonly code: "submit-unknown";
  readonly key: string;
}

/** The reason of a fired `job.signal`; its `name` is `"AbortError"`, as Node's aborts are. */
export declare class CancelledError extends Error {
  constructor(code: CancelCode);
  readonly code: CancelCode;
}

/** A failure of the worker rather than of a job. */
export declare class WorkerError extends Error {
  constructor(code: string, message: string, status?: number);
  readonly code: string;
  /** The HTTP status, when the server answered. */
  readonly status?: number;
}

/**
 * `"retryable"` for a `RetryableError`, a network error, a timeout or an
 * HTTP status 408, 429 or 5xx (`status`, `statusCode` or
 * `response.status`); `"final"` for a `FatalError`, any other status and
 * anything else.
 */
export declare function classifyError(err: unknown): "retryable" | "final";

/** Whether a submit that threw may still have reached the vendor (a network error after connecting, a timeout, a 5xx). */
export declare function isOutcomeUnknown(err: unknown): boolean;

/// <reference lib="esnext.disposable" />
// Types of the `taskwire` package. Hand-written so that the public surface
// is precise (discriminated unions, string-literal reasons, no `any`);
// tests/js/types.test.ts compiles against it with `tsc --noEmit` in CI.

/**
 * Where a task is in its life (PROTOCOL.md, Wire types and Lifecycle). The
 * first five are seed 000's; the terminal ones are `TerminalState`.
 */
export type State =
  | "queued"
  | "running"
  | "succeeded"
  | "failed"
  | "expired"
  /** A cancel was asked while a worker holds the task; it must acknowledge. */
  | "cancelling"
  /** The worker said the cancel cannot take effect: still live. */
  | "cancel_ineffective"
  | "cancelled"
  /** Held for a person's decision on an artifact. */
  | "waiting_approval"
  /** The worker's lease lapsed: the work may still be running. */
  | "unknown"
  /** The execution deadline passed. */
  | "timed_out";

/** The states a task never leaves (one notification each). */
export type TerminalState = "succeeded" | "failed" | "expired" | "cancelled" | "timed_out";

// ---- executor events (signed callbacks) -----------------------------------
// Each may carry `attempt`, the fencing token: an event of another attempt
// than the task's current one is `stale-attempt` and changes nothing.

/** A worker picked the task up. */
export interface StartEvent {
  type: "start";
  /** When it happened (ms, finite, ≥ 0). */
  atMs: number;
  worker: string;
  /** The attempt this start opens: the task's `attempts + 1`. */
  attempt?: number;
  /** Opens a lease this long (ms): the attempt is alive until `atMs + leaseMs`. */
  leaseMs?: number;
}

/** The running attempt reports progress (and renews its lease). */
export interface ProgressEvent {
  type: "progress";
  atMs: number;
  /** Integer percent, 0 to 100. */
  progress: number;
  /** The executor's own resume point (opaque). */
  cursor: string;
  attempt?: number;
}

/** The running attempt produced its result. */
export interface SucceedEvent {
  type: "succeed";
  atMs: number;
  /** Where the result is stored (not blank). */
  resultRef: string;
  /** Content hash of the result (not blank): same hash = same result. */
  resultHash: string;
  attempt?: number;
}

/** The running attempt failed. */
export interface FailEvent {
  type: "fail";
  atMs: number;
  error: string;
  /** Whether another attempt may help. */
  retryable: boolean;
  attempt?: number;
}

/** The attempt is alive: renews its lease, never a version on its own. */
export interface HeartbeatEvent {
  type: "heartbeat";
  atMs: number;
  attempt?: number;
  /** A new lease length (ms); else the current one's. */
  leaseMs?: number;
}

/** The attempt pauses for a person's decision on an artifact. */
export interface HoldEvent {
  type: "hold";
  atMs: number;
  /** Where the artifact is (not blank). */
  artifactRef: string;
  /** Its content hash (not blank): a decision must name it. */
  artifactHash: string;
  /** What the person is asked. */
  question?: string;
  attempt?: number;
}

/** The executor stopped after a cancel request. */
export interface AckCancelEvent {
  type: "ack_cancel";
  atMs: number;
  attempt?: number;
}

/** The executor cannot stop the work. */
export interface CannotCancelEvent {
  type: "cannot_cancel";
  atMs: number;
  reason?: string;
  attempt?: number;
}

/** What an executor reports (signed callbacks). */
export type ExecutorEvent =
  | StartEvent
  | ProgressEvent
  | SucceedEvent
  | FailEvent
  | HeartbeatEvent
  | HoldEvent
  | AckCancelEvent
  | CannotCancelEvent;

// ---- people's events (POST …/cancel and …/decisions) ----------------------

/** A person asks to stop the task. */
export interface CancelEvent {
  type: "cancel";
  atMs: number;
  reason?: string;
  /** Who asked, as the server authenticated them (e.g. `tenant:acme`). */
  actor?: string;
}

/** What a person decides on a held artifact. */
export type Decision = "approve" | "request_changes" | "reject";

/** A person's decision on the held artifact. */
export interface DecideEvent {
  type: "decide";
  atMs: number;
  decision: Decision;
  /** The artifact decided on: must be the held one. */
  artifactHash: string;
  /** The task version the decision was made on: must be the current one. */
  version: number;
  reason?: string;
  /** Who decided, as the server authenticated them. */
  actor?: string;
}

/** What people ask of a task. */
export type PersonEvent = CancelEvent | DecideEvent;

// ---- system events (the server's sweepers) --------------------------------

/** The time to live ran out. */
export interface ExpireEvent {
  type: "expire";
  atMs: number;
}

/** The attempt's lease ran out (recorded at the lease's end). */
export interface LapseEvent {
  type: "lapse";
  atMs: number;
  attempt?: number;
}

/** An `unknown` task's grace period ran out (recorded when it did). */
export interface AbandonEvent {
  type: "abandon";
  atMs: number;
}

/** The execution deadline passed (recorded at `deadlineAtMs`). */
export interface TimeoutEvent {
  type: "timeout";
  atMs: number;
}

/** What the server records by itself. */
export type SystemEvent = ExpireEvent | LapseEvent | AbandonEvent | TimeoutEvent;

/** One report about a task, discriminated by `type`. */
export type TaskEvent = ExecutorEvent | PersonEvent | SystemEvent;

/** One change: the version it produced and the event that produced it. */
export interface HistoryEntry {
  version: number;
  event: TaskEvent;
}

/** A task's current fields, without history (what resume answers carry). */
export interface TaskView {
  id: string;
  state: State;
  /** Events at or after this time expire the task. */
  expiresAtMs: number;
  attempts: number;
  maxAttempts: number;
  /** Percent done in the current attempt (100 once succeeded). */
  progress: number;
  /** Number of changes so far. */
  version: number;
  /** Where the result is (also kept, for compensation, on a task cancelled after its work finished). */
  resultRef?: string;
  resultHash?: string;
  error?: string;
  /** The execution deadline, when the task has one: past it, `timed_out`. */
  deadlineAtMs?: number;
  /** How long an `unknown` task waits before it is re-queued (absent: it waits). */
  unknownGraceMs?: number;
  /** Attempts re-queued by a decision (they do not count against `maxAttempts`). */
  continuations?: number;
  /** The held artifact (of the last `hold`). */
  artifactRef?: string;
  artifactHash?: string;
  /** What the person was asked. */
  question?: string;
  /** The last decision on that artifact, the version it was made on, and why. */
  decision?: Decision;
  decisionVersion?: number;
  decisionReason?: string;
}

/** A task with its full history (`history[i].version === i + 1`). */
export interface Task extends TaskView {
  history: HistoryEntry[];
}

/** Input of `createTask` and `TaskBook.create`. */
export interface CreateTaskInput {
  /** Not blank. */
  id: string;
  /** Creation time (ms, finite, ≥ 0). */
  nowMs: number;
  /** Time to live (ms, finite, > 0). */
  ttlMs: number;
  /** Allowed starts, an integer ≥ 1. */
  maxAttempts: number;
  /** Execution deadline from `nowMs` (ms, finite, > 0): past it the task is `timed_out`. */
  deadlineMs?: number;
  /** How long an `unknown` task waits before it is re-queued (ms, finite, ≥ 0); none: it waits. */
  unknownGraceMs?: number;
  /** `false`: an `unknown` task is never re-queued automatically (default true). */
  autoRequeue?: boolean;
}

/** Why an event did or did not change a task. */
export type Reason =
  | "started"
  | "already-running"
  | "not-startable"
  | "progress"
  | "stale-progress"
  | "duplicate-progress"
  | "not-running"
  | "succeeded"
  | "requeued"
  | "failed"
  | "expired"
  | "duplicate-expire"
  | "duplicate-result"
  | "result-conflict"
  | "terminal-conflict"
  | "duplicate-callback"
  | "callback-conflict"
  // the lifecycle's (PROTOCOL.md §Lifecycle)
  | "stale-attempt"
  | "heartbeat"
  | "recovered"
  | "lease-lapsed"
  | "not-due"
  | "timed-out"
  | "duplicate-timeout"
  | "held"
  | "duplicate-hold"
  | "cancel-requested"
  | "cancelled"
  | "duplicate-cancel"
  | "cancel-acknowledged"
  | "cancel-ineffective"
  | "not-cancelling"
  | "succeeded-after-cancel"
  | "approved"
  | "changes-requested"
  | "rejected"
  | "stale-decision"
  | "duplicate-decision";

/** What an event did, and the task after it. */
export interface Transition<T extends TaskView = Task> {
  task: T;
  /** The task changed (version + 1, one history entry). */
  changed: boolean;
  /** The event repeated something already known. */
  duplicate: boolean;
  /** The task just became terminal: one notification is due. */
  notify: boolean;
  reason: Reason;
}

/** The current attempt's lease: operational, not versioned (a heartbeat moves it). */
export interface Lease {
  /** The attempt that holds it. */
  attempt: number;
  /** The attempt counts as alive strictly before this time. */
  expiresAtMs: number;
  /** How far each report extends it. */
  leaseMs: number;
}

/** `TaskBook.apply`'s answer; the task comes without history (O(1)). */
export interface CallbackResult extends Transition<TaskView> {
  /** The callback id was already applied to this task with this event. */
  duplicateCallback: boolean;
  /** The current attempt's lease after the event, when one runs. */
  lease?: Lease;
}

/** One step `TaskBook.sweepDue` took. */
export interface Swept {
  taskId: string;
  /** The task's state after the step. */
  state: State;
  /** `lease-lapsed`, `requeued`, `failed`, `cancelled` or `timed-out` (or `expired` when the TTL came first). */
  reason: Reason;
}

/** Nothing new since the cursor. */
export interface CaughtUpAnswer {
  mode: "caught-up";
  events: [];
  task?: TaskView;
}

/** The entries after the cursor, oldest first. */
export interface DeltaAnswer {
  mode: "delta";
  events: HistoryEntry[];
  task?: TaskView;
}

/** The whole current task. */
export interface SnapshotAnswer {
  mode: "snapshot";
  events: [];
  task: TaskView;
}

/** A resume answer, discriminated by `mode`. */
export type ResumeAnswer = CaughtUpAnswer | DeltaAnswer | SnapshotAnswer;

/** The resume modes. */
export type ResumeMode = ResumeAnswer["mode"];

/** Proof of a result hand-over under an idempotency key. */
export interface Receipt {
  taskId: string;
  resultRef: string;
  resultHash: string;
  idempotencyKey: string;
  deliveredAtMs: number;
}

/** Why a delivery did or did not happen. */
export type DeliveryReason = "delivered" | "duplicate-delivery" | "key-reused-for-other-task" | "not-succeeded";

/** `TaskBook.deliverResult`'s answer. */
export type Delivery =
  | { ok: true; duplicate: false; reason: "delivered"; receipt: Receipt }
  | { ok: true; duplicate: true; reason: "duplicate-delivery"; receipt: Receipt }
  | { ok: false; duplicate: true; reason: "key-reused-for-other-task"; receipt?: undefined }
  | { ok: false; duplicate: false; reason: "not-succeeded"; receipt?: undefined };

/** A task reached a terminal state ("go and look": no result inside). */
export interface Notification {
  taskId: string;
  state: TerminalState;
  atMs: number;
}

/** Why part of a resume answer was not applied. */
export type RejectReason =
  | "duplicate"
  | "gap"
  | "diverged"
  | "stale-snapshot"
  | "stale-answer"
  | "regressed"
  | "wrong-task"
  | "no-base";

/** One part of an answer that was not applied. */
export interface Rejection {
  version: number;
  reason: RejectReason;
}

/** What `TaskMirror.merge` did. */
export interface MergeOutcome {
  mode: ResumeMode;
  /** The local task changed: its version rose, or it became known. */
  changed: boolean;
  /** Versions applied, in order (a snapshot applies its version). */
  applied: number[];
  rejected: Rejection[];
  /** `"snapshot"`: the answer could not be trusted; ask for a snapshot. */
  next: "none" | "snapshot";
}

/** The persisted form of a mirror. */
export interface MirrorJSON {
  taskId: string;
  task: TaskView | null;
}

/**
 * Stable error codes: the package's own, and the server's (PROTOCOL.md) as
 * `createTask` and `deliver` pass them on; an HTTP error without one of
 * these is `http-<status>`. Generated from `wasm/src/error.rs` (`cargo test
 * -p taskwire-wasm` fails when this differs).
 */
export type ErrorCode =
  | "invalid-request"
  | "not-found"
  | "task-exists"
  | "not-initialized"
  | "internal"
  | "network"
  | "unauthorized"
  | "forbidden"
  | "stopped"
  | "method-not-allowed"
  | "not-succeeded"
  | "payload-too-large"
  | "idempotency-key-reused"
  | "key-reused-for-other-task"
  | "overloaded"
  | `http-${number}`;

/** Every taskwire error: an `Error` with a stable `code`. */
export class TaskwireError extends Error {
  readonly name: "TaskwireError";
  readonly code: ErrorCode;
  /** The HTTP status, for errors that came from one. */
  readonly status?: number;
  constructor(code: ErrorCode, message: string, status?: number);
}

/** Where the .wasm comes from, for `init`. */
export type WasmSource = string | URL | Request | Response | BufferSource | WebAssembly.Module;

/**
 * Instantiates the WebAssembly module (browsers, workers, bundlers); once,
 * before any other call. Idempotent. In Node it is done on import.
 */
export function init(source?: WasmSource): Promise<void>;
export default init;

/** Instantiates synchronously from bytes or a compiled module. */
export function initSync(source: BufferSource | WebAssembly.Module): void;

/** A queued task at version 0. Throws `TaskwireError` on invalid input. */
export function createTask(input: CreateTaskInput): Task;

/** Applies one event to a task, as the seed's pure transition. */
export function applyEvent(task: Task, event: TaskEvent): Transition<Task>;

/** Expires a task now (recorded at `expiresAtMs`). */
export function expireTask(task: Task): Transition<Task>;

/** Options of `TaskBook`. */
export interface TaskBookOptions {
  /** Gaps of at most this many versions get a delta (default 8). */
  retentionVersions?: number;
}

/**
 * Many tasks with the three idempotency layers (callback ids, result
 * hashes, delivery keys), the notification outbox and cursor resume. Tasks
 * live inside WebAssembly: O(1) per event.
 */
export class TaskBook {
  constructor(options?: TaskBookOptions);
  /** Creates a task; an existing id throws `task-exists`. */
  create(input: CreateTaskInput): Task;
  /** The task with its history. */
  get(id: string): Task | undefined;
  /**
   * Applies an event, at most once per callback id: an executor's, a
   * person's (with the `actor` the caller authenticated) or a sweeper's.
   */
  apply(taskId: string, event: TaskEvent, callbackId?: string): CallbackResult;
  /** Answers a client that last saw version `cursor`. */
  resume(taskId: string, cursor: number): ResumeAnswer;
  /** The same answer as JSON text, ready to send over HTTP. */
  resumeJson(taskId: string, cursor: number): string;
  /** Hands a result over, at most once per key. */
  deliverResult(taskId: string, key: string, nowMs: number): Delivery;
  /** Expires every live task whose TTL has passed; returns their ids. */
  expireDue(nowMs: number): string[];
  /**
   * Takes every lifecycle step due by `nowMs`: a lapsed lease makes its
   * task `unknown`, a grace period that ran out re-queues or fails it, a
   * passed execution deadline times it out. Each step is recorded at the
   * time it fell due; run it after `expireDue`, on the same timer.
   */
  sweepDue(nowMs: number): Swept[];
  /** Takes every notification out of the outbox. */
  drainNotifications(): Notification[];
  /** The number of tasks. */
  readonly size: number;
  /** Releases the WebAssembly memory now. */
  free(): void;
}

/**
 * One task as a client knows it. Merges resume answers through the same
 * reducer as the server and never moves version or progress backwards.
 *
 * @example
 * const mirror = new TaskMirror(id);
 * const outcome = mirror.mergeJson(await response.text());
 * if (outcome.next === "snapshot") { ... ask for ?snapshot=1 ... }
 */
export class TaskMirror {
  constructor(taskId: string);
  static fromSnapshot(task: TaskView): TaskMirror;
  /** Restores what `toJSON()` produced (object or JSON text). */
  static fromJSON(value: MirrorJSON | string): TaskMirror;
  merge(answer: ResumeAnswer): MergeOutcome;
  /** Merges an answer given as JSON text: one crossing, no JSON.parse. */
  mergeJson(json: string): MergeOutcome;
  readonly task: TaskView | undefined;
  readonly taskId: string;
  /** The cursor to resume from (0 when nothing is known). */
  readonly version: number;
  readonly state: State | undefined;
  readonly progress: number;
  toJSON(): MirrorJSON;
  free(): void;
}

// ---- the browser client --------------------------------------------------

/** Options of `TaskClient`. */
export interface TaskClientOptions {
  /** The backend, e.g. `"http://127.0.0.1:8080"` (http:// or https://). */
  baseUrl: string;
  /** Sent on every request (e.g. `Authorization`); never put in the URL. */
  headers?: Record<string, string>;
  /** An injected `fetch` (tests, proxies); `globalThis.fetch` otherwise. */
  fetch?: (input: string, init: RequestInit) => Promise<Response>;
  /** Exponential backoff with full jitter: `random(0, min(maxMs, initialMs·2^n))`. */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Save each watched task in `localStorage` (`true`: prefix `"taskwire:"`, or your prefix), so a new page load resumes by delta. */
  persist?: boolean | string;
  /** `"long-poll"` (default) or `"sse"` (falls back to long-poll behind a buffering proxy). */
  transport?: "long-poll" | "sse";
  /** How long the server may hold a long-poll (ms, ≤ 30,000; default 25,000). */
  waitMs?: number;
}

/** Input of `TaskClient.createTask` (PROTOCOL.md, "Create a task"). */
export interface CreateTaskRequest {
  ttlMs: number;
  maxAttempts: number;
  kind?: string;
  input?: unknown;
  /** Execution deadline from creation (ms, > 0): past it the task is `timed_out`. */
  deadlineMs?: number;
  /** How long an `unknown` task waits before it is re-queued (ms, ≥ 0; the server's default otherwise). */
  unknownGraceMs?: number;
  /** `false`: an `unknown` task is never re-queued automatically. */
  autoRequeue?: boolean;
}

/** Options of `TaskClient.cancel`. */
export interface CancelOptions {
  /** Why, recorded with the cancel. */
  reason?: string;
}

/** Options of `TaskClient.decide`: the decision and what it was made on. */
export interface DecideOptions {
  decision: Decision;
  /** The held artifact's hash (the task's `artifactHash`). */
  artifactHash: string;
  /** The task version the decision was made on (the task's `version`). */
  version: number;
  reason?: string;
}

/**
 * The server's answer to a cancel or a decision. `changed: false` says why
 * nothing happened (`duplicate-cancel`, `stale-decision`,
 * `terminal-conflict`, …).
 */
export interface ActionAnswer {
  changed: boolean;
  duplicate: boolean;
  reason: Reason;
  /** The task as it is now. */
  task: TaskView;
}

/** A task as the server returns it on creation. */
export interface CreatedTask extends TaskView {
  kind?: string;
  input?: unknown;
}

/** What `onUpdate` receives: only when the version rises. */
export interface WatchUpdate {
  task: TaskView;
  mode: ResumeMode;
  /** Versions applied (a snapshot applies its version). */
  applied: number[];
  /** The history entries applied, oldest first (empty for a snapshot). */
  events: HistoryEntry[];
  /** Everything refused since the previous update (stale, duplicate, …). */
  rejected: Rejection[];
}

/** What `onReject` receives: an answer refused without the version rising. */
export interface WatchRejection {
  mode: ResumeMode;
  rejected: Rejection[];
  /** The version the watch holds (unchanged). */
  version: number;
}

/** Connection state, for an indicator. */
export interface WatchStatus {
  state: "connecting" | "live" | "reconnecting" | "offline" | "closed";
  /** Consecutive failures, when reconnecting. */
  attempt?: number;
  /** When the next attempt starts, when reconnecting. */
  retryInMs?: number;
  error?: string;
}

/** Options of `TaskClient.watch`. */
export interface WatchOptions {
  /** A version to start from when nothing is persisted. */
  cursor?: number;
  onUpdate?: (update: WatchUpdate) => void;
  onStatus?: (status: WatchStatus) => void;
  onReject?: (rejection: WatchRejection) => void;
}

/** Error codes of a watch that ended without a terminal task. */
export type WatchErrorCode = "unauthorized" | "forbidden" | "not-found" | "stopped";

/** A running watch: see `TaskClient.watch`. */
export interface Watch {
  /** The task as known (no history), or undefined before the first answer. */
  readonly task: TaskView | undefined;
  /** The version known: the cursor of the next request. */
  readonly version: number;
  readonly status: WatchStatus;
  /**
   * Resolves with the terminal task. Rejects with a `TaskwireError` whose
   * code is a `WatchErrorCode` (and `status` for HTTP errors).
   */
  readonly done: Promise<TaskView>;
  /** Aborts the request in flight and cancels timers now. */
  stop(): void;
  /** `using watch = client.watch(id)`: stops the watch and frees its memory at the end of the scope. */
  [Symbol.dispose](): void;
}

/**
 * Follows tasks on any backend that speaks PROTOCOL.md.
 *
 * @example
 * const client = new TaskClient({ baseUrl: "https://api.example.com", headers: { Authorization: "Bearer demo" }, persist: true });
 * const task = await client.createTask({ ttlMs: 3_600_000, maxAttempts: 3, kind: "summary" });
 * const watch = client.watch(task.id, { onUpdate: (u) => render(u.task) });
 * const finished = await watch.done;
 */
export class TaskClient {
  constructor(options: TaskClientOptions);
  /** POST /v1/tasks. With `idempotencyKey`, safe to retry (and retried on network errors). */
  createTask(request: CreateTaskRequest, options?: { idempotencyKey?: string }): Promise<CreatedTask>;
  /** POST /v1/tasks/{id}/deliveries: the same key returns the same receipt. */
  deliver(taskId: string, key: string): Promise<Receipt>;
  /**
   * POST /v1/tasks/{id}/cancel: `cancelled` at once without a worker,
   * `cancelling` while one runs. Safe to retry (and retried on network
   * errors, 429 and 5xx): a repeat is `duplicate-cancel`.
   */
  cancel(taskId: string, options?: CancelOptions): Promise<ActionAnswer>;
  /**
   * POST /v1/tasks/{id}/decisions: approve, request changes to, or reject
   * the held artifact. Safe to retry: a repeat is `duplicate-decision`.
   *
   * @example
   * const { task } = update; // state "waiting_approval"
   * await client.decide(task.id, { decision: "approve", artifactHash: task.artifactHash!, version: task.version });
   */
  decide(taskId: string, options: DecideOptions): Promise<ActionAnswer>;
  /** Follows a task until it is terminal, stopped, or refused. */
  watch(taskId: string, options?: WatchOptions): Watch;
}

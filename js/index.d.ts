/// <reference lib="esnext.disposable" />
// Types of the `taskwire` package. Hand-written so that the public surface
// is precise (discriminated unions, string-literal reasons, no `any`);
// tests/js/types.test.ts compiles against it with `tsc --noEmit` in CI.

// The wire types (states, events, the task, reasons) are in wire.d.ts.
export type * from "./wire.js";
import type { CreateTaskInput, Decision, HistoryEntry, Reason, State, Task, TaskEvent, TaskView, TerminalState } from "./wire.js";

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
  /** What the executor does now (PROTOCOL.md §Workers). */
  next: "continue" | "cancel" | "stop";
  /** The task's current attempt. */
  attempt: number;
}

/** One step `TaskBook.sweepDue` took. */
export interface Swept {
  taskId: string;
  /** The task's state after the step. */
  state: State;
  /** `lease-lapsed`, `requeued`, `failed`, `cancelled` or `timed-out` (or `expired` when the TTL came first). */
  reason: Reason;
}

/**
 * The identity of a server's history (PROTOCOL.md §Epoch): an opaque,
 * non-blank string, compared for equality only. Versions of two epochs
 * are not comparable: a store that is new, or restored from a backup,
 * has another epoch.
 */
export type Epoch = string;

/** Nothing new since the cursor. */
export interface CaughtUpAnswer {
  mode: "caught-up";
  events: [];
  task?: TaskView;
  /** The history the answer comes from (absent from backends that send none). */
  epoch?: Epoch;
}

/** The entries after the cursor, oldest first. */
export interface DeltaAnswer {
  mode: "delta";
  events: HistoryEntry[];
  task?: TaskView;
  epoch?: Epoch;
}

/** The whole current task. */
export interface SnapshotAnswer {
  mode: "snapshot";
  events: [];
  task: TaskView;
  epoch?: Epoch;
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
  | "no-base"
  /** Not a snapshot, from another epoch than the mirror's: a snapshot is asked for. */
  | "other-epoch"
  /** A batch answer about another batch than the watch's. */
  | "wrong-batch";

/**
 * Why a snapshot replaced the task although it may be older:
 * `epoch-changed`, the server's history is another one (a new or
 * restored store) and the mirror started over from its snapshot.
 */
export type UpdateReason = "epoch-changed";

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
  /** Set when the mirror started over on another epoch. */
  reason?: UpdateReason;
}

/** The persisted form of a mirror. */
export interface MirrorJSON {
  taskId: string;
  task: TaskView | null;
  /** The epoch the task belongs to, once an answer told it. */
  epoch?: Epoch;
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
  | "token-expired"
  | "browser-token-required"
  | "forbidden"
  | "right-not-granted"
  | "tenant-token-required"
  | "stopped"
  | "method-not-allowed"
  | "not-succeeded"
  | "request-timeout"
  | "payload-too-large"
  | "idempotency-key-reused"
  | "key-reused-for-other-task"
  | "overloaded"
  | "create-rate-limited"
  | "watch-quota"
  | "open-task-quota"
  | "watch-limit"
  | "connection-limit"
  | "storage-unavailable"
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

/**
 * Whether a backend holds a long-poll (PROTOCOL.md §Resume): `waitMs` > 0,
 * the answer's `mode` is `caught-up`, what it follows is `live`, and the
 * request's `epoch` (`askedEpoch`; undefined when it sent none) is the
 * store's `epoch`. A request from another epoch is answered at once.
 */
export function worthHolding(request: {
  waitMs: number;
  mode: "caught-up" | "delta" | "snapshot";
  live: boolean;
  askedEpoch?: string;
  epoch: string;
}): boolean;

/**
 * Which answer a batch's follower at `cursor` gets from a batch at cursor
 * `seq` (PROTOCOL.md §Follow a batch): a snapshot when `snapshot`, at 0 or
 * past `seq`; caught-up at `seq`; else a delta.
 */
export function planBatch(seq: number, cursor: number, snapshot?: boolean): "snapshot" | "caught-up" | "delta";

/**
 * Checks a live-output stream name (PROTOCOL.md §Live output): 1 to 64
 * characters of `a-z`, `0-9`, `-`, `_`. Throws an `invalid-request`
 * `TaskwireError` naming `field` (default `"stream"`).
 */
export function checkStreamName(name: string, field?: string): void;

/** A chunk an executor appends: the attempt that wrote it, where it starts (UTF-16 units), its text. */
export interface OutputChunk {
  attempt: number;
  offset: number;
  text: string;
}

/** core's judgement of one append (PROTOCOL.md §Live output › Append). */
export interface OutputAppended {
  reason: "appended" | "duplicate-chunk" | "chunk-conflict" | "output-gap" | "stale-attempt" | "not-started" | "output-closed";
  /** `appended` or `duplicate-chunk`: what an executor treats as delivered. */
  accepted: boolean;
  /** The text the stream gained (empty unless `appended`), at `offset`. */
  added: string;
  offset: number;
  /** An older attempt's text was dropped first. */
  superseded: boolean;
  /** The attempt the stream holds now. */
  attempt: number;
  /** Where the next chunk must start. */
  expected: number;
}

/** What a follower lacks (core's `OutputLog::since`), and whether that is news to it. */
export interface OutputCatchup {
  attempt: number;
  offset: number;
  text: string;
  /** The task ended: nothing more will be appended. */
  complete: boolean;
  /** A text, a newer attempt or the end: a long-poll is answered at once. */
  news: boolean;
}

/**
 * One live-output stream as a backend keeps it (the newest attempt's
 * text), judged and served by core's `OutputLog` inside WebAssembly. Each
 * call says where the task is now: its current attempt, and whether it
 * is live (not terminal).
 */
export class OutputLog {
  constructor();
  /** Judges a chunk; errors (`invalid-request`) name `field.attempt`, `.offset`, `.text` (default field `"chunk"`). */
  append(chunk: OutputChunk, taskAttempt: number, live: boolean, field?: string): OutputAppended;
  /** What a follower holding `attempt`'s text up to `offset` lacks. */
  since(attempt: number, offset: number, taskAttempt: number, live: boolean): OutputCatchup;
  /** The attempt whose text the stream holds (0 before any). */
  readonly attempt: number;
  /** The stream's length in UTF-16 code units. */
  readonly units: number;
  /** Releases the wasm memory now. */
  free(): void;
  [Symbol.dispose](): void;
}

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
  /**
   * `apply` as a server receives a callback at `nowMs` on its own clock:
   * an event with `attempt` whose `atMs` is more than 5 minutes from
   * `nowMs` throws a `TaskwireError` whose code is `"clock-skew"` (a
   * server's code, outside `ErrorCode`, which lists what a page meets),
   * and leases run from `nowMs`.
   */
  applyAt(taskId: string, event: TaskEvent, callbackId: string | undefined, nowMs: number): CallbackResult;
  /**
   * The answer to a callback a server recognized as judged before without
   * the book (the very signed request sent again): `duplicate-callback`,
   * nothing changes, with the `next` the task calls for now.
   */
  redelivered(taskId: string, event: TaskEvent): CallbackResult;
  /** Answers a client that last saw version `cursor`. */
  resume(taskId: string, cursor: number): ResumeAnswer;
  /** The same answer as JSON text, ready to send over HTTP. */
  resumeJson(taskId: string, cursor: number): string;
  /**
   * The task's timeline (PROTOCOL.md §Timeline) as JSON text, written by
   * core: one entry per change, and a cancelled task's cancel report.
   */
  timelineJson(taskId: string): string | undefined;
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

/**
 * What a token must cover, as `TaskClient` asks a `TokenSource`: one task
 * (its watch, cancel, decisions and deliveries), one batch (its watch), or
 * nothing in particular (`{}`: creates, which need the backend's own
 * credential anyway).
 */
export type TokenScope = { tasks: [string]; batch?: undefined } | { batch: string; tasks?: undefined } | { tasks?: undefined; batch?: undefined };

/**
 * Gives `TaskClient` a fresh token: asked first, then on each expiry. A
 * function that declares a parameter is asked per scope, and its tokens
 * are kept per scope: one client follows many tasks that were each
 * authorised alone, and an expiry refreshes that scope only. One that
 * declares none is asked once for everything.
 *
 * @example
 * token: async ({ tasks, batch }) => (await (await fetch("/my-backend/taskwire-token", { method: "POST", body: JSON.stringify({ tasks, batch }) })).json()).token
 */
export type TokenSource = (scope: TokenScope) => string | Promise<string>;

/** Options of `TaskClient`. */
export interface TaskClientOptions {
  /** The backend, e.g. `"http://127.0.0.1:8080"` (http:// or https://). */
  baseUrl: string;
  /**
   * The credential, sent as `Authorization: Bearer …`: a token, or a
   * function returning a fresh one (sync or async). A page gets browser
   * tokens from its own backend (PROTOCOL.md, "Credentials"); with a
   * function, a 401 `token-expired` makes the client ask it once and
   * retry, so a watch outlives its tokens; a function with a parameter
   * is asked per scope (`TokenSource`). Not with an `Authorization`
   * entry in `headers`.
   */
  token?: string | TokenSource;
  /** Sent on every request; never put in the URL. */
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
  /**
   * One connection per browser: the tabs (and workers) of this origin
   * whose clients have the same `baseUrl` and the same share name (`true`
   * is the unnamed one) elect a leader with Web Locks. Only the leader
   * talks to the server, one watch per task however many tabs watch it;
   * the others get every update over a `BroadcastChannel`, and their
   * `watch()` behaves as their own would. When the leader's page closes,
   * another tab takes over at once and resumes each task by delta from
   * the version the tabs hold. The leader's options (token, headers,
   * transport, persistence) serve every tab, so its credential must
   * cover every task the group watches (a token function that takes its
   * scope is asked per task and batch, so it does): give clients that
   * differ in them different names. Where Web Locks or BroadcastChannel are
   * missing, each tab keeps its own connections, as without the option.
   *
   * @example
   * const client = new TaskClient({ baseUrl, token, shareAcrossTabs: true });
   */
  shareAcrossTabs?: boolean | string;
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
  /** The task's plan (PROTOCOL.md §Steps), with `steps`: fixed for its life. */
  workflowVersion?: string;
  /** The plan's step names, in order: 1 to 200, distinct, not blank. */
  steps?: string[];
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
/** What `cancelBatch` did (PROTOCOL.md §Cancel a batch). */
export interface BatchCancelAnswer {
  batchId: string;
  /** How many tasks the batch has. */
  size: number;
  /** How many tasks got a new version. */
  changed: number;
  /** Core's reasons over the tasks that were still open, counted. */
  reasons: Partial<Record<"cancelled" | "cancel-requested" | "duplicate-cancel", number>>;
  epoch: string;
}

export interface ActionAnswer {
  changed: boolean;
  duplicate: boolean;
  reason: Reason;
  /** The task as it is now. */
  task: TaskView;
  /** The server's history (absent from backends that send none). */
  epoch?: Epoch;
}

/** A task as the server returns it on creation: its view, with what it was created with. */
export type CreatedTask = TaskView & {
  kind?: string;
  input?: unknown;
  /** The server's history (absent from backends that send none). */
  epoch?: Epoch;
};

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
  /**
   * `"epoch-changed"` (with `mode: "snapshot"`): the server's history
   * changed (a new or restored store) and the watch started over from its
   * snapshot, which may be at a lower version than before.
   */
  reason?: UpdateReason;
}

/** What `onReject` receives: an answer refused without the version rising. */
export interface WatchRejection {
  mode: ResumeMode;
  rejected: Rejection[];
  /** The version the watch holds (unchanged). */
  version: number;
}

/** What a batch's `onReject` receives. */
export interface BatchRejection extends WatchRejection {
  /**
   * The task whose answer was refused (its `version` is the task's); absent
   * when the batch answer was refused whole (a replay, another epoch, another
   * batch: `version` is then the batch cursor held).
   */
  taskId?: string;
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

/** A batch as a whole, as `onProgress` receives it: reported when it changes. */
export interface BatchProgress {
  /** How many tasks the batch has. */
  size: number;
  /** How many of them are terminal. */
  terminal: number;
  /** How many are in each state (every state, zeros included). */
  counts: Record<State, number>;
  /** The mean of the tasks' `progress` (0 to 100), a terminal task counting 100. */
  progress: number;
}

/** The answer of `TaskClient.createBatch`: every task, in item order. */
export interface CreatedBatch {
  batchId: string;
  /** How many tasks it has. */
  size: number;
  /** The batch cursor now (1 right after the create): start a watch from it. */
  cursor: number;
  /** How many of its tasks are not terminal. */
  open: number;
  /** The server's history (absent from backends that send none). */
  epoch?: Epoch;
  /** The items' tasks, in item order, each as a single create answers it. */
  tasks: (CreatedTask & { batchId: string })[];
}

/** Options of `TaskClient.watchBatch`. */
export interface BatchWatchOptions {
  /**
   * The batch cursor to start from, with `tasks`, the tasks as known at it
   * (a `CreatedBatch`'s `cursor` and `tasks`): the first request is then a
   * held delta, not a snapshot. Both or neither; without them (and nothing
   * persisted) the first answer is a snapshot of the whole batch.
   */
  cursor?: number;
  tasks?: TaskView[];
  /** One task's version rose (its `task` says which). */
  onUpdate?: (update: WatchUpdate) => void;
  /** The batch's aggregate changed. */
  onProgress?: (progress: BatchProgress) => void;
  onStatus?: (status: WatchStatus) => void;
  onReject?: (rejection: BatchRejection) => void;
}

/** A running batch watch: see `TaskClient.watchBatch`. */
export interface BatchWatch {
  /** The tasks as known (no history), in item order; empty before the first answer. */
  readonly tasks: TaskView[];
  /** One task as known, by id. */
  task(id: string): TaskView | undefined;
  /** The batch cursor known: the cursor of the next request. */
  readonly cursor: number;
  readonly status: WatchStatus;
  /** The aggregate last reported; undefined before the batch is known. */
  readonly progress: BatchProgress | undefined;
  /**
   * Resolves with every task, in item order, once all are terminal. Rejects
   * with a `TaskwireError` whose code is a `WatchErrorCode` (and `status`
   * for HTTP errors).
   */
  readonly done: Promise<TaskView[]>;
  /** Aborts the request in flight and cancels timers now. */
  stop(): void;
  /** `using watch = client.watchBatch(id)`: stops the watch and frees its memory at the end of the scope. */
  [Symbol.dispose](): void;
}

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
 * Follows tasks on any backend that speaks PROTOCOL.md. May be made
 * before `init()` resolves (e.g. at module scope): its POSTs wait for an
 * `init()` in progress; `watch` needs it done (`not-initialized`).
 *
 * @example
 * const client = new TaskClient({
 *   baseUrl: "https://api.example.com",
 *   // A browser token from the page's own backend, asked again when it expires.
 *   token: async () => (await (await fetch("/my-backend/taskwire-token")).json()).token,
 *   persist: true,
 * });
 * const task = await client.createTask({ ttlMs: 3_600_000, maxAttempts: 3, kind: "summary" });
 * const watch = client.watch(task.id, { onUpdate: (u) => render(u.task) });
 * const finished = await watch.done;
 */
export class TaskClient {
  constructor(options: TaskClientOptions);
  /** POST /v1/tasks. With `idempotencyKey`, safe to retry (and retried on network errors). */
  createTask(request: CreateTaskRequest, options?: { idempotencyKey?: string }): Promise<CreatedTask>;
  /**
   * POST /v1/batches: 1 to 1,000 tasks in one call, created whole or not at
   * all. With `idempotencyKey`, safe to retry (and retried on network
   * errors, 429 and 5xx); a bad item is `invalid-request` naming it
   * (`body.items[3].ttlMs: …`).
   */
  createBatch(items: CreateTaskRequest[], options?: { idempotencyKey?: string }): Promise<CreatedBatch>;
  /** POST /v1/tasks/{id}/deliveries: the same key returns the same receipt. */
  deliver(taskId: string, key: string): Promise<Receipt>;
  /**
   * POST /v1/tasks/{id}/cancel: `cancelled` at once without a worker,
   * `cancelling` while one runs. Safe to retry (and retried on network
   * errors, 429 and 5xx): a repeat is `duplicate-cancel`.
   */
  cancel(taskId: string, options?: CancelOptions): Promise<ActionAnswer>;
  /**
   * POST /v1/batches/{id}/cancel: every task of the batch not yet ended,
   * each as `cancel` would (PROTOCOL.md §Cancel a batch). A token
   * function is asked for `{batch}`: a browser token whose `batch` claim
   * names the batch and grants `cancel`. Safe to retry.
   */
  cancelBatch(batchId: string, options?: CancelOptions): Promise<BatchCancelAnswer>;
  /**
   * POST /v1/tasks/{id}/decisions: approve, request changes to, or reject
   * the held artifact. Safe to retry: a repeat is `duplicate-decision`.
   *
   * @example
   * const { task } = update;
   * if (task.state === "waiting_approval") {
   *   await client.decide(task.id, { decision: "approve", artifactHash: task.artifactHash, version: task.version });
   * }
   */
  decide(taskId: string, options: DecideOptions): Promise<ActionAnswer>;
  /** Follows a task until it is terminal, stopped, or refused. */
  watch(taskId: string, options?: WatchOptions): Watch;
  /**
   * Follows every task of a batch over one held request (long-poll or SSE,
   * as `transport` says) until all are terminal, stopped, or refused.
   *
   * @example
   * const batch = await client.createBatch(items, { idempotencyKey: "run-7" });
   * const watch = client.watchBatch(batch.batchId, {
   *   cursor: batch.cursor, tasks: batch.tasks, // start by delta, from the create
   *   onUpdate: ({ task }) => renderRow(task),
   *   onProgress: ({ terminal, size, progress }) => bar(terminal, size, progress),
   * });
   * const all = await watch.done; // every task, terminal, in item order
   */
  watchBatch(batchId: string, options?: BatchWatchOptions): BatchWatch;
  /**
   * Stops every watch this client started (their `done` rejects with code
   * `stopped`), frees their memory and, with `shareAcrossTabs`, leaves the
   * tab group (its locks and channel). POSTs in flight finish; later
   * calls throw `stopped`.
   */
  dispose(): void;
  /** `using client = new TaskClient(…)`: `dispose()` at the end of the scope. */
  [Symbol.dispose](): void;
}

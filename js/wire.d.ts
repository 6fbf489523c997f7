// The wire types of the `taskwire` package: the JSON shapes of
// taskwire-core (PROTOCOL.md §Wire types): states, events, the task and
// its history, the create input, reasons, a batch's answer. Hand-written,
// re-exported by index.d.ts (which has the API); checked by
// tests/js/types.test.ts.

import type { Epoch, ResumeAnswer, ResumeMode } from "./index.js";

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
  /** The first attempt's plan (PROTOCOL.md §Steps), with `steps`; another plan than the task's is `plan-conflict`. */
  workflowVersion?: string;
  /** The plan's step names, in order. */
  steps?: string[];
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

/** What a step used, as its executor reports it (the step's own totals). */
export interface StepUsage {
  tokens: number;
  costCents: number;
  toolCalls: number;
}

/** One step of the task's plan moved (PROTOCOL.md §Steps). */
export interface StepEvent {
  type: "step";
  atMs: number;
  name: string;
  status: "running" | "succeeded" | "failed" | "skipped";
  label?: string;
  usage?: StepUsage;
  /** The checkpoint, `succeeded` only: where its output is, and its hash. */
  outputRef?: string;
  outputHash?: string;
  attempt?: number;
}

/** A step as the task keeps it, in plan order. */
export interface Step {
  name: string;
  status: "pending" | "running" | "succeeded" | "failed" | "skipped";
  /** The attempt that last moved it. */
  attempt?: number;
  label?: string;
  usage?: StepUsage;
  outputRef?: string;
  outputHash?: string;
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
  | CannotCancelEvent
  | StepEvent;

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

/** The fields of every task view, whatever its state (see `TaskView`). */
export interface TaskViewBase {
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
  /** The task's plan, fixed for its life (PROTOCOL.md §Steps); absent without one. */
  workflowVersion?: string;
  /** Its steps, in plan order; absent without a plan. */
  steps?: Step[];
}

/**
 * A task held for a person's decision: the artifact to decide on is
 * always there, so `decide` takes `task.artifactHash` as it is.
 */
export interface HeldTaskView extends TaskViewBase {
  state: "waiting_approval";
  artifactRef: string;
  artifactHash: string;
}

/** A task in any state but `waiting_approval`. */
export interface OtherTaskView extends TaskViewBase {
  state: Exclude<State, "waiting_approval">;
}

/**
 * A task's current fields, without history (what resume answers carry):
 * a union narrowed by `state`.
 *
 * @example
 * if (task.state === "waiting_approval") {
 *   await client.decide(task.id, { decision: "approve", artifactHash: task.artifactHash, version: task.version });
 * }
 */
export type TaskView = HeldTaskView | OtherTaskView;

/** A task with its full history (`history[i].version === i + 1`). */
export type Task = TaskView & {
  history: HistoryEntry[];
};

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
  /** The task's plan (PROTOCOL.md §Steps), with `steps`: fixed for its life. */
  workflowVersion?: string;
  /** The plan's step names, in order: 1 to 200, distinct, not blank. */
  steps?: string[];
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
  | "duplicate-decision"
  | "not-started"
  | "step-recorded"
  | "duplicate-step"
  | "step-conflict"
  | "unknown-step"
  | "no-plan"
  | "plan-conflict";

// ---- batches (PROTOCOL.md §Batches) ----------------------------------------

/**
 * One answer about a batch: `GET /v1/batches/{id}/resume`, and the `data`
 * of each `event: batch` message of `…/events`. `tasks` are per-task
 * resume answers, in item order: every task for `snapshot`, none for
 * `caught-up`, the tasks that changed after the cursor for `delta`.
 */
export interface BatchAnswer {
  batchId: string;
  mode: ResumeMode;
  /** The batch cursor after this answer: it grows by one or more per change. */
  cursor: number;
  /** How many tasks the batch has. */
  size: number;
  /** How many of them are not terminal. */
  open: number;
  tasks: ResumeAnswer[];
  /** The history the answer comes from (an element need not carry its own). */
  epoch?: Epoch;
}

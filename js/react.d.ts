// Types of `taskwire/react`: React hooks over a `TaskClient` from
// `taskwire/client`. React (18 or 19) is an optional peer dependency.
import type { BatchProgress, BatchWatchOptions, CreatedBatch, CreatedTask, CreateTaskRequest, TaskClient, TaskView, TaskwireError, WatchOptions, WatchStatus } from "./index.js";

/** The status of `useTask` and `useTaskBatch`: the watch's, or `"idle"` when no id is given. */
export type TaskHookStatus = WatchStatus | { state: "idle" };

/**
 * A task as `useTask` shows it: its view, with the `kind` and `input` it
 * was created with when the page gave them (`initial`, e.g.
 * `useCreateTask`'s task: resume answers do not carry them, so the hook
 * keeps them across updates).
 */
export type HookTask = TaskView & { kind?: string; input?: unknown };

/** What `useTask` returns; a new object only when something in it changed. */
export interface TaskState {
  /** The task as known, or undefined before the first answer. Its `version` only rises (but see `WatchUpdate.reason`). */
  task: HookTask | undefined;
  status: TaskHookStatus;
  /**
   * Why the watch ended without a terminal task: a `TaskwireError` whose
   * code is `unauthorized`, `forbidden` or `not-found` (or a bad task id).
   */
  error: TaskwireError | undefined;
}

/** Options of `useTask`. The latest listeners are called, without restarting the watch. */
export interface UseTaskOptions extends Pick<WatchOptions, "onUpdate" | "onReject"> {
  /**
   * The task as the page already holds it (e.g. `useCreateTask`'s), shown
   * until the watch knows a newer version: a watch learns nothing while
   * the task does not change. Read when the watch starts; ignored when
   * its `id` is not `taskId`.
   */
  initial?: HookTask;
}

/**
 * Follows one task while the component is mounted. The watch starts when
 * React subscribes and stops when it unsubscribes (unmount, StrictMode's
 * replay, another `taskId` or client), so it never leaves a held request
 * behind. `taskId` null or undefined watches nothing.
 *
 * @example
 * const { task, status, error } = useTask(client, taskId);
 * if (error) return <p>{error.code}</p>;
 * return <progress value={task?.progress ?? 0} max={100} title={status.state} />;
 */
export function useTask(client: Pick<TaskClient, "watch">, taskId: string | null | undefined, options?: UseTaskOptions): TaskState;

/** What `useTaskBatch` returns; a new object only when something in it changed. */
export interface TaskBatchState {
  /** The tasks as known (no history), in item order; empty before the first answer (unless `initial`). */
  tasks: readonly TaskView[];
  /** The batch's aggregate; undefined until the batch is known whole. */
  progress: BatchProgress | undefined;
  /**
   * The batch cursor `tasks` were read at (0 before the first answer). It
   * only rises, except when an epoch change starts the history over
   * (`WatchUpdate.reason`).
   */
  cursor: number;
  status: TaskHookStatus;
  /**
   * Why the watch ended before every task was terminal: a `TaskwireError`
   * whose code is `unauthorized`, `forbidden` or `not-found` (or a bad
   * batch id).
   */
  error: TaskwireError | undefined;
}

/** Options of `useTaskBatch`. The latest listeners are called, without restarting the watch. */
export interface UseTaskBatchOptions extends Pick<BatchWatchOptions, "onUpdate" | "onProgress" | "onReject"> {
  /**
   * The batch as the page created it (`createBatch`'s answer): shown at
   * once, and the watch starts from its cursor by a held delta rather
   * than a snapshot. Read when the watch starts; ignored when its
   * `batchId` is not `batchId`.
   */
  initial?: Pick<CreatedBatch, "batchId" | "cursor"> & { tasks: readonly TaskView[] };
}

/**
 * Follows every task of a batch, over one held request, while the
 * component is mounted. The watch starts when React subscribes and stops
 * when it unsubscribes (unmount, StrictMode's replay, another `batchId`
 * or client), so it never leaves a held request behind. It re-renders
 * once per answer that moved the batch cursor, not once per task.
 * `batchId` null or undefined watches nothing.
 *
 * @example
 * const { tasks, progress, status } = useTaskBatch(client, created?.batchId, { initial: created });
 * return <progress value={progress?.terminal ?? 0} max={progress?.size ?? tasks.length} title={status.state} />;
 */
export function useTaskBatch(client: Pick<TaskClient, "watchBatch">, batchId: string | null | undefined, options?: UseTaskBatchOptions): TaskBatchState;

/** What `useCreateTask` returns. */
export interface CreateTaskState {
  /**
   * Submits `request` under one idempotency key: while it is pending,
   * every call returns the same promise (one request); the same request
   * after a failure is retried under the same key, and after a success
   * answers the task created. A different request, or any after
   * `reset()`, is a new submit with a new key. Rejects with the error
   * that `error` shows.
   */
  create(request: CreateTaskRequest): Promise<CreatedTask>;
  /** Forgets the submit (and the task and error shown): the next `create` is a new task. */
  reset(): void;
  /** The task the last submit created. */
  task: CreatedTask | undefined;
  pending: boolean;
  /**
   * Why the last submit failed: the client's `TaskwireError` (a request
   * that cannot be sent as JSON is `invalid-request`). An adapter given
   * in place of a TaskClient (creating through the app's backend) should
   * reject with `TaskwireError`s too (`new TaskwireError(code, message,
   * status)` from `taskwire/client`).
   */
  error: TaskwireError | undefined;
}

/**
 * Creates tasks, one per submit, so that a double click creates one task.
 *
 * @example
 * const { create, task, pending } = useCreateTask(client);
 * <button disabled={pending} onClick={() => create({ ttlMs: 3_600_000, maxAttempts: 3 }).catch(() => {})}>Start</button>
 */
export function useCreateTask(client: Pick<TaskClient, "createTask">): CreateTaskState;

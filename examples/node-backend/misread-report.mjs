// Test-only (misread.mjs): the two misreadings of an executor's report
// that this backend can make at its edge, before the core judges it.
// Without TASKWIRE_MISREAD both functions hand the report on unchanged.

import { misreads } from "./misread.mjs";

/** The task as GET shows it, or undefined for an unknown task. */
function viewOf(store, taskId) {
  return store.tenantOf(taskId) === undefined ? undefined : JSON.parse(store.taskJson(taskId));
}

/**
 * "stale-progress-no-renew": a progress lower than the task's is
 * answered `stale-progress` without reaching the core, so its lease is
 * not renewed. Returns that answer, or undefined (judge as usual).
 */
export function misreadReport(store, taskId, event) {
  if (!misreads("stale-progress-no-renew") || event.type !== "progress") return undefined;
  const task = viewOf(store, taskId);
  if (task?.state !== "running" || !(event.progress < task.progress)) return undefined;
  if (event.attempt !== undefined && event.attempt !== task.attempts) return undefined;
  return { changed: false, duplicate: false, duplicateCallback: false, notify: false, reason: "stale-progress", task, next: "continue" };
}

/**
 * "start-recovers-unknown": a start of the lapsed attempt on an unknown
 * task is judged as its heartbeat, which brings the task back to running.
 * Returns the event to judge.
 */
export function misreadEvent(store, taskId, event) {
  if (!misreads("start-recovers-unknown") || event.type !== "start") return event;
  const task = viewOf(store, taskId);
  if (task?.state !== "unknown" || event.attempt !== task.attempts) return event;
  const { atMs, attempt, leaseMs } = event;
  return { type: "heartbeat", atMs, attempt, ...(leaseMs !== undefined && { leaseMs }) };
}

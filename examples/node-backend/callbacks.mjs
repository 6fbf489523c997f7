// POST /v1/tasks/{id}/callbacks (PROTOCOL.md §Executor callback): signed,
// not bearer-authenticated. The order of the checks matters, so that a
// request nobody signed costs almost nothing and learns nothing.

import { createHash } from "node:crypto";
import { BODY_LIMIT, HttpError, checkId, invalid, parseJson, quoted, sendJson, taskIdFrom, tooLarge, typeOf, unauthorized } from "./http.mjs";
import { checkHeaders, readSigned } from "./sign.mjs";
import { refuseIfNotAnExecutors, withDefaultLease } from "./lifecycle.mjs";
import { misreads } from "./misread.mjs";
import { misreadEvent, misreadReport } from "./misread-report.mjs";

/** Judges one callback; answered after its record is on disk. */
export async function callback({ req, res, rawId, store, config }) {
  // PROTOCOL.md §Executor callback, "Order of the checks": nothing of a
  // request nobody signed is kept, and it learns nothing.
  let signed;
  let taskId;
  let tenant;
  let raw;
  try {
    // 1. The headers, before any of the body is read.
    signed = checkHeaders(req.headersDistinct);
    checkId("webhook-id", signed.id, "latin1");
    taskId = taskIdFrom(rawId);
    if (Number(req.headers["content-length"] ?? 0) > BODY_LIMIT) throw tooLarge();
    // 2 and 3. The tenant's secrets (an unknown task is answered as a
    // wrong signature), then the body, hashed as it arrives.
    ({ tenant, raw } = await readSigned(req, signed, taskId, { store, config }));
  } catch (err) {
    // Answered before the whole body was read: do not keep the connection.
    if (err instanceof HttpError && raw === undefined) err.headers = { ...err.headers, connection: "close" };
    throw err;
  }
  // 4. The task the body is signed for, then the event.
  const body = parseJson(raw, "event");
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw invalid(`event: must be a JSON object, got ${typeOf(body)}`);
  }
  const { taskId: given, ...event } = body;
  const named = given === undefined && misreads("callback-task-id-optional") ? taskId : given;
  if (named === undefined || named === null) throw invalid("event.taskId: required: the task this callback is for");
  if (typeof named !== "string") throw invalid(`event.taskId: expected a string, got ${typeOf(named)}`);
  if (named !== taskId) throw unauthorized(`event.taskId: the body is signed for task ${quoted(named)}, not for this one`);
  // People's and the sweeper's events are not an executor's to send (422).
  refuseIfNotAnExecutors(event);
  // 5. The callback id against the tenant's other tasks (422), then the
  // core: invalid events (400) come back from it.
  // The signed request itself, used once (used-requests.mjs).
  const request = { at: Number(signed.timestamp), sha256: createHash("sha256").update(raw).digest("hex") };
  const judged = withDefaultLease(event, config.leaseMs);
  const t = misreadReport(store, taskId, judged) ?? store.callback(tenant, taskId, signed.id, misreadEvent(store, taskId, judged), request);
  sendJson(res, 200, {
    changed: t.changed,
    duplicate: t.duplicate,
    duplicateCallback: t.duplicateCallback,
    notify: t.notify,
    reason: t.reason,
    version: t.task.version,
    state: t.task.state,
    // The executor should stop and answer ack_cancel (or cannot_cancel).
    cancelRequested: t.task.state === "cancelling" || (misreads("cancel-requested-in-ineffective") && t.task.state === "cancel_ineffective"),
    // What the executor does now, and the current attempt (core's Directive).
    next: t.next,
    attempt: t.task.attempts,
    epoch: store.epoch,
    // An effect's answer names the resource id recorded first under its
    // key (core's, in the book's answer), which may not be the one sent.
    ...(typeof t.resourceId === "string" ? { resourceId: t.resourceId } : {}),
  });
}

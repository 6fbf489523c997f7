// The lifecycle over HTTP (PROTOCOL.md §Lifecycle), as the reference
// server does it: people's requests (cancel, decisions) with the server's
// clock and the caller's credential, the create fields and their default
// grace period, what an executor may not send, and its default lease.
// Every rule about tasks is still the core's (TaskBook); this file only
// turns HTTP into events.

import { TaskwireError, applyEvent, createTask } from "taskwire";
import { HttpError, invalid, parseJson, quoted } from "./http.mjs";

/** The five states a task never leaves: long-polls answer at once, streams end. */
const TERMINAL = new Set(["succeeded", "failed", "expired", "cancelled", "timed_out"]);
export const isTerminal = (state) => TERMINAL.has(state);

/** The optional create fields of the lifecycle, the plan (PROTOCOL.md §Steps) and the budget (§Budgets and side effects), in the order they are compared. */
export const LIFECYCLE_CREATE_FIELDS = ["autoRequeue", "budget", "deadlineMs", "steps", "unknownGraceMs", "workflowVersion"];

/**
 * The lifecycle fields of a create body, for `book.create`: `deadlineMs`,
 * `unknownGraceMs` (the server's default unless sent, or unless the task
 * opted out with `autoRequeue: false`) and `autoRequeue`. A `null` is the
 * same as absent. The core validates them (`createTask` in routes.mjs).
 */
export function lifecycleFields(body, defaultGraceMs) {
  const given = (name) => (body[name] === null ? undefined : body[name]);
  const fields = {};
  const deadlineMs = given("deadlineMs");
  const autoRequeue = given("autoRequeue");
  const unknownGraceMs = given("unknownGraceMs") ?? (autoRequeue === false ? undefined : defaultGraceMs);
  if (deadlineMs !== undefined) fields.deadlineMs = deadlineMs;
  if (unknownGraceMs !== undefined) fields.unknownGraceMs = unknownGraceMs;
  if (autoRequeue !== undefined) fields.autoRequeue = autoRequeue;
  // The plan (PROTOCOL.md §Steps) and the budget, checked by the core.
  for (const name of ["workflowVersion", "steps", "budget"]) {
    if (given(name) !== undefined) fields[name] = given(name);
  }
  return fields;
}

// ---- people's requests ------------------------------------------------------

/** What each route asks, as the core's event type. */
const ACTIONS = { cancel: "cancel", decisions: "decide" };

/** Fields the server fills in itself, and why a body may not carry them. */
const SERVER_FIELDS = [
  ["type", "the route says what is asked"],
  ["atMs", "the server's clock says when"],
  ["actor", "the caller's credential says who"],
];

/**
 * The event a person's request makes: the body's fields (an empty cancel
 * body is no reason), the route's `type`, the server's clock and the
 * caller's credential as `actor` (`tenant:<name>` for a tenant token,
 * `user:<sub>` for a browser token).
 */
export function personEvent(route, bytes, actor, nowMs) {
  const type = ACTIONS[route];
  let fields = {};
  const empty = bytes.every((b) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d);
  if (!(route === "cancel" && empty)) {
    fields = parseJson(bytes, "body");
    if (fields === null || typeof fields !== "object" || Array.isArray(fields)) throw invalid("body: must be a JSON object");
  }
  for (const [name, why] of SERVER_FIELDS) {
    if (Object.hasOwn(fields, name)) throw invalid(`body.${name}: must not be sent (${why})`);
  }
  return { ...fields, type, atMs: nowMs, actor };
}

/** A throwaway task events are checked against, before the task they are for is looked up. */
let probe;

/**
 * Checks an event field by field with the core (400 naming the field)
 * without applying it anywhere: the reference server reads an event
 * before it looks at the task, so a malformed one is 400 even for a task
 * that is not the caller's.
 */
export function checkEvent(event) {
  probe ??= createTask({ id: "probe", nowMs: 0, ttlMs: 1, maxAttempts: 1 });
  applyEvent(probe, event);
}

/** The answer both routes give every judged request: 200, core's reason, the task now. */
export function actionAnswer(result) {
  return { changed: result.changed, duplicate: result.duplicate, reason: result.reason, task: result.task };
}

/** A core error about a person's event names the body's field, as the reference server does. */
export function asBodyError(err) {
  if (err instanceof TaskwireError && err.code === "invalid-request") return invalid(err.message.replace(/^event\b/, "body"));
  return err;
}

// ---- executor callbacks ------------------------------------------------------

/** Where the events an executor may not send come from instead. */
const NOT_AN_EXECUTORS = {
  cancel: "POST /v1/tasks/{id}/cancel",
  decide: "POST /v1/tasks/{id}/decisions",
  lapse: "the server's sweeper, when a lease, grace period or deadline runs out",
  abandon: "the server's sweeper, when a lease, grace period or deadline runs out",
  timeout: "the server's sweeper, when a lease, grace period or deadline runs out",
};


/**
 * A person's request (`cancel`, `decide`) in a signed callback would let
 * an executor act in someone's name, and the sweeper's events (`lapse`,
 * `abandon`, `timeout`) would let it forge the clock: 422
 * `not-an-executor-event`, nothing changes. A malformed one is 400 first,
 * as any invalid event. `expire` stays accepted, as in seed 000: the core
 * judges it against the TTL.
 */
export function refuseIfNotAnExecutors(event) {
  const instead = Object.hasOwn(NOT_AN_EXECUTORS, event.type) ? NOT_AN_EXECUTORS[event.type] : undefined;
  if (instead === undefined) return;
  checkEvent(event); // a malformed one is 400
  throw new HttpError(422, "not-an-executor-event", `event.type: ${quoted(event.type)} is not an executor's event (it comes from ${instead})`);
}

/**
 * A `start` that carries `attempt` but no `leaseMs` gets the server's
 * (`--lease-ms`): such an executor is expected to report or heartbeat.
 * Without `attempt` (a seed-000 executor) nothing changes: no lease. The
 * same body always becomes the same event, so a redelivery is still the
 * same callback.
 */
export function withDefaultLease(event, leaseMs) {
  if (event.type !== "start" || event.attempt == null || event.leaseMs != null) return event;
  return { ...event, leaseMs };
}

// POST /v1/tasks (PROTOCOL.md §Create a task), and the check of one create
// body that every item of a batch goes through too (§Batches): errors
// name where the body is (`body`, `body.items[3]`), `input` is kept as
// its exact text, and the request is put in the canonical form an
// Idempotency-Key replay is compared in.

import { randomBytes } from "node:crypto";
import { TaskwireError, createTask } from "taskwire";
import { beforeBody, canonicalJson, header, idempotencyKey, invalid, parseJson, readBody, sendJson, typeOf } from "./http.mjs";
import { credentialOf } from "./credentials.mjs";
import { canonical, members } from "./exact.mjs";
import { LIFECYCLE_CREATE_FIELDS, lifecycleFields } from "./lifecycle.mjs";

/** `kind` is a short label, not a payload. */
const MAX_KIND_BYTES = 64;

/** Starts every request in the exact canonical form (`checkCreate`). */
export const EXACT_REQUEST = "exact:";

/** A new task id: the server assigns them. */
export const newTaskId = () => `tsk_${randomBytes(16).toString("hex")}`;

export async function createTaskRoute({ req, res, store, config }) {
  const caller = await credentialOf(header(req, "authorization"), config);
  beforeBody(() => caller.requireTenantToken("creating a task"));
  const bytes = await readBody(req);
  const body = parseJson(bytes, "body");
  const key = idempotencyKey(req);
  // The server assigns the id and the creation time (and the default grace period).
  const checked = checkCreate(body, bytes.toString("utf8"), "body", { id: newTaskId(), nowMs: Date.now() }, config.unknownGraceMs);
  const { task, kind, input, request, legacyRequest } = checked;
  const idem = key === undefined ? undefined : { key, request, legacyRequest };
  const { task: answer, created } = store.create(caller.tenant, { ...task, kind, input }, idem);
  sendJson(res, created ? 201 : 200, answer);
}

/**
 * Checks one create body: `value` as parsed, `text` its exact JSON text,
 * `where` what errors call it. `assigned` is the server's `{id, nowMs}`.
 * Returns `task` (for `book.create`: the id, the time, `ttlMs`,
 * `maxAttempts` and the lifecycle fields, validated by the core), `kind`,
 * `input` (JSON text, undefined when absent or null), `request` (the
 * canonical form) and `legacyRequest` (the form keys of old journals
 * hold). Throws a 400 naming the field.
 */
export function checkCreate(value, text, where, assigned, defaultGraceMs) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalid(`${where}: must be a JSON object${where === "body" ? "" : `, got ${typeOf(value)}`}`);
  }
  const { ttlMs, maxAttempts } = value;
  const kind = value.kind ?? undefined;
  // `input` as the exact text sent (JSON.parse would round its numbers),
  // and the request in the exact form replays are compared in.
  const { input, request } = exactCreate(text, where);
  const legacyRequest = legacyCreateRequest({ ttlMs, maxAttempts, kind, input: value.input ?? undefined });
  if (kind !== undefined && typeof kind !== "string") throw invalid(`${where}.kind: must be a string, got ${typeOf(kind)}`);
  if (kind !== undefined && Buffer.byteLength(kind) > MAX_KIND_BYTES) {
    throw invalid(`${where}.kind: must be at most ${MAX_KIND_BYTES} bytes, got ${Buffer.byteLength(kind)}`);
  }
  const task = { ...assigned, ttlMs, maxAttempts, ...lifecycleFields(value, defaultGraceMs) };
  try {
    createTask(task); // the core's validation, before anything is stored
  } catch (err) {
    if (err instanceof TaskwireError && err.code === "invalid-request") {
      throw invalid(`${where}.${err.message.replace(/^input\./, "")}`);
    }
    throw err;
  }
  return { task, kind, input, request, legacyRequest };
}

/**
 * The create body's `input` text (undefined when absent or null) and its
 * request in canonical form: `ttlMs`, `maxAttempts`, `kind` and `input`,
 * numbers compared exactly, `null` the same as absent (PROTOCOL.md,
 * "Create a task"); the lifecycle fields count only when sent, named, so
 * a body without them is the same request as before they existed. The
 * last of duplicate fields counts, as in JSON.parse.
 */
function exactCreate(text, where) {
  let fields;
  try {
    fields = new Map(members(text));
  } catch (err) {
    throw invalid(`${where}: ${err.message}`);
  }
  const field = (name) => (fields.get(name) === "null" ? undefined : fields.get(name));
  let request = EXACT_REQUEST;
  for (const name of ["input", "kind", "maxAttempts", "ttlMs"]) {
    const raw = field(name);
    try {
      request += `${raw === undefined ? "null" : canonical(raw)}\n`;
    } catch (err) {
      throw invalid(`${where}.${name}: ${err.message}`);
    }
  }
  for (const name of LIFECYCLE_CREATE_FIELDS) {
    const raw = field(name);
    if (raw === undefined) continue;
    try {
      request += `${name}=${canonical(raw)}\n`;
    } catch (err) {
      throw invalid(`${where}.${name}: ${err.message}`);
    }
  }
  return { input: field("input"), request };
}

/**
 * What an Idempotency-Key remembered of a create before exact comparison:
 * its fields as one JSON value, numbers as doubles. Kept to compare new
 * bodies with keys from journals written then.
 */
export function legacyCreateRequest({ ttlMs, maxAttempts, kind, input }) {
  return canonicalJson({ ttlMs, maxAttempts, kind: kind ?? null, input: input ?? null });
}

/** A create's fields as its record keeps them (absent ones left out; `input` as `inputJson`, its exact text). */
export function taskRecord({ id, ttlMs, maxAttempts, deadlineMs, unknownGraceMs, autoRequeue, workflowVersion, steps, budget, kind, input }) {
  const record = { id, ttlMs, maxAttempts };
  if (deadlineMs !== undefined) record.deadlineMs = deadlineMs;
  if (unknownGraceMs !== undefined) record.unknownGraceMs = unknownGraceMs;
  if (autoRequeue !== undefined) record.autoRequeue = autoRequeue;
  if (workflowVersion !== undefined) record.workflowVersion = workflowVersion;
  if (steps !== undefined) record.steps = steps;
  if (budget !== undefined) record.budget = budget;
  if (kind !== undefined) record.kind = kind;
  if (input !== undefined) record.inputJson = input;
  return record;
}

/** The Idempotency-Key part of a create record. */
export const keyRecord = (idem) => (idem === undefined ? {} : { key: idem.key, request: idem.request });

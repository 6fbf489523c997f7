// PROTOCOL.md §Batches over HTTP: many tasks created in one call (whole or
// not at all, idempotent), then followed as one with a single held
// request: a long-poll on `/resume` or an event stream on `/events`. The
// batch's cursor and its per-task deltas are the store's
// (batch-book.mjs); every rule about each task is still the core's.

import { randomBytes } from "node:crypto";
import { worthHolding } from "taskwire";
import {
  BATCH_BODY_LIMIT,
  header,
  idFrom,
  idempotencyKey,
  invalid,
  notFound,
  parseJson,
  quoted,
  readBody,
  beforeBody,
  resumeParams,
  sendJson,
  streamCursor,
  typeOf,
} from "./http.mjs";
import { credentialOf } from "./credentials.mjs";
import { asBodyError, checkEvent, personEvent } from "./lifecycle.mjs";
import { checkCreate, newTaskId } from "./create.mjs";
import { elements, members } from "./exact.mjs";
import { changeOrTimeout, noContent, openStream } from "./watch.mjs";

/** Most items one batch holds (the seed's moderation run is 500). */
export const MAX_ITEMS = 1000;
/** Starts a batch's request in canonical form: its items', in order. */
const BATCH_REQUEST = "batch:";

// ---- POST /v1/batches ---------------------------------------------------------

export async function createBatchRoute({ req, res, store, config }) {
  const caller = await credentialOf(header(req, "authorization"), config);
  beforeBody(() => caller.requireTenantToken("creating a batch"));
  const bytes = await readBody(req, { limit: BATCH_BODY_LIMIT });
  const body = parseJson(bytes, "body");
  const key = idempotencyKey(req);
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw invalid("body: must be a JSON object");
  const { items } = body;
  if (!Array.isArray(items)) {
    throw invalid(`body.items: must be an array of 1 to ${MAX_ITEMS} create bodies, got ${items === undefined ? "none" : typeOf(items)}`);
  }
  if (items.length < 1 || items.length > MAX_ITEMS) {
    throw invalid(`body.items: must hold 1 to ${MAX_ITEMS} create bodies, got ${items.length}`);
  }
  const texts = itemTexts(bytes.toString("utf8"));
  // Every item is checked, exactly as a single create, before anything is
  // stored; the store then writes the batch as one record (one fsync), so
  // it is created whole or not at all. One clock for all of its items.
  const nowMs = Date.now();
  const checked = items.map((item, i) =>
    checkCreate(item, texts[i], `body.items[${i}]`, { id: newTaskId(), nowMs }, config.unknownGraceMs),
  );
  // The items compared as single creates compare one body, in order.
  const idem = key === undefined ? undefined : { key, request: BATCH_REQUEST + JSON.stringify(checked.map((c) => c.request)) };
  const batchId = `bat_${randomBytes(16).toString("hex")}`;
  const { batch, created } = store.createBatch(
    caller.tenant,
    { batchId, nowMs, items: checked.map(({ task, kind, input }) => ({ ...task, kind, input })) },
    idem,
  );
  sendJson(res, created ? 201 : 200, batch);
}

/** The exact text of each of the body's items (the last `items` counts, as in JSON.parse). */
function itemTexts(text) {
  try {
    return elements(new Map(members(text)).get("items"));
  } catch (err) {
    throw invalid(`body.items: ${err.message}`);
  }
}

// ---- GET /v1/batches/{id}/resume ------------------------------------------------

export async function batchResume({ req, res, query, rawId, store, config }) {
  const caller = await credentialOf(header(req, "authorization"), config, query);
  // The parameters before the batch is looked up (400 before 404), as for a task.
  const params = resumeParams(query);
  const { cursor, snapshot } = params;
  const id = batchFor(caller, store, rawId);
  let answer = store.batchAnswer(id, cursor, snapshot);
  // A batch whose tasks all ended never changes again: answered at once.
  if (worthHolding({ waitMs: params.waitMs, mode: answer.mode, live: answer.open > 0, askedEpoch: params.epoch, epoch: store.epoch })) {
    // Held until any of its tasks changes: the store wakes the batch from
    // the commit itself, nothing polls.
    await changeOrTimeout(store, id, params.waitMs, res);
    if (res.destroyed) return; // the client went away
    answer = store.batchAnswer(id, cursor);
  }
  sendJson(res, 200, answer);
}

// ---- GET /v1/batches/{id}/events (SSE) --------------------------------------------

export async function batchEvents({ req, res, query, rawId, store, config }) {
  const caller = await credentialOf(header(req, "authorization"), config, query);
  let cursor = streamCursor(req, query);
  const id = batchFor(caller, store, rawId); // after the cursor: 400 before 404

  const first = store.batchAnswer(id, cursor);
  // The cursor is current and every task ended: nothing will ever follow,
  // and 204 tells a standard EventSource to stop reconnecting.
  if (first.mode === "caught-up" && first.open === 0) return noContent(res);
  const stream = openStream(res, caller, config);
  // Each message answers the previous message's id (the batch cursor); the
  // first answers the starting cursor exactly as resume would.
  const send = (answer) => {
    cursor = answer.cursor;
    stream.send("batch", cursor, JSON.stringify(answer));
    if (answer.open === 0) stream.end();
  };
  stream.onClose(store.watch(id, () => {
    const answer = store.batchAnswer(id, cursor);
    if (answer.mode !== "caught-up") send(answer);
  }));
  send(first);
}

// ---- POST /v1/batches/{id}/cancel -----------------------------------------------

/**
 * Cancels the rest of a batch (PROTOCOL.md §Batches, "Cancel a batch"):
 * each task not terminal gets the cancel its own route would give it,
 * judged by the core; the answer counts the core's reasons. A tenant
 * token, or a browser token naming the batch with the `cancel` right.
 */
export async function batchCancel({ req, res, rawId, store, config }) {
  const caller = await credentialOf(header(req, "authorization"), config);
  const id = idFrom("batchId", rawId);
  // The credential's scope before the body, as for a task's cancel.
  beforeBody(() => caller.requireBatch("cancel", id));
  const event = personEvent("cancel", await readBody(req), caller.actor, Date.now());
  try {
    checkEvent(event);
  } catch (err) {
    throw asBodyError(err);
  }
  if (!store.ownsBatch(caller.tenant, id)) throw notFound(`batchId: no batch with id ${quoted(id)}`);
  const { size, open } = store.batchItems(id);
  const reasons = {};
  let changed = 0;
  for (const taskId of open) {
    const result = store.act(taskId, event);
    reasons[result.reason] = (reasons[result.reason] ?? 0) + 1;
    if (result.changed) changed += 1;
  }
  sendJson(res, 200, { batchId: id, size, changed, reasons, epoch: store.epoch });
}

/**
 * The caller's batch, for watching: a browser token must name it in its
 * `batch` claim and grant `watch` (404, 403); an unknown batch or another
 * tenant's is 404, the same answer.
 */
function batchFor(caller, store, rawId) {
  const id = idFrom("batchId", rawId);
  caller.requireBatch("watch", id);
  if (!store.ownsBatch(caller.tenant, id)) throw notFound(`batchId: no batch with id ${quoted(id)}`);
  return id;
}

// The HTTP API of PROTOCOL.md over node:http: routing, CORS, and one
// handler per endpoint. Handlers check the request (401/400/404 before
// anything else), then ask the store; every rule about tasks comes from
// the taskwire core behind it.

import { misreads } from "./misread.mjs";
import { TaskwireError, worthHolding } from "taskwire";
import {
  HttpError,
  header,
  idempotencyKey,
  invalid,
  notFound,
  parseInteger,
  quoted,
  readBody,
  beforeBody,
  resumeParams,
  sendError,
  sendJson,
  streamCursor,
  taskIdFrom,
} from "./http.mjs";
import { credentialOf } from "./credentials.mjs";
import { callback } from "./callbacks.mjs";
import { createTaskRoute } from "./create.mjs";
import { batchCancel, batchEvents, batchResume, createBatchRoute } from "./batches.mjs";
import { StorageError } from "./store.mjs";
import { actionAnswer, asBodyError, checkEvent, isTerminal, personEvent } from "./lifecycle.mjs";
import { changeOrTimeout, noContent, openStream } from "./watch.mjs";
import { appendOutput, outputWanted } from "./output.mjs";
import { changeOrOutput, followWithOutput, nothingToFollow, withOutput } from "./output-watch.mjs";

/** Most notifications one page returns. */
const MAX_LIMIT = 1000;
const ALLOW_HEADERS = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID";

/**
 * The request handler for `http.createServer`. `config`: {tokens (Map
 * token → tenant), browserKeys (credentials.mjs), keyring (sign.mjs),
 * callbackBodyTimeoutMs, corsOrigins, heartbeatMs, leaseMs, unknownGraceMs,
 * onFatal}.
 */
export function createApp(store, config) {
  const routes = [
    { path: ["v1", "tasks"], methods: { POST: createTaskRoute } },
    { path: ["v1", "tasks", ":id"], methods: { GET: getTask } },
    { path: ["v1", "tasks", ":id", "resume"], methods: { GET: resume } },
    { path: ["v1", "tasks", ":id", "events"], methods: { GET: events } },
    { path: ["v1", "tasks", ":id", "timeline"], methods: { GET: timeline } },
    { path: ["v1", "tasks", ":id", "callbacks"], methods: { POST: callback } },
    { path: ["v1", "tasks", ":id", "deliveries"], methods: { POST: deliver } },
    { path: ["v1", "tasks", ":id", "output", ":stream"], methods: { POST: appendOutput } },
    { path: ["v1", "tasks", ":id", "cancel"], methods: { POST: act("cancel") } },
    { path: ["v1", "tasks", ":id", "decisions"], methods: { POST: act("decisions") } },
    { path: ["v1", "batches"], methods: { POST: createBatchRoute } },
    { path: ["v1", "batches", ":id", "cancel"], methods: { POST: batchCancel } },
    { path: ["v1", "batches", ":id", "resume"], methods: { GET: batchResume } },
    { path: ["v1", "batches", ":id", "events"], methods: { GET: batchEvents } },
    { path: ["v1", "notifications"], methods: { GET: notifications } },
  ];

  return async function handle(req, res) {
    try {
      if (cors(req, res, config.corsOrigins)) return;
      const { segments, query } = splitUrl(req.url);
      const route = routes.find((r) => matches(r.path, segments));
      if (!route) throw notFound("path: no such route");
      const handler = route.methods[req.method];
      if (!handler) {
        const allow = Object.keys(route.methods).join(", ");
        throw new HttpError(405, "method-not-allowed", `method: ${req.method} is not allowed on this path (allowed: ${allow})`, { allow });
      }
      const rawId = route.path.includes(":id") ? segments[2] : undefined;
      await handler({ req, res, query, rawId, segments, store, config });
    } catch (err) {
      fail(res, err, config);
    }
  };
}

/** Answers an error, whatever it is: a client error as itself, anything else as 500. */
function fail(res, err, config) {
  let answer = err;
  if (err instanceof TaskwireError && err.code === "invalid-request") answer = invalid(err.message);
  else if (err instanceof TaskwireError && err.code === "clock-skew") answer = new HttpError(400, "clock-skew", err.message);
  else if (err instanceof TaskwireError && err.code === "not-found") answer = notFound(err.message);
  else if (!(err instanceof HttpError)) {
    console.error("internal error:", err);
    answer = new HttpError(500, "internal", "internal server error");
    if (err instanceof StorageError) config.onFatal(err);
  }
  if (res.headersSent) {
    // A stream already under way: all we can do is cut it.
    res.destroy();
    return;
  }
  sendError(res, answer);
}

// ---- routing ----------------------------------------------------------------

/** Path segments (still percent-encoded) and query parameters of a request target. */
function splitUrl(url) {
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  const query = new URLSearchParams(q < 0 ? "" : url.slice(q + 1));
  return { segments: path.split("/").slice(1), query };
}

function matches(pattern, segments) {
  return pattern.length === segments.length && pattern.every((p, i) => p.startsWith(":") ? segments[i] !== "" : p === segments[i]);
}

// ---- CORS -------------------------------------------------------------------

/**
 * Tags responses for configured origins and answers preflights (any
 * path). Returns true when the request was a preflight, now answered.
 */
function cors(req, res, origins) {
  const origin = header(req, "origin");
  const allowed = origin !== undefined && (origins.includes(origin) || origins.includes("*"));
  const preflight = req.method === "OPTIONS" && header(req, "access-control-request-method") !== undefined;
  if (allowed) {
    res.setHeader("access-control-allow-origin", origin);
    res.setHeader("vary", "Origin");
    if (!preflight) res.setHeader("access-control-expose-headers", "Retry-After");
  }
  if (!preflight) return false;
  if (allowed) {
    res.setHeader("access-control-allow-methods", "GET, POST, OPTIONS");
    res.setHeader("access-control-allow-headers", ALLOW_HEADERS);
    res.setHeader("access-control-max-age", "600");
  }
  res.writeHead(204).end();
  return true;
}

// ---- authentication ---------------------------------------------------------

/**
 * The caller (credentials.mjs), or 401. The watch routes pass their query:
 * they also take a browser token in `?access_token=`.
 */
const callerOf = (req, config, query) => credentialOf(header(req, "authorization"), config, query);

/** The caller's task id for `right`: 404 when out of its scope or not its tenant's, 403 without the right. */
function taskFor(credential, right, store, rawId) {
  credential.require(right, taskIdFrom(rawId));
  return ownTask(store, credential.tenant, rawId);
}

/** The caller's task id, or 404 (unknown, or another tenant's: the same answer). */
function ownTask(store, tenant, rawId) {
  const id = taskIdFrom(rawId);
  if (!store.owns(tenant, id)) throw notFound(`taskId: no task with id ${quoted(id)}`);
  return id;
}

// ---- GET /v1/tasks/{id} (POST /v1/tasks: create.mjs) -----------------------------

async function getTask({ req, res, rawId, store, config }) {
  const id = taskFor(await callerOf(req, config), "watch", store, rawId);
  sendJson(res, 200, store.taskJson(id));
}

// ---- GET /v1/tasks/{id}/timeline ----------------------------------------------

async function timeline({ req, res, rawId, store, config }) {
  const id = taskFor(await callerOf(req, config), "watch", store, rawId);
  sendJson(res, 200, store.timelineJson(id));
}

// ---- GET /v1/tasks/{id}/resume ------------------------------------------------

async function resume({ req, res, query, rawId, store, config }) {
  const caller = await callerOf(req, config, query);
  // PROTOCOL.md §Conventions, "Error precedence": the parameters are
  // judged before the task is looked up (400 before 404).
  const params = resumeParams(query);
  const wanted = outputWanted(query); // null: no output asked, nothing changes
  const { cursor, snapshot } = params;
  const id = taskFor(caller, "watch", store, rawId);

  let answer = store.resume(id, cursor, snapshot);
  let lacks = wanted && store.readOutput(id, wanted);
  const hold = worthHolding({ waitMs: params.waitMs, mode: answer.mode, live: !isTerminal(answer.task.state), askedEpoch: params.epoch, epoch: store.epoch });
  // A follower of output that lacks anything (text, a newer attempt, the end) is answered at once.
  if (hold && !lacks?.news) {
    // Hold until the task changes, or (with output) an append gives the
    // follower something (the store calls back from the commit itself:
    // nothing polls), or waitMs runs out.
    await (wanted ? changeOrOutput(store, id, wanted, params.waitMs, res) : changeOrTimeout(store, id, params.waitMs, res));
    if (res.destroyed) return; // the client went away
    answer = store.resume(id, cursor);
    if (wanted) lacks = store.readOutput(id, wanted);
  }
  if (misreads("resume-task-with-input")) {
    const { kind, input } = JSON.parse(store.taskJson(id));
    answer = { ...answer, task: { ...answer.task, kind, input } };
  }
  sendJson(res, 200, wanted ? withOutput(answer, wanted, lacks) : answer);
}

// ---- GET /v1/tasks/{id}/events (SSE) ------------------------------------------

async function events({ req, res, query, rawId, store, config }) {
  const caller = await callerOf(req, config, query);
  let cursor = streamCursor(req, query);
  const wanted = outputWanted(query); // null: no output asked, nothing changes
  const id = taskFor(caller, "watch", store, rawId); // after the cursor: 400 before 404

  const first = store.resume(id, cursor);
  // The cursor is the terminal version (and the follower of output lacks
  // no text): nothing will ever follow. 204 is what tells a standard
  // EventSource to stop reconnecting.
  const ended = first.mode === "caught-up" && isTerminal(first.task.state);
  if (ended && (!wanted || nothingToFollow(store, id, wanted))) return noContent(res);
  const stream = openStream(res, caller, config);
  if (wanted) return followWithOutput(stream, store, id, cursor, wanted, first);
  // Each message answers the previous message's id; the first answers the
  // starting cursor exactly as resume would.
  const send = (answer) => {
    cursor = answer.task.version;
    stream.send("resume", cursor, JSON.stringify(answer));
    if (isTerminal(answer.task.state)) stream.end();
  };
  stream.onClose(store.watch(id, () => {
    const answer = store.resume(id, cursor);
    if (answer.mode !== "caught-up") send(answer);
  }));
  send(first);
}

// ---- POST /v1/tasks/{id}/cancel and /decisions -----------------------------------

/**
 * A person's request (PROTOCOL.md §Lifecycle, Cancel and Decisions): the
 * body says what, the server's clock when, the bearer token who. Every
 * judged request is 200 with the core's reason and the task now, so a
 * retry after a lost answer is safe (a repeat is a duplicate).
 */
function act(route) {
  return async function action({ req, res, rawId, store, config }) {
    const caller = await callerOf(req, config);
    const right = route === "cancel" ? "cancel" : "decide";
    beforeBody(() => caller.require(right, taskIdFrom(rawId)));
    const bytes = await readBody(req);
    const event = personEvent(route, bytes, caller.actor, Date.now());
    try {
      checkEvent(event);
    } catch (err) {
      throw asBodyError(err);
    }
    const id = taskFor(caller, right, store, rawId);
    sendJson(res, 200, { ...actionAnswer(store.act(id, event)), epoch: store.epoch });
  };
}

// ---- POST /v1/tasks/{id}/deliveries --------------------------------------------

async function deliver({ req, res, rawId, store, config }) {
  const caller = await callerOf(req, config);
  const tenant = caller.tenant;
  beforeBody(() => caller.require("deliver", taskIdFrom(rawId)));
  await readBody(req); // no body is expected; the limit still applies
  const key = idempotencyKey(req);
  if (key === undefined) throw invalid("Idempotency-Key: header is required");
  const id = taskFor(caller, "deliver", store, rawId);
  const d = store.deliver(tenant, id, key, Date.now());
  switch (d.reason) {
    case "delivered":
      return sendJson(res, 201, d);
    case "duplicate-delivery":
      return sendJson(res, 200, d);
    case "not-succeeded":
      throw new HttpError(409, "not-succeeded", `taskId: task ${quoted(id)} has no result`);
    case "key-reused-for-other-task":
      // The other task's receipt is never revealed.
      throw new HttpError(422, "key-reused-for-other-task", `Idempotency-Key: ${quoted(key)} was already used for another task`);
    default:
      throw new Error(`unexpected delivery reason ${d.reason}`);
  }
}

// ---- GET /v1/notifications ------------------------------------------------------

async function notifications({ req, res, query, store, config }) {
  const caller = await callerOf(req, config);
  caller.requireTenantToken("the notifications feed");
  const tenant = caller.tenant;
  const afterText = query.get("after");
  const limitText = query.get("limit");
  const after = afterText === null ? 0 : parseInteger("after", afterText);
  const limit = limitText === null ? 100 : parseInteger("limit", limitText, MAX_LIMIT);
  if (limit === 0) throw invalid(`limit: must be an integer from 1 to ${MAX_LIMIT}, got "0"`);
  const page = store.notifications(tenant, after, limit);
  sendJson(res, 200, { notifications: page, next: page.length > 0 ? page[page.length - 1].seq : after });
}

// Small HTTP helpers on node:http: the error shape, JSON in and out, the
// body limit, and the parsers that make every 400 name its field.

import { misreads } from "./misread.mjs";

/** Bodies above this are refused with 413 (a batch create takes `BATCH_BODY_LIMIT`). */
export const BODY_LIMIT = 64 * 1024;
/** The body limit of `POST /v1/batches` (PROTOCOL.md §Batches): up to 1,000 create bodies. */
export const BATCH_BODY_LIMIT = 1024 * 1024;
/** The longest a long-poll may be held. */
export const MAX_WAIT_MS = 30_000;
/** Ids, callback ids and keys are at most this many bytes. */
export const MAX_ID_BYTES = 255;
/** JSON nested deeper than this is refused (serde_json's default limit). */
export const MAX_DEPTH = 128;

/** An answer other than 2xx: `{"error":{"code","message"}}` with a status. */
export class HttpError extends Error {
  constructor(status, code, message, headers = {}) {
    super(message);
    this.name = "HttpError";
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export const invalid = (message) => new HttpError(400, "invalid-request", message);
export const notFound = (message) => new HttpError(404, "not-found", message);
export const unauthorized = (message) => new HttpError(401, "unauthorized", message);

/** Sends a JSON value (or JSON text, as is). Nothing here may be cached. */
export function sendJson(res, status, body, headers = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "cache-control": "no-store",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/**
 * Runs the checks a request's headers can answer (the caller's rights, its
 * scope) before its body is read (PROTOCOL.md §Error precedence, step 2):
 * a caller who may not send the body is refused without it, and the
 * connection, whose body is still unread, is closed with the answer.
 */
export function beforeBody(check) {
  try {
    return check();
  } catch (err) {
    if (err instanceof HttpError) err.headers = { ...err.headers, connection: "close" };
    throw err;
  }
}

export function sendError(res, err) {
  sendJson(res, err.status, { error: { code: err.code, message: err.message } }, err.headers);
}

/**
 * Reads the request body, at most `limit` bytes (BODY_LIMIT unless told;
 * a Content-Length over it is refused before reading). Past the limit it
 * stops keeping what arrives and rejects with 413; the caller answers and
 * closes the connection. Options (callbacks use them): `timeoutMs`, a
 * time limit for the whole body (408 past it); `onChunk`, called with
 * each piece as it arrives; `keep: false`, to read without keeping
 * anything.
 */
export function readBody(req, { timeoutMs, onChunk, keep = true, limit = BODY_LIMIT } = {}) {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"]);
    if (declared > limit) {
      reject(tooLarge(limit));
      return;
    }
    const chunks = [];
    let size = 0;
    const stop = (err) => {
      clearTimeout(timer);
      req.off("data", onData);
      req.off("end", onEnd);
      chunks.length = 0;
      reject(err);
    };
    const onData = (chunk) => {
      size += chunk.length;
      if (size > limit) return stop(tooLarge(limit));
      onChunk?.(chunk);
      if (keep) chunks.push(chunk);
    };
    const onEnd = () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    };
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
      stop(new HttpError(408, "request-timeout", `body: not received within ${timeoutMs} ms`, { connection: "close" }));
    }, timeoutMs);
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", (err) => stop(err));
    // The client went away mid-body (after "end" this changes nothing).
    req.on("close", () => stop(invalid("body: the request ended before its body")));
  });
}

/** 413: Connection: close, the rest of the body is not read on this connection. */
export function tooLarge(limit = BODY_LIMIT) {
  return new HttpError(413, "payload-too-large", `body: must be at most ${limit} bytes`, { connection: "close" });
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Parses a JSON body: UTF-8 (strictly), no byte-order mark, numbers that
 * fit a double, at most MAX_DEPTH levels. Errors name `what`.
 */
export function parseJson(bytes, what) {
  let text;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw invalid(`${what}: not valid UTF-8`);
  }
  let value;
  try {
    value = JSON.parse(text, (key, v) => {
      // JSON.parse turns 1e999 into Infinity; JSON has no such number.
      if (typeof v === "number" && !Number.isFinite(v)) {
        throw new RangeError(`${key === "" ? "" : `${key}: `}number out of range`);
      }
      return v;
    });
  } catch (err) {
    throw invalid(`${what}: ${err instanceof RangeError ? err.message : `invalid JSON (${err.message})`}`);
  }
  if (depth(value) > MAX_DEPTH) throw invalid(`${what}: nested deeper than ${MAX_DEPTH} levels`);
  return value;
}

/** The nesting depth of a parsed JSON value (iterative: no recursion limit). */
function depth(value) {
  let max = 0;
  const stack = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop();
    if (v === null || typeof v !== "object") continue;
    max = Math.max(max, d + 1);
    if (max > MAX_DEPTH) return max;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/** A JSON value as text with object keys sorted: equal values, equal text. */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * A decimal integer from 0 to `max` (at most 2^53 − 1) from a query
 * parameter or header; `name` is what errors call it.
 */
export function parseInteger(name, text, max = Number.MAX_SAFE_INTEGER) {
  if (!/^[0-9]+$/.test(text) || Number(text) > max) {
    throw invalid(`${name}: must be an integer from 0 to ${max}, got ${quoted(text)}`);
  }
  return Number(text);
}

/** Checks an id or key: non-blank, at most 255 bytes. */
export function checkId(name, id, encoding = "utf8") {
  const bytes = Buffer.byteLength(id, encoding);
  if (bytes > MAX_ID_BYTES) throw invalid(`${name}: must be at most ${MAX_ID_BYTES} bytes, got ${bytes}`);
  if (id.trim() === "") throw invalid(`${name}: must not be blank`);
  return id;
}

/** The task id from the path: percent-decoded, non-blank, at most 255 bytes. */
export const taskIdFrom = (rawId) => idFrom("taskId", rawId);

/** An id from the path, percent-decoded and checked; errors name it `name` (`taskId`, `batchId`). */
export function idFrom(name, rawId) {
  let id;
  try {
    id = decodeURIComponent(rawId);
  } catch {
    throw invalid(`${name}: invalid percent-encoding in the path`);
  }
  return checkId(name, id);
}

/** The Idempotency-Key header, checked, or undefined. */
export function idempotencyKey(req) {
  const key = header(req, "idempotency-key");
  return key === undefined ? undefined : checkId("Idempotency-Key", key, "latin1");
}

/** The longest `epoch` a request may send (PROTOCOL.md §Resume). */
const MAX_EPOCH_BYTES = 255;

/**
 * The parameters of a resume, a task's or a batch's (PROTOCOL.md §Resume):
 * `cursor` (required), `waitMs` (0 to 30,000; 0 when absent), `snapshot`,
 * and `epoch`, the one the client holds (undefined when absent).
 */
export function resumeParams(query) {
  const cursorText = query.get("cursor");
  if (cursorText === null) throw invalid("cursor: query parameter is required");
  const cursor = parseInteger("cursor", cursorText);
  const waitText = query.get("waitMs");
  const waitMs = waitText === null ? 0 : parseInteger("waitMs", waitText, MAX_WAIT_MS);
  const snapshot = parseFlag(query, "snapshot");
  const epoch = query.get("epoch") ?? undefined;
  if (epoch !== undefined && (epoch.trim() === "" || Buffer.byteLength(epoch) > MAX_EPOCH_BYTES)) {
    throw invalid(`epoch: must be 1 to ${MAX_EPOCH_BYTES} bytes and not blank, got ${quoted(epoch)}`);
  }
  return { cursor, waitMs, snapshot, epoch };
}

/**
 * The starting cursor of an event stream: `Last-Event-ID`, else `?cursor=`,
 * else 0. `?cursor=` is judged even when `Last-Event-ID` wins over it.
 */
export function streamCursor(req, query) {
  const lastEventId = header(req, "last-event-id");
  const queryCursor = query.get("cursor") === null ? 0 : parseInteger("cursor", query.get("cursor"));
  return lastEventId === undefined ? queryCursor : parseInteger("Last-Event-ID", lastEventId.trim());
}

/** `snapshot` and other flags: 1, true or empty for yes; 0 or false (or absent) for no; anything else 400. */
export function parseFlag(query, name) {
  const v = query.get(name);
  if (v === null || v === "0" || v === "false") return false;
  if (v === "" || v === "1" || v === "true") return true;
  throw invalid(`${name}: must be 1 or 0, got ${quoted(v)}`);
}

/**
 * A header's value as sent (Node reads header bytes as latin1), or
 * undefined. Repeated headers are joined by Node.
 */
export function header(req, name) {
  if (name === "authorization" && misreads("authorization-last-wins")) return req.headersDistinct.authorization?.at(-1);
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

/** A client string in a message, cut short. */
export function quoted(s) {
  const chars = [...s];
  return chars.length > 64 ? `"${chars.slice(0, 64).join("")}…"` : `"${s}"`;
}

/** What a JSON value is, for messages ("a string", "an array", "null"). */
export function typeOf(v) {
  return v === null ? "null" : Array.isArray(v) ? "an array" : `a ${typeof v}`;
}

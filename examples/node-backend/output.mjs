// POST /v1/tasks/{id}/output/{stream} (PROTOCOL.md §Live output, Append):
// an executor appends a chunk of a task's live output, signed exactly
// like a callback. The checks before the body are the callback's, in its
// order (callbacks.mjs), so that an unsigned request costs almost nothing
// and learns nothing; then core judges the chunk (the store's
// `appendOutput`, core's `OutputLog`): nothing about output is decided
// here but the HTTP answer.
//
// A signed append is not remembered as used, unlike a callback: it is
// addressed by (attempt, offset), so the same request sent again is a
// `duplicate-chunk`, and after a newer attempt a `stale-attempt`.

import { checkStreamName } from "taskwire";
import { HttpError, checkId, invalid, parseJson, parseInteger, quoted, sendJson, taskIdFrom, tooLarge, typeOf, unauthorized } from "./http.mjs";
import { checkHeaders, readSigned } from "./sign.mjs";

/**
 * The largest append body (PROTOCOL.md §Live output): a chunk of core's
 * most UTF-16 units (65,536), each written as JSON's longest escape
 * (`\u0000`, 6 bytes), and room for the other fields. The other routes'
 * 64 KiB would refuse a chunk core allows.
 */
export const APPEND_BODY_LIMIT = 6 * 65_536 + 1024;

/** What each refusal's message says, naming the field (the code is core's reason). */
const REFUSALS = {
  "chunk-conflict": (stream, a) => `body.text: differs from the text stream ${quoted(stream)} already holds at offset ${a.offset}`,
  "output-gap": (stream, a) => `body.offset: starts past the end of stream ${quoted(stream)}; the next chunk starts at ${a.expected}`,
  "stale-attempt": () => "body.attempt: a newer attempt of the task has started; this one's output is fenced off",
  "not-started": () => "body.attempt: this attempt of the task has not started",
  "output-closed": () => "body.attempt: the task has ended; its output is closed",
};

/** The stream name of a path segment (percent-encoded), checked by core; 400 naming `stream`. */
export function streamFrom(rawStream) {
  let name;
  try {
    name = decodeURIComponent(rawStream);
  } catch {
    throw invalid(`stream: not a valid percent-encoded path segment: ${quoted(rawStream)}`);
  }
  checkStreamName(name, "stream");
  return name;
}

/** Judges one append; answered after the chunk is on disk. */
export async function appendOutput({ req, res, rawId, segments, store, config }) {
  let signed;
  let taskId;
  let stream;
  let tenant;
  let raw;
  try {
    // 1. The headers, the ids and the declared length, before the body.
    signed = checkHeaders(req.headersDistinct);
    checkId("webhook-id", signed.id, "latin1");
    taskId = taskIdFrom(rawId);
    stream = streamFrom(segments[4]);
    if (Number(req.headers["content-length"] ?? 0) > APPEND_BODY_LIMIT) throw tooLarge(APPEND_BODY_LIMIT);
    // 2 and 3. The tenant's secrets, then the body, hashed as it arrives.
    ({ tenant, raw } = await readSigned(req, signed, taskId, { store, config, limit: APPEND_BODY_LIMIT }));
  } catch (err) {
    // Answered before the whole body was read: do not keep the connection.
    if (err instanceof HttpError && raw === undefined) err.headers = { ...err.headers, connection: "close" };
    throw err;
  }
  // 4. The task and stream the body is signed for: another's is a 401.
  const body = parseJson(raw, "body");
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw invalid(`body: must be a JSON object, got ${typeOf(body)}`);
  for (const field of ["taskId", "stream"]) {
    if (typeof body[field] !== "string") throw invalid(`body.${field}: expected a string, got ${typeOf(body[field])}`);
  }
  if (body.taskId !== taskId || body.stream !== stream) {
    throw unauthorized(`body.taskId: the body is signed for task ${quoted(body.taskId)} stream ${quoted(body.stream)}, not for this one`);
  }
  // 5. The chunk, checked (400 naming body.attempt, .offset, .text) and
  // judged by core against the stream.
  const a = store.appendOutput(taskId, stream, { attempt: body.attempt, offset: body.offset, text: body.text });
  if (!a.accepted) throw new HttpError(409, a.reason, REFUSALS[a.reason](stream, a));
  sendJson(res, 200, { reason: a.reason, attempt: a.attempt, offset: a.offset, expected: a.expected, superseded: a.superseded });
}

/**
 * What a follower asks for on a task's watch routes: `{stream, attempt,
 * offset}` from `output`, `outputAttempt` (default 0: nothing) and
 * `outputOffset` (default 0), each judged when sent (400 naming it);
 * null when it did not ask for output (then nothing changes).
 */
export function outputWanted(query) {
  const int = (name) => (query.get(name) === null ? 0 : parseInteger(name, query.get(name)));
  const attempt = int("outputAttempt");
  const offset = int("outputOffset");
  const name = query.get("output");
  if (name === null) return null;
  checkStreamName(name, "output");
  return { stream: name, attempt, offset };
}

/** The `output` a follower is sent: `{stream, attempt, offset, text, complete}` (what a page's OutputMirror takes). */
export function outputJson(stream, lacks) {
  return { stream, attempt: lacks.attempt, offset: lacks.offset, text: lacks.text, complete: lacks.complete };
}

// HTTP for the conformance checks: global fetch, one transcript per check.
//
// Every exchange is recorded so that a failing check can print the
// requests and responses that led to it. Two rules apply to every
// response, whatever the check expects:
// - a 5xx other than an overload answer is a failure (PROTOCOL.md: a 500
//   is "never the answer to a client error");
// - 429/503 must carry Retry-After; the request is retried after it, so an
//   overloaded backend is slow rather than failing unrelated checks.
// An idempotent request whose connection closed before any answer came
// (a pooled keep-alive connection the server closed as it was reused:
// EPIPE, ECONNRESET) is sent once more, as RFC 9110 §9.2.2 lets a client
// do; the transcript shows both attempts.

import { AssertionError } from 'node:assert';

const BODY_LIMIT = 1500;
const MAX_OVERLOAD_RETRIES = 3;
/** Methods a client may resend after a connection closed unanswered (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);
/** Connection errors that mean the request was not answered at all. */
const CLOSED_UNANSWERED = /EPIPE|ECONNRESET|other side closed/;
/** How long a stream may take to send its headers. */
const HEAD_TIMEOUT_MS = 10_000;

/** The exchanges of one check, printed when it fails. */
export class Transcript {
  /** `redact` maps secret strings (bearer tokens) to the label printed instead. */
  constructor(redact = {}) {
    this.entries = [];
    this.redact = Object.entries(redact).filter(([secret]) => secret);
    this.live = new Set();
  }

  /** Tracks a request or stream so that `abortAll` can end it. */
  track(controller) {
    this.live.add(controller);
    return () => this.live.delete(controller);
  }

  /** Ends whatever the check left open (held requests, streams). */
  abortAll() {
    for (const c of this.live) c.abort();
    this.live.clear();
  }

  add(entry) {
    this.entries.push(entry);
    return entry;
  }

  /** The last `n` exchanges as text, with bearer tokens masked. */
  describe(n = 6) {
    const shown = this.entries.slice(-n);
    const skipped = this.entries.length - shown.length;
    const lines = skipped > 0 ? [`(${skipped} earlier exchanges not shown)`] : [];
    for (const e of shown) lines.push(formatExchange(e));
    let text = lines.join('\n');
    for (const [secret, label] of this.redact) text = text.split(secret).join(label);
    return text;
  }
}

function clip(text) {
  if (text === undefined || text === null) return '';
  const s = String(text);
  return s.length > BODY_LIMIT ? `${s.slice(0, BODY_LIMIT)}… (${s.length} chars)` : s;
}

function formatExchange(e) {
  const out = [`→ ${e.method} ${e.url}`];
  for (const [k, v] of Object.entries(e.requestHeaders ?? {})) out.push(`    ${k}: ${v}`);
  if (e.requestBody !== undefined) out.push(`    ${clip(e.requestBody)}`);
  if (e.error) {
    out.push(`← (no response: ${e.error})`);
  } else if (e.status !== undefined) {
    out.push(`← ${e.status} after ${e.ms} ms`);
    for (const [k, v] of e.responseHeaders ?? []) out.push(`    ${k}: ${v}`);
    if (e.responseBody) out.push(`    ${clip(e.responseBody)}`);
  } else {
    out.push('← (pending)');
  }
  return out.join('\n');
}

function describeBody(body) {
  if (body === undefined || typeof body === 'string') return body;
  if (body instanceof ReadableStream) return '<streamed body>';
  return `<${body.length} bytes>`;
}

const SHOWN_RESPONSE_HEADERS = new Set([
  'content-type',
  'cache-control',
  'retry-after',
  'allow',
  'location',
]);

function shownHeaders(headers) {
  return [...headers].filter(([k]) => SHOWN_RESPONSE_HEADERS.has(k));
}

/**
 * A client for one base URL and one credential (or none). `request`
 * returns `{status, headers, text, json, ms}`; `json` is undefined when the
 * body is not JSON.
 */
export class Http {
  constructor(baseUrl, { token = null, transcript, timeoutMs = 40_000 } = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.token = token;
    this.transcript = transcript;
    this.timeoutMs = timeoutMs;
  }

  url(path) {
    return this.baseUrl + path;
  }

  /**
   * `json` is serialized; `body` is sent as is (a string or bytes). The
   * bearer token is sent unless `token: null` is passed; `headers` adds
   * or overrides headers.
   */
  async request(method, path, { json, body, headers = {}, token = this.token } = {}) {
    for (let attempt = 0; ; attempt++) {
      const res = await this.onceResent(method, path, { json, body, headers, token });
      if (![429, 503].includes(res.status) || attempt >= MAX_OVERLOAD_RETRIES) {
        return res;
      }
      const after = Number(res.headers.get('retry-after'));
      if (!Number.isFinite(after) || after < 0) {
        throw new AssertionError({
          message: `${res.status} without a valid Retry-After header (PROTOCOL.md §Conventions)`,
        });
      }
      await new Promise((r) => setTimeout(r, Math.min(after, 5) * 1000));
    }
  }

  /** [`once`], sent again if its connection closed before any answer. */
  async onceResent(method, path, options) {
    try {
      return await this.once(method, path, options);
    } catch (err) {
      const replayable = IDEMPOTENT.has(method) && !(options.body instanceof ReadableStream);
      if (!replayable || !err.closedUnanswered) throw err;
      return this.once(method, path, options);
    }
  }

  async once(method, path, { json, body, headers, token }) {
    const sent = {};
    if (json !== undefined) {
      body = JSON.stringify(json);
      sent['content-type'] = 'application/json';
    }
    if (token) sent.authorization = `Bearer ${token}`;
    Object.assign(sent, headers);
    for (const k of Object.keys(sent)) if (sent[k] === undefined) delete sent[k];
    const entry = this.transcript.add({
      method,
      url: this.url(path),
      requestHeaders: sent,
      requestBody: describeBody(body),
    });
    const started = Date.now();
    const controller = new AbortController();
    const untrack = this.transcript.track(controller);
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    let response;
    let text;
    try {
      response = await fetch(entry.url, {
        method,
        headers: sent,
        body,
        // A ReadableStream body goes out chunked; fetch requires half duplex for it.
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        redirect: 'manual',
        signal: controller.signal,
      });
      text = await response.text();
    } catch (err) {
      entry.error = err.cause?.message ?? err.message;
      const failure = new AssertionError({ message: `${method} ${path}: request failed: ${entry.error}` });
      failure.closedUnanswered = !controller.signal.aborted && CLOSED_UNANSWERED.test(`${err.cause?.code ?? ''} ${entry.error}`);
      throw failure;
    } finally {
      clearTimeout(timer);
      untrack();
    }
    entry.status = response.status;
    entry.ms = Date.now() - started;
    entry.responseHeaders = shownHeaders(response.headers);
    entry.responseBody = text;
    if (response.status >= 500 && response.status !== 503) {
      throw new AssertionError({
        message: `${method} ${path} answered ${response.status}: a server error is never a conformant answer`,
      });
    }
    let parsed;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: response.status, headers: response.headers, text, json: parsed, ms: entry.ms };
  }

  /**
   * Opens a streaming GET and returns the raw fetch Response once the
   * headers have arrived (for SSE). The transcript gets the head; the
   * caller records the messages it reads.
   */
  async open(path, { headers = {}, token = this.token, controller } = {}) {
    const sent = { accept: 'text/event-stream', ...headers };
    if (token) sent.authorization = `Bearer ${token}`;
    const entry = this.transcript.add({ method: 'GET', url: this.url(path), requestHeaders: sent });
    const started = Date.now();
    // The stream stays open until the caller closes it or the check ends.
    this.transcript.track(controller);
    const headTimer = setTimeout(() => controller.abort(), HEAD_TIMEOUT_MS);
    let response;
    try {
      response = await fetch(entry.url, { headers: sent, signal: controller.signal });
    } catch (err) {
      entry.error = err.cause?.message ?? err.message;
      throw new AssertionError({ message: `GET ${path}: request failed: ${entry.error}` });
    } finally {
      clearTimeout(headTimer);
    }
    entry.status = response.status;
    entry.ms = Date.now() - started;
    entry.responseHeaders = shownHeaders(response.headers);
    if (response.status >= 500 && response.status !== 503) {
      entry.responseBody = await response.text();
      throw new AssertionError({
        message: `GET ${path} answered ${response.status}: a server error is never a conformant answer`,
      });
    }
    return { response, entry };
  }
}

// The client's executor: what the Rust side (wasm/src/client) asks of
// the runtime, and nothing it decides. A watch's `Runner` sends the
// requests its follow (a wasm `WatchHandle`) asks for, with fetch and an
// AbortController each; feeds back heads, bodies, stream chunks and
// failures, its one timer, and the runtime's network and visibility;
// reads and writes the storage; and hands the follow's events to the
// page. `post` sends the client's POSTs and waits out their retries.
// Here rather than in Rust: the page pays ~5 KB gzip less for these
// lines than for an executor in Rust (its closures, promise callbacks
// and web-sys glue; docs/package.md).
//
// Nothing here assumes a window: `fetch` is looked up on `globalThis`,
// which exists in windows, workers and Node ≥ 20.

import { TaskwireError } from "./error.js";
import { ClientCore } from "./taskwire_wasm.js";
import { isOnline } from "./watch.js";

/** `target[key]`, or undefined where that throws. */
function property(target, key) {
  try {
    return target[key];
  } catch {
    return undefined;
  }
}

/** A thrown or rejected value as a message. */
function describe(value) {
  if (typeof value === "string") return value;
  const message = property(value, "message");
  return typeof message === "string" ? message : "unknown error";
}

/**
 * `s` as it reads after a trip through wasm (lone surrogates become
 * U+FFFD), for text that once crossed and no longer does: the messages
 * stay what they were.
 */
const wellFormed = (s) => s.replace(/[\uD800-\uDFFF]/gu, "\uFFFD");

/**
 * A request that failed without any response: its message, or, when
 * ./cors.js (loaded only then) finds the server up but refusing this
 * page's origin, a CORS explanation in front of it.
 */
const explained = (url, message) => import("./cors.js").then((m) => m.explain(url, message), () => message);

/** `value instanceof type`, false where that throws (a proxy, no such global). */
function is(value, type) {
  try {
    return value instanceof globalThis[type];
  } catch {
    return false;
  }
}

/**
 * Starts a request: `fetch` (the injected one, else the global one) with
 * the client's `headers` (a flat `[name, value, …]` array), then `extra`
 * ones, the abort `signal`, and `cache: "no-store"` (no intermediary may
 * cache a resume answer, PROTOCOL.md); the promise of the response head.
 * Throws when there is no fetch, or fetch throws.
 */
function send(http, method, url, extra, signal, body) {
  const run = http.fetch ?? globalThis.fetch;
  if (typeof run !== "function") throw "no fetch in this runtime";
  const init = { method, headers: {}, signal, cache: "no-store" };
  for (const list of [http.headers, extra]) for (let i = 0; i + 1 < list.length; i += 2) init.headers[list[i]] = list[i + 1];
  if (body !== undefined) init.body = body;
  return run.call(globalThis, url, init);
}

/** Attempts after the first, when a retry is safe. */
const RETRIES = 4;

/**
 * POSTs `body` (JSON text, if any) to `core.url(taskId, tail)` with the
 * client's headers; resolves to the 2xx body (JSON text). Network
 * failures, 429 and 5xx are retried after a backoff delay (the Rust
 * side's `delay`) when a retry is safe: an idempotency `key` makes it so
 * for a create, and a delivery always has one; a cancel or a decision
 * repeated is judged a duplicate by the server (`duplicate-cancel`,
 * `duplicate-decision`). Anything else rejects with a `TaskwireError`
 * carrying the server's code (when it is one of PROTOCOL.md's, else
 * `http-<status>`) and `status`.
 */
export function post(core, http, taskId, tail, body, key) {
  const url = core.url(taskId ?? "", tail);
  const retries = taskId === undefined && key === undefined ? 0 : RETRIES;
  const extra = body === undefined ? [] : ["content-type", "application/json"];
  if (key !== undefined) extra.push("idempotency-key", wellFormed(key));
  return new Promise((resolve, reject) => {
    const fail = (code, message, status) => reject(new TaskwireError(code, wellFormed(message), status));
    // After attempt `n` failed: the next one after a delay, or `network`.
    const retry = (n, failure, retryAfter = "") => {
      if (n >= retries) return fail("network", "network error: " + failure);
      setTimeout(() => attempt(n + 1), core.delay(n + 1, Math.random(), retryAfter, Date.now()));
    };
    const judge = (status, text) => {
      let parsed;
      let valid = true;
      try {
        parsed = JSON.parse(text);
      } catch {
        valid = false;
      }
      if (status >= 200 && status < 300 && valid) return resolve(text);
      const field = (name) => {
        const inner = typeof parsed === "object" && parsed !== null ? parsed.error : undefined;
        const value = typeof inner === "object" && inner !== null ? inner[name] : undefined;
        return typeof value === "string" ? value : undefined;
      };
      const code = field("code");
      fail(code !== undefined && ClientCore.known(code) ? code : "http-" + status, field("message") ?? "HTTP " + status, status);
    };
    const attempt = (n) => {
      let controller, sent;
      try {
        controller = new AbortController();
      } catch {
        return fail("network", "AbortController is unavailable");
      }
      try {
        sent = send(http, "POST", url, extra, controller.signal, body);
      } catch (e) {
        return retry(n, describe(e));
      }
      Promise.resolve(sent).then(
        (response) => {
          if (!is(response, "Response")) return retry(n, "fetch did not resolve to a Response");
          const status = response.status;
          if ((status === 429 || status >= 500) && n < retries) return retry(n, "HTTP " + status, response.headers.get("retry-after") ?? "");
          let text;
          try {
            text = response.text();
          } catch {
            return judge(status, "");
          }
          Promise.resolve(text).then(
            (t) => judge(status, typeof t === "string" ? t : ""),
            () => judge(status, ""),
          );
        },
        (e) => retry(n, describe(e)),
      );
    };
    attempt(0);
  });
}

/** `storage[method](key, value?)`, undefined where anything throws (a full or disabled storage is no error). */
function store(s, method, value) {
  try {
    const fn = s.storage[method];
    if (typeof fn === "function") return value === undefined ? fn.call(s.storage, s.key) : fn.call(s.storage, s.key, value);
  } catch {
    // best effort
  }
}

/**
 * A watch in this tab: `open(stored, online, now, random)` makes its
 * wasm `WatchHandle` (`stored`: the text persisted in `storage` under
 * `storageKey`, read unless `given`; empty when none); `sink(kind, payload)` receives
 * every event (`fail` as a `TaskwireError`). The handle `Watch` and
 * `BatchWatch` drive (./watch.js).
 */
export function run(http, storage, storageKey, given, sink, open) {
  const s = storage !== undefined && storage !== null && typeof storageKey === "string" ? { storage, key: storageKey } : undefined;
  const text = s && given === undefined ? store(s, "getItem") : undefined;
  return new Runner(open(typeof text === "string" ? text : "", isOnline(), Date.now(), Math.random()), http, sink, s);
}

/** The bytes of an input without any (`feed` takes them always). */
const NONE = new Uint8Array();

class Runner {
  /** `[id, AbortController]` of the request in flight. */
  #flight;
  /** `[at, setTimeout's id]` of the one timer. */
  #timer;

  constructor(handle, http, sink, storage) {
    this.h = handle;
    this.http = http;
    this.sink = sink;
    this.storage = storage;
    this.#pump();
  }

  /** Feeds one input (see `WatchHandle::feed`), then carries out what the follow asks. */
  #feed(kind, id = 0, status = 0, text = "", bytes = NONE) {
    this.h?.feed(kind, Date.now(), isOnline(), id, status, text, bytes);
    this.#pump();
  }

  #pump() {
    let saved = false;
    // The outputs in order; `timeout`, always the last, ends them.
    for (let kind = ""; kind !== "timeout" && this.h; ) {
      const [out, data] = JSON.parse(this.h.poll());
      kind = out;
      if (kind === "abort") {
        const flight = this.#flight;
        if (flight?.[0] === data) {
          this.#flight = undefined;
          flight[1].abort();
        }
      } else if (kind === "request") {
        this.#send(data);
      } else if (kind === "timeout") {
        this.#arm(data);
      } else {
        if (!saved && (kind === "update" || kind === "done")) {
          // The events of one input all follow its merge: the mirror is
          // already what they lead to.
          saved = true;
          const text = this.storage && this.h.read(1);
          if (text !== undefined) store(this.storage, "setItem", text);
        }
        // The JS side catches listener errors; nothing may break the loop.
        try {
          this.sink(kind, kind === "fail" ? new TaskwireError(data.code, data.message, data.status) : data);
        } catch {
          // ignored
        }
      }
    }
  }

  /** One timer for the follow's next deadline (`at`, null for none); replaced when it moves. */
  #arm(at) {
    const old = this.#timer;
    if (at === (old?.[0] ?? null)) return;
    // setTimeout takes whole milliseconds up to 2^31 - 1.
    const ms = Math.min(Math.max(at - Date.now(), 0), 2147483647) | 0;
    this.#timer = at === null ? undefined : [at, setTimeout(() => ((this.#timer = undefined), this.#feed(1)), ms)];
    if (old) clearTimeout(old[1]);
  }

  #wants(id) {
    return this.#flight?.[0] === id;
  }

  /** Sends a request and feeds back, in callbacks, everything that happens to it. */
  #send({ id, url, accept, lastEventId }) {
    let controller, head;
    try {
      controller = new AbortController();
    } catch {
      return this.#feed(8, id, 0, "AbortController is unavailable");
    }
    this.#flight = [id, controller];
    const stream = lastEventId !== null;
    try {
      head = send(this.http, "GET", url, stream ? ["accept", accept, "last-event-id", lastEventId] : ["accept", accept], controller.signal);
    } catch (e) {
      return this.#feed(8, id, 0, describe(e));
    }
    const failed = (error) => controller.signal.aborted || this.#feed(8, id, 0, error);
    const fail = (e) => failed(describe(e));
    Promise.resolve(head).then((response) => {
      if (!is(response, "Response")) return failed("fetch did not resolve to a Response");
      this.#feed(4, id, response.status, response.headers.get("retry-after") ?? "");
      if (!this.#wants(id)) return;
      if (!stream) {
        let body;
        try {
          body = response.arrayBuffer();
        } catch (e) {
          return fail(e);
        }
        return void Promise.resolve(body).then((buffer) => this.#feed(5, id, 0, undefined, new Uint8Array(buffer)), fail);
      }
      let read;
      try {
        const reader = response.body?.getReader();
        if (typeof reader?.read === "function") read = () => reader.read();
      } catch {
        // no reader
      }
      if (!read) return this.#feed(9, id);
      // Reads the stream chunk by chunk until it ends or is no longer wanted.
      const next = () => {
        let chunk;
        try {
          chunk = read();
        } catch (e) {
          return fail(e);
        }
        Promise.resolve(chunk).then((chunk) => {
          // Not an object: the stream is over.
          if ((typeof chunk !== "object" || chunk === null) && typeof chunk !== "function") return this.#feed(7, id);
          if (property(chunk, "done")) return this.#feed(7, id);
          const value = property(chunk, "value");
          if (!is(value, "Uint8Array")) return failed("stream chunk is not bytes");
          this.#feed(6, id, 0, undefined, value);
          if (this.#wants(id)) next();
        }, fail);
      };
      next();
    }, (e) => controller.signal.aborted || explained(url, describe(e)).then(failed));
  }

  /** Stops now: aborts the request in flight, cancels the timer. */
  stop() {
    this.#feed(0);
    if (this.#timer) clearTimeout(this.#timer[1]);
    this.#timer = undefined;
  }

  /** The page became visible: cuts a backoff wait short. */
  visible() {
    this.#feed(3);
  }

  /** `online` or `offline` fired: the request in flight may be stranded on a dead connection, so it is cut and the watch starts over. */
  network() {
    this.#feed(2);
  }

  /** The cursor of the next request (a task's version, a batch's cursor). */
  cursor() {
    return Number(this.h.read(2));
  }

  /** What was known at the start (restored or given), as JSON: the task or `null`; a batch's snapshot answer. */
  initial() {
    return this.h.read(0);
  }

  /** Stops and frees the wasm memory. */
  free() {
    this.stop();
    this.h?.free();
    this.h = undefined;
  }
}

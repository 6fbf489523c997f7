// TaskClient: the browser client. The loop (requests, merging, backoff,
// SSE, fallback, persistence) is Rust (taskwire-core's Follow, run by
// wasm/src/client); this file owns what is about the JavaScript runtime:
// listeners for `online`/`offline`/`visibilitychange`, finding
// localStorage, and turning the loop's events into callbacks and the
// `done` promise. It never assumes `window`:
// it runs in windows, workers and Node ≥ 20.

import * as raw from "./taskwire_wasm.js";
import { __internal } from "./api.js";

const { call, text, str, invalid, typeName } = __internal;


function isOnline() {
  const nav = globalThis.navigator;
  return !(nav && nav.onLine === false);
}

/** localStorage, if this runtime has a usable one (never throws). */
function localStore() {
  try {
    const s = globalThis.localStorage;
    return s && typeof s.getItem === "function" ? s : undefined;
  } catch {
    return undefined; // access denied (e.g. disabled storage)
  }
}

/**
 * Calls a user listener. Its errors must not unwind through wasm (the
 * loop would lose its place), nor stop the watch: they are reported the
 * way the runtime reports an uncaught error in an event listener
 * (`reportError` in windows and workers), or logged where there is no
 * such thing (Node 20).
 */
function safely(fn, value) {
  if (typeof fn !== "function") return;
  try {
    fn(value);
  } catch (e) {
    if (typeof globalThis.reportError === "function") globalThis.reportError(e);
    else console.error("taskwire: a watch listener threw:", e);
  }
}

/** Reads an option, turning a throwing getter into a coded error. */
function option(options, key) {
  try {
    return options[key];
  } catch (e) {
    throw invalid(`options.${key}: cannot be read (${e instanceof Error ? e.message : String(e)})`);
  }
}

/** Follows one task; made by `TaskClient.watch`. */
class Watch {
  #handle;
  #task;
  #status = { state: "connecting" };
  #cleanup = [];

  constructor(core, taskId, options, persistPrefix) {
    str(taskId, "taskId");
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    const cursor = option(options, "cursor");
    if (cursor !== undefined && typeof cursor !== "number") throw invalid(`options.cursor: must be a number, got ${typeName(cursor)}`);
    const onUpdate = option(options, "onUpdate");
    const onStatus = option(options, "onStatus");
    const onReject = option(options, "onReject");
    for (const [name, fn] of [["onUpdate", onUpdate], ["onStatus", onStatus], ["onReject", onReject]]) {
      if (fn !== undefined && typeof fn !== "function") throw invalid(`options.${name}: must be a function`);
    }

    let resolve, reject;
    this.done = new Promise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // `stop()` rejects `done`; nobody is obliged to await it.
    this.done.catch(() => {});

    const sink = (kind, json) => {
      // `fail` carries the TaskwireError itself; the rest, JSON text.
      if (kind === "fail") {
        this.#detach();
        reject(json);
        return;
      }
      let payload;
      try {
        payload = JSON.parse(json);
      } catch {
        return;
      }
      switch (kind) {
        case "update":
          this.#task = payload.task ?? this.#task;
          safely(onUpdate, payload);
          break;
        case "reject":
          safely(onReject, payload);
          break;
        case "status":
          this.#status = payload;
          if (payload.state === "closed") this.#detach();
          safely(onStatus, payload);
          break;
        case "done":
          this.#task = payload.task ?? this.#task;
          resolve(this.#task);
          break;
      }
    };

    // Persistence is the Rust side's: it reads and writes the storage.
    const storageKey = persistPrefix === undefined ? undefined : persistPrefix + taskId;
    const storage = storageKey === undefined ? undefined : localStore();
    this.#handle = call(() => core.watch({ taskId, cursor, storage, storageKey, sink, online: isOnline }));
    const initial = this.#handle.initial_task();
    if (initial !== "null") this.#task = JSON.parse(initial);
    this.#attach();
  }

  /**
   * Reconnect at once when the network changes or the page is shown. On
   * `online`/`offline` the request in flight is cut too: it may hang on a
   * connection that died with the old network.
   */
  #attach() {
    const network = () => this.#handle?.network();
    const target = globalThis;
    if (typeof target.addEventListener === "function") {
      for (const type of ["online", "offline"]) {
        target.addEventListener(type, network);
        this.#cleanup.push(() => target.removeEventListener(type, network));
      }
    }
    const doc = globalThis.document;
    if (doc && typeof doc.addEventListener === "function") {
      const onVisible = () => {
        if (doc.visibilityState === "visible") this.#handle?.visible();
      };
      doc.addEventListener("visibilitychange", onVisible);
      this.#cleanup.push(() => doc.removeEventListener("visibilitychange", onVisible));
    }
  }

  #detach() {
    for (const undo of this.#cleanup.splice(0)) undo();
  }

  /** The task as known (no history), or undefined before the first answer. */
  get task() {
    return this.#task;
  }

  /** The version known: the cursor of the next request. */
  get version() {
    return this.#task?.version ?? 0;
  }

  /** The last status reported. */
  get status() {
    return this.#status;
  }

  /** Stops now: aborts the request in flight, cancels timers; `done` rejects with code `stopped`. */
  stop() {
    this.#handle?.stop();
    this.#detach();
  }

  /** `using watch = client.watch(…)`: stops the watch and frees its memory at the end of the scope. */
  [Symbol.dispose]() {
    this.stop();
    const handle = this.#handle;
    this.#handle = undefined;
    handle?.free();
  }
}

/** `init` with `Authorization: Bearer <token>` added. */
function withBearer(init, token) {
  return { ...init, headers: { ...init?.headers, authorization: `Bearer ${token}` } };
}

/** Whether a 401 says the token expired (the one refusal a fresh token cures). */
async function isExpired(response) {
  try {
    return (await response.clone().json())?.error?.code === "token-expired";
  } catch {
    return false;
  }
}

/**
 * The client's `fetch` with the `token` option's credential. A token
 * function is asked for the first token, and again when the server
 * answers 401 `token-expired`: then the request is sent once more with
 * the fresh token, so the watch goes on. Requests that expire together
 * share one ask; a second 401 reaches the loop, which stops the watch.
 * A failing or non-string ask fails the request like a network error
 * (the loop retries with backoff). Here, not in Rust: the page pays a few
 * hundred bytes of JS for it, no wasm.
 */
function bearerFetch(inner, source) {
  const send = inner ?? ((url, init) => globalThis.fetch(url, init));
  if (typeof source === "string") return (url, init) => send(url, withBearer(init, source));
  let current; // Promise of the token in use
  let replaced; // the token the latest ask replaces
  const ask = () => {
    const asked = Promise.resolve()
      .then(source)
      .then((token) => {
        if (typeof token !== "string" || token === "") throw invalid(`options.token: the function must return a non-empty string, got ${typeName(token)}`);
        return token;
      });
    current = asked;
    // A failed ask is asked again by the next request.
    asked.catch(() => current === asked && (current = undefined));
    return asked;
  };
  return async (url, init) => {
    const token = await (current ?? ask());
    const response = await send(url, withBearer(init, token));
    if (response.status !== 401 || !(await isExpired(response))) return response;
    if (replaced !== token || current === undefined) {
      replaced = token;
      ask();
    }
    return send(url, withBearer(init, await current));
  };
}

/** Talks PROTOCOL.md to one backend. */
export class TaskClient {
  #core;
  #persistPrefix;

  constructor(options) {
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    const baseUrl = option(options, "baseUrl");
    str(baseUrl, "options.baseUrl");
    const headers = option(options, "headers") ?? {};
    if (typeof headers !== "object" || typeName(headers) === "array") throw invalid("options.headers: must be an object of strings");
    let fetchFn = option(options, "fetch");
    if (fetchFn !== undefined && typeof fetchFn !== "function") throw invalid("options.fetch: must be a function");
    const token = option(options, "token");
    if (token !== undefined && typeof token !== "function" && (typeof token !== "string" || token === "")) {
      throw invalid(`options.token: must be a non-empty string or a function returning one, got ${typeName(token)}`);
    }
    const persist = option(options, "persist");
    if (persist === true) this.#persistPrefix = "taskwire:";
    else if (typeof persist === "string" && persist !== "") this.#persistPrefix = persist;
    else if (persist !== undefined && persist !== false) throw invalid("options.persist: must be a boolean or a non-empty key prefix");
    let entries;
    try {
      entries = Object.entries(headers);
    } catch (e) {
      throw invalid(`options.headers: cannot be read (${e instanceof Error ? e.message : String(e)})`);
    }
    const pairs = [];
    for (const [name, value] of entries) {
      if (typeof value !== "string") throw invalid(`options.headers.${name}: must be a string, got ${typeName(value)}`);
      if (token !== undefined && name.toLowerCase() === "authorization") throw invalid("options.token: give the token here or an Authorization header in options.headers, not both");
      pairs.push(name, value);
    }
    if (token !== undefined) fetchFn = bearerFetch(fetchFn, token);
    const backoff = option(options, "backoff") ?? {};
    if (typeof backoff !== "object") throw invalid("options.backoff: must be an object");
    const initialMs = option(backoff, "initialMs");
    const maxMs = option(backoff, "maxMs");
    const transport = option(options, "transport");
    const waitMs = option(options, "waitMs");
    if (initialMs !== undefined && typeof initialMs !== "number") throw invalid(`options.backoff.initialMs: must be a number, got ${typeName(initialMs)}`);
    if (maxMs !== undefined && typeof maxMs !== "number") throw invalid(`options.backoff.maxMs: must be a number, got ${typeName(maxMs)}`);
    if (waitMs !== undefined && typeof waitMs !== "number") throw invalid(`options.waitMs: must be a number, got ${typeName(waitMs)}`);
    if (transport !== undefined) str(transport, "options.transport");
    this.#core = call(() => new raw.ClientCore({ baseUrl, headers: pairs, fetch: fetchFn, initialMs, maxMs, transport, waitMs }));
  }

  /** POST /v1/tasks: the new task (version 0). */
  async createTask(input, options = {}) {
    const body = text(input, "input");
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    const key = option(options, "idempotencyKey");
    if (key !== undefined) str(key, "idempotencyKey");
    const core = this.#core;
    return settle(() => core.create_task(body, key));
  }

  /** POST /v1/tasks/{id}/deliveries: the receipt (the same one for the same key). */
  async deliver(taskId, key) {
    str(taskId, "taskId");
    str(key, "key");
    const core = this.#core;
    return (await settle(() => core.deliver(taskId, key))).receipt;
  }

  /**
   * POST /v1/tasks/{id}/cancel: `{changed, duplicate, reason, task}`. Safe
   * to retry (and retried on network errors, 429 and 5xx): a cancel
   * repeated is `duplicate-cancel`.
   */
  async cancel(taskId, options = {}) {
    str(taskId, "taskId");
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    const reason = option(options, "reason");
    if (reason !== undefined) str(reason, "options.reason");
    const body = JSON.stringify(reason === undefined ? {} : { reason });
    const core = this.#core;
    return settle(() => core.cancel(taskId, body));
  }

  /**
   * POST /v1/tasks/{id}/decisions: a decision on the held artifact, named
   * by its hash and the task version it was made on. Answers like
   * `cancel`; a decision repeated is `duplicate-decision`, one on another
   * artifact or version `stale-decision`.
   */
  async decide(taskId, options) {
    str(taskId, "taskId");
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    const decision = option(options, "decision");
    const artifactHash = option(options, "artifactHash");
    const version = option(options, "version");
    const reason = option(options, "reason");
    str(decision, "options.decision");
    str(artifactHash, "options.artifactHash");
    if (typeof version !== "number") throw invalid(`options.version: must be a number, got ${typeName(version)}`);
    if (reason !== undefined) str(reason, "options.reason");
    const body = JSON.stringify({ decision, artifactHash, version, ...(reason !== undefined && { reason }) });
    const core = this.#core;
    return settle(() => core.decide(taskId, body));
  }

  /** Follows a task until it is terminal, stopped, or refused (401/403/404). */
  watch(taskId, options = {}) {
    return new Watch(this.#core, taskId, options, this.#persistPrefix);
  }
}

/** Awaits a wasm promise: it resolves to JSON text, or rejects with a TaskwireError. */
async function settle(start) {
  return JSON.parse(await call(start));
}

// TaskClient: the browser client. The loop's decisions (requests,
// merging, backoff, SSE, fallback) are Rust (taskwire-core's Follow, in
// wasm/src/client), carried out by ./follow.js (fetch, timers, storage);
// this file owns the options and the token function around fetch, and
// ./watch.js what a watch needs of the runtime. It never assumes `window`: it runs in windows,
// workers and Node ≥ 20. With `shareAcrossTabs`, the task and batch
// watches of all tabs run in one of them (./tabs.js).

import * as raw from "./taskwire_wasm.js";
import { call, text, str, invalid, typeName } from "./api.js";
import { restored, shared, sharedBatch } from "./tab-watch.js";
import { BatchWatch, Watch, localStore, option } from "./watch.js";
import { post, run } from "./follow.js";

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
  /** `{fetch, headers}`: the injected fetch (if any) and the headers of every request, a flat `[name, value, …]` array. */
  #http;
  #persistPrefix;
  /** With `shareAcrossTabs`, where Web Locks and BroadcastChannel exist: the tab group, once loaded. */
  #tabs;

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
    const share = option(options, "shareAcrossTabs");
    if (share !== undefined && typeof share !== "boolean" && (typeof share !== "string" || share === "")) {
      throw invalid("options.shareAcrossTabs: must be a boolean or a non-empty name");
    }
    this.#core = call(() => new raw.ClientCore(baseUrl, initialMs, maxMs, transport ?? "long-poll", waitMs));
    this.#http = { fetch: fetchFn, headers: pairs };
    // Without either API (an old browser, Node) each tab keeps its own
    // connections, as without the option.
    if (share && globalThis.navigator?.locks && typeof BroadcastChannel === "function") {
      const name = baseUrl.trim() + (share === true ? "" : " " + share);
      this.#tabs = import("./tabs.js").then(
        ({ Tabs, taskKind, batchKind }) =>
          new Tabs(name, {
            task: taskKind((id, o, wrap) => this.#local(id, o, wrap)),
            batch: batchKind((id, o) => this.#localBatch(id, o)),
          }),
      );
    }
  }

  /** POST /v1/tasks: the new task (version 0). */
  async createTask(input, options = {}) {
    const body = text(input, "input");
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    const key = option(options, "idempotencyKey");
    if (key !== undefined) str(key, "idempotencyKey");
    return this.#post(undefined, "/v1/tasks", body, key);
  }

  /**
   * POST /v1/batches: many tasks in one call, whole or not at all. With
   * `idempotencyKey`, retried on network errors, 429 and 5xx like
   * `createTask`.
   */
  async createBatch(items, options = {}) {
    if (!Array.isArray(items)) throw invalid(`items: must be an array of create requests, got ${typeName(items)}`);
    const body = text({ items }, "items");
    if (options === null || typeof options !== "object") throw invalid(`options: must be an object, got ${typeName(options)}`);
    const key = option(options, "idempotencyKey");
    if (key !== undefined) str(key, "idempotencyKey");
    return this.#post(undefined, "/v1/batches", body, key);
  }

  /** POST /v1/tasks/{id}/deliveries: the receipt (the same one for the same key). */
  async deliver(taskId, key) {
    str(taskId, "taskId");
    str(key, "key");
    return (await this.#post(taskId, "deliveries", undefined, key)).receipt;
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
    return this.#post(taskId, "cancel", body);
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
    return this.#post(taskId, "decisions", body);
  }

  /** Follows a task until it is terminal, stopped, or refused (401/403/404). */
  watch(taskId, options = {}) {
    if (!this.#tabs) return this.#local(taskId, options);
    const prefix = this.#persistPrefix;
    return new Watch(taskId, options, (sink, cursor, seed) =>
      shared(this.#tabs, "task", taskId, seed, sink, cursor === undefined && prefix !== undefined ? restored(localStore(), prefix + taskId, taskId) : undefined),
    );
  }

  /**
   * Follows every task of a batch, over one held request, until all are
   * terminal, stopped, or refused. With `shareAcrossTabs`, through the
   * leader tab, as task watches are (./tabs.js, `batchKind`).
   */
  watchBatch(batchId, options = {}) {
    if (!this.#tabs) return this.#localBatch(batchId, options);
    return new BatchWatch(batchId, options, (start, sink, seed) => sharedBatch(this.#tabs, batchId, start, seed, sink));
  }

  /** A batch watch in this tab (the leader's too, for the whole tab group). */
  #localBatch(batchId, options) {
    const core = this.#core;
    const prefix = this.#persistPrefix;
    return new BatchWatch(batchId, options, (start, sink) => {
      // One key per batch.
      const storageKey = prefix === undefined ? "" : `${prefix}batch:${batchId}`;
      const storage = storageKey ? localStore() : undefined;
      return call(() => run(this.#http, storage, storageKey, start, sink, (...rest) => core.watch(true, batchId, undefined, start ?? "", ...rest)));
    });
  }

  /**
   * A watch in this tab, restored from the storage unless given a
   * cursor. `wrap(storage)` (the leader's watch for other tabs,
   * ./tabs.js) puts a storage of its own in front.
   */
  #local(taskId, options, wrap = (own) => own) {
    const core = this.#core;
    const storageKey = this.#persistPrefix === undefined ? "" : this.#persistPrefix + taskId;
    const storage = wrap(storageKey ? localStore() : undefined);
    return new Watch(taskId, options, (sink, cursor) => call(() => run(this.#http, storage, storageKey, cursor, sink, (...rest) => core.watch(false, taskId, cursor, "", ...rest))));
  }

  /** A POST (./follow.js): resolves to its answer, or rejects with a TaskwireError. */
  async #post(taskId, tail, body, key) {
    const core = this.#core;
    return JSON.parse(await call(() => post(core, this.#http, taskId, tail, body, key)));
  }
}

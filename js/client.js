// TaskClient: the browser client. The loop's decisions (requests,
// merging, backoff, SSE, fallback) are Rust (taskwire-core's Follow, in
// wasm/src/client), carried out by ./follow.js (fetch, timers, storage);
// this file owns the options and the token function around fetch, and
// ./watch.js what a watch needs of the runtime. It never assumes `window`: it runs in windows,
// workers and Node ≥ 20. With `shareAcrossTabs`, the task and batch
// watches of all tabs run in one of them (./tabs.js).

import * as raw from "./taskwire_wasm.js";
import { call, text, str, num, maybeNum, options as object, invalid, typeName, started, isReady, TaskwireError } from "./api.js";
import { restored, shared, sharedBatch } from "./tab-watch.js";
import { BatchWatch, Watch, localStore, option } from "./watch.js";
import { post, run } from "./follow.js";

/**
 * Talks PROTOCOL.md to one backend. It may be made before `init()` has
 * resolved (at module scope, say): its wasm part is made at first use,
 * and its POSTs wait for an `init()` in progress (issue 29).
 */
export class TaskClient {
  /** The wasm ClientCore, once made (`#ready`). */
  #core;
  #makeCore;
  /** `scope => {fetch, headers}`: the fetch for that scope (the injected one, if any, with its token) and the headers of every request, a flat `[name, value, …]` array. */
  #http;
  #persistPrefix;
  /** With `shareAcrossTabs`, where Web Locks and BroadcastChannel exist: the tab group, once loaded. */
  #tabs;
  /** The watches running, for `dispose`. */
  #watches = new Set();
  #disposed;

  constructor(options) {
    object(options);
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
    if (typeof token === "string") pairs.push("authorization", "Bearer " + token);
    // A token function's handling comes on demand (./token.js).
    const tokens = typeof token === "function" && import("./token.js").then(({ bearer }) =>
        bearer(fetchFn, token, (got) => invalid(`options.token: the function must return a non-empty string, got ${typeName(got)}`)),
      );
    const backoff = option(options, "backoff") ?? {};
    if (typeof backoff !== "object") throw invalid("options.backoff: must be an object");
    const initialMs = option(backoff, "initialMs");
    const maxMs = option(backoff, "maxMs");
    const transport = option(options, "transport");
    const waitMs = option(options, "waitMs");
    maybeNum(initialMs, "options.backoff.initialMs");
    maybeNum(maxMs, "options.backoff.maxMs");
    maybeNum(waitMs, "options.waitMs");
    if (transport !== undefined) str(transport, "options.transport");
    const share = option(options, "shareAcrossTabs");
    if (share !== undefined && typeof share !== "boolean" && (typeof share !== "string" || share === "")) {
      throw invalid("options.shareAcrossTabs: must be a boolean or a non-empty name");
    }
    // Before init() the Rust side's checks (baseUrl, waitMs, …) wait for the first use.
    this.#makeCore = () => new raw.ClientCore(baseUrl, initialMs, maxMs, transport ?? "long-poll", waitMs);
    if (isReady()) this.#ready();
    this.#http = (scope) => ({ fetch: tokens ? (url, init) => tokens.then((scoped) => scoped(scope)(url, init)) : fetchFn, headers: pairs });
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
    object(options);
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
    object(options);
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
  cancel(taskId, options) {
    return this.#cancel(taskId, options);
  }

  /**
   * POST /v1/batches/{id}/cancel: every task of the batch not yet ended,
   * each as `cancel` would; `{batchId, size, changed, reasons}`. A token
   * function is asked for `{batch}`. Safe to retry, as `cancel`.
   */
  cancelBatch(batchId, options) {
    return this.#cancel(batchId, options, 1);
  }

  /** A task's cancel, or (`batch`) the rest of a batch's. */
  async #cancel(id, options = {}, batch) {
    str(id, batch ? "batchId" : "taskId");
    object(options);
    const reason = option(options, "reason");
    if (reason !== undefined) str(reason, "options.reason");
    const body = JSON.stringify(reason === undefined ? {} : { reason });
    return batch ? this.#post(undefined, `/v1/batches/${encodeURIComponent(id)}/cancel`, body, undefined, { batch: id }) : this.#post(id, "cancel", body);
  }

  /**
   * POST /v1/tasks/{id}/decisions: a decision on the held artifact, named
   * by its hash and the task version it was made on. Answers like
   * `cancel`; a decision repeated is `duplicate-decision`, one on another
   * artifact or version `stale-decision`.
   */
  async decide(taskId, options) {
    str(taskId, "taskId");
    object(options);
    const decision = option(options, "decision");
    const artifactHash = option(options, "artifactHash");
    const version = option(options, "version");
    const reason = option(options, "reason");
    str(decision, "options.decision");
    str(artifactHash, "options.artifactHash");
    num(version, "options.version");
    if (reason !== undefined) str(reason, "options.reason");
    const body = JSON.stringify({ decision, artifactHash, version, ...(reason !== undefined && { reason }) });
    return this.#post(taskId, "decisions", body);
  }

  /** Follows a task until it is terminal, stopped, or refused (401/403/404). */
  watch(taskId, options = {}) {
    const prefix = this.#persistPrefix;
    return this.#track(
      this.#tabs
        ? new Watch(taskId, options, (sink, cursor, seed) =>
            shared(this.#tabs, "task", taskId, seed, sink, cursor === undefined && prefix !== undefined ? restored(localStore(), prefix + taskId, taskId) : undefined),
          )
        : this.#local(taskId, options),
    );
  }

  /**
   * Follows every task of a batch, over one held request, until all are
   * terminal, stopped, or refused. With `shareAcrossTabs`, through the
   * leader tab, as task watches are (./tabs.js, `batchKind`).
   */
  watchBatch(batchId, options = {}) {
    return this.#track(this.#tabs ? new BatchWatch(batchId, options, (start, sink, seed) => sharedBatch(this.#tabs, batchId, start, seed, sink)) : this.#localBatch(batchId, options));
  }

  /**
   * Stops every watch this client started (`done` rejects with code
   * `stopped`), frees their wasm memory, and, with `shareAcrossTabs`,
   * leaves the tab group (its locks and channel). POSTs in flight
   * finish; any later call throws `stopped`. `using client = new
   * TaskClient(…)` does it at the end of the scope.
   */
  dispose() {
    this.#disposed = true;
    for (const watch of this.#watches) watch[Symbol.dispose]();
    this.#watches.clear();
    this.#tabs?.then((group) => group.close());
  }

  [Symbol.dispose]() {
    this.dispose();
  }

  /** The wasm core, made at first use; throws `stopped` once disposed, `not-initialized` before init(). */
  #ready() {
    if (this.#disposed) throw new TaskwireError("stopped", "TaskClient: disposed");
    return (this.#core ??= call(this.#makeCore));
  }

  /** Keeps `watch` for `dispose` until it ends. */
  #track(watch) {
    const drop = () => this.#watches.delete(watch);
    this.#watches.add(watch);
    watch.done.then(drop, drop);
    return watch;
  }

  /** A batch watch in this tab (the leader's too, for the whole tab group). */
  #localBatch(batchId, options) {
    const core = this.#ready();
    const http = this.#http({ batch: batchId });
    const prefix = this.#persistPrefix;
    return new BatchWatch(batchId, options, (start, sink) => {
      // One key per batch.
      const storageKey = prefix === undefined ? "" : `${prefix}batch:${batchId}`;
      const storage = storageKey ? localStore() : undefined;
      return call(() => run(http, storage, storageKey, start, sink, (...rest) => core.watch(true, batchId, undefined, start ?? "", ...rest)));
    });
  }

  /**
   * A watch in this tab, restored from the storage unless given a
   * cursor. `wrap(storage)` (the leader's watch for other tabs,
   * ./tabs.js) puts a storage of its own in front.
   */
  #local(taskId, options, wrap = (own) => own) {
    const core = this.#ready();
    const http = this.#http({ tasks: [taskId] });
    const storageKey = this.#persistPrefix === undefined ? "" : this.#persistPrefix + taskId;
    const storage = wrap(storageKey ? localStore() : undefined);
    return new Watch(taskId, options, (sink, cursor) => call(() => run(http, storage, storageKey, cursor, sink, (...rest) => core.watch(false, taskId, cursor, "", ...rest))));
  }

  /** A POST (./follow.js): resolves to its answer, or rejects with a TaskwireError. */
  async #post(taskId, tail, body, key, scope = taskId === undefined ? {} : { tasks: [taskId] }) {
    await started();
    const core = this.#ready();
    return JSON.parse(await call(() => post(core, this.#http(scope), taskId, tail, body, key)));
  }
}

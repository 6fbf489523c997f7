// The taskwire demo page. It loads the real package build (`/pkg/` is
// dist/client, served by `taskwire-server --demo`), follows tasks with
// `TaskClient.watch` (tracked.js), explains every reconnect in the event
// log, and cancels, decides and kills workers (actions.js).

import init, { TaskClient } from "/pkg/index.js";
import { DemoNetwork } from "./net.js";
import { EventLog } from "./log.js";
import { isTerminal } from "./card.js";
import { Tracked } from "./tracked.js";
import { Actions } from "./actions.js";
import { BatchView } from "./batch.js";

// The page holds no tenant token. The demo endpoints are this demo's
// "application backend": they start workloads for the demo tenant and mint
// the page a short-lived browser token per task (POST /v1/demo/tokens),
// which each task's TaskClient asks for again when it expires.
/** The page's own list of tasks (the client persists each task's cursor itself). */
const STATE_KEY = "taskwire-demo:tasks";
/** The batch the page follows (every tab of the demo shows it). */
const BATCH_KEY = "taskwire-demo:batch";
/** The key prefix of the client's `persist: true`. */
const CLIENT_PREFIX = "taskwire:";

const LABELS = {
  summary: ["Long-document summary", "summary"],
  long: ["Long job, 40 progress steps", "long"],
  report: ["Report: 4 steps within a budget", "report"],
  "report-tight": ["Report on a tight budget", "tight"],
  "quota-then-success": ["Moderation: quota error, then success", "quota"],
  "invalid-input": ["Moderation: invalid input", "invalid"],
  expires: ["Moderation: goes silent, expires", "expires"],
};

class App {
  log = new EventLog(document.getElementById("log"));
  net = new DemoNetwork({ onChange: (cut) => this.#onNetwork(cut) });
  /** The server's resume window, from /v1/demo/stats (8 until known). */
  retention = 8;
  /** Followed tasks by id, in page order (newest first). */
  tracked = new Map();
  /**
   * One TaskClient for every task card. Its token function is asked for
   * the scope each request needs (`{ tasks: [id] }`), so each task keeps
   * its own browser token, as separately authorised tasks do.
   */
  #client = undefined;
  /** Cancel, decisions, kill the worker, and the workers' notes. */
  actions = new Actions(this);
  /** The moderation batch's grid, when one was started (batch.js). */
  batch = undefined;

  async start() {
    await init();
    this.#wireControls();
    this.#restore();
    this.#restoreBatch();
    // Another tab started a batch: show it here too (its updates come
    // over that tab's connection, see batchClient).
    addEventListener("storage", (e) => {
      if (e.key === BATCH_KEY) this.#restoreBatch();
    });
    setInterval(() => this.#tick(), 200);
    this.#tick();
    this.#pollStats();
    // Every second: the workers' notes (a task taken over) are news.
    setInterval(() => this.#pollStats(), 1_000);
    document.body.dataset.ready = "true";
  }

  #wireControls() {
    const speed = document.getElementById("speed");
    const wanted = new URLSearchParams(location.search).get("speed");
    if (wanted && Number(wanted) > 0) {
      if (![...speed.options].some((o) => o.value === wanted)) speed.add(new Option(`${wanted}×`, wanted));
      speed.value = wanted;
    }
    for (const button of document.querySelectorAll("[data-start]")) {
      button.addEventListener("click", () => this.#startWorkload(button.dataset.start, Number(speed.value)));
    }
    document.getElementById("cut").addEventListener("click", () => {
      const seconds = Math.min(120, Math.max(1, Number(document.getElementById("cut-seconds").value) || 10));
      this.net.cutFor(seconds * 1000);
      this.log.add("net", `network cut for ${seconds} s: requests in flight aborted, new ones fail`);
    });
    document.getElementById("drop").addEventListener("click", () => this.#dropConnections());
    document.getElementById("forget").addEventListener("click", () => this.#forget());
  }

  /** The task cards' client, made on first use. */
  get taskClient() {
    this.#client ??= new TaskClient({
      baseUrl: location.origin,
      // Asked per task: a token for exactly the task a request is about.
      token: ({ tasks }) => this.#mint(tasks[0]),
      fetch: this.net.fetch,
      persist: true,
      // Short enough that a reconnect after a demo cut is seen quickly.
      backoff: { initialMs: 500, maxMs: 4_000 },
    });
    return this.#client;
  }

  /**
   * The batch's client: a browser token for the batch, and one connection
   * per browser (`shareAcrossTabs`: the leader tab holds it, the others
   * get its updates over a BroadcastChannel).
   */
  batchClient(batchId) {
    return new TaskClient({
      baseUrl: location.origin,
      token: async () => {
        const { token } = await this.api("POST", "/v1/demo/tokens", { batchId });
        return token;
      },
      fetch: this.net.fetch,
      persist: true,
      // A group of its own: the leader's token serves the whole group,
      // and the task cards' client holds task tokens.
      shareAcrossTabs: "moderation-batch",
      backoff: { initialMs: 500, maxMs: 4_000 },
    });
  }

  /** A fresh browser token for one task, from the demo's backend. */
  async #mint(taskId) {
    const { token, expiresAt } = await this.api("POST", "/v1/demo/tokens", { taskIds: [taskId] });
    const tracked = this.tracked.get(taskId);
    const secs = Math.round(expiresAt - Date.now() / 1000);
    this.log.add("info", `browser token minted (watch, deliver, cancel, decide; valid ${secs} s)`, { taskId, label: tracked?.tag });
    return token;
  }

  /** The task's timeline and cancel report (PROTOCOL.md §Timeline), read with a browser token for it. */
  async timeline(taskId) {
    const token = await this.#mint(taskId);
    const response = await this.net.fetch(`${location.origin}/v1/tasks/${encodeURIComponent(taskId)}/timeline`, {
      headers: { authorization: `Bearer ${token}` },
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return response.json();
  }

  /**
   * The held draft's text: the task's `draft` output (PROTOCOL.md §Live
   * output › Following), read once with a browser token; the package's
   * client does not carry output yet.
   */
  async draftText(taskId, version) {
    const token = await this.#mint(taskId);
    const response = await this.net.fetch(`${location.origin}/v1/tasks/${encodeURIComponent(taskId)}/resume?cursor=${version}&output=draft`, {
      headers: { authorization: `Bearer ${token}` },
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return (await response.json()).output?.text ?? "";
  }

  /** Calls a demo endpoint through the page's network (no credential: the demo acts for its tenant). */
  async api(method, path, body) {
    const response = await this.net.fetch(location.origin + path, {
      method,
      headers: body ? { "content-type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
    });
    const answer = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(answer?.error?.message ?? `HTTP ${response.status}`);
    return answer;
  }

  async #startWorkload(workload, speed) {
    if (workload === "batch") return this.#startBatch(speed);
    let answer;
    try {
      // The tight report is the report's workload with a smaller budget.
      const [path, extra] = workload === "report-tight" ? ["report", { tight: true }] : [workload, {}];
      answer = await this.api("POST", `/v1/demo/workloads/${path}`, { speed, ...extra });
    } catch (e) {
      this.log.add("error", `could not start ${workload}: ${e.message}`);
      return;
    }
    const fresh = answer.taskIds.map((id, i) => {
      const scenario = answer.scenarios?.[i];
      const [label, short] = LABELS[scenario ?? workload];
      // Version 0, as created; the watch brings everything after.
      const task = { id, state: "queued", attempts: 0, maxAttempts: 3, progress: 0, version: 0 };
      return this.#track({ id, workload, scenario, label, short, task, seen: {} });
    });
    // Newest first, a batch in its own order.
    const list = document.getElementById("tasks");
    for (const t of [...fresh].reverse()) list.prepend(t.card.root);
    this.#reorder();
    for (const t of fresh) {
      this.log.add("info", `started (${workload} workload, speed ${speed}×)`, { taskId: t.id, label: t.tag });
      t.follow(this.taskClient);
    }
    this.save();
    this.#showEmpty();
  }

  /** The moderation batch: 500 items, one grid, one held request. */
  async #startBatch(speed) {
    let answer;
    try {
      answer = await this.api("POST", "/v1/demo/workloads/batch", { speed });
    } catch (e) {
      this.log.add("error", `could not start batch: ${e.message}`);
      return;
    }
    const entry = { batchId: answer.batchId, taskIds: answer.taskIds, scenarios: answer.scenarios, speed };
    try {
      localStorage.setItem(BATCH_KEY, JSON.stringify(entry));
    } catch {
      // Storage full or disabled: this tab still follows it.
    }
    this.log.add("info", `batch of ${entry.taskIds.length} items started (speed ${speed}×), followed over one connection`, { label: "batch" });
    this.#showBatch(entry);
  }

  /** Shows the saved batch (a reload, or another tab's start). */
  #restoreBatch() {
    let entry;
    try {
      entry = JSON.parse(localStorage.getItem(BATCH_KEY) ?? "null");
    } catch {
      entry = null;
    }
    if (!entry?.batchId || !Array.isArray(entry.taskIds)) return;
    if (this.batch?.entry.batchId === entry.batchId) return;
    this.#showBatch(entry);
  }

  #showBatch(entry) {
    this.batch?.stop();
    this.batch = new BatchView(this, entry);
    document.getElementById("batch").replaceChildren(this.batch.root);
    this.batch.follow(this.batchClient(entry.batchId));
    this.#showEmpty();
  }

  #track(entry) {
    const t = new Tracked(this, entry);
    this.tracked.set(entry.id, t);
    return t;
  }

  /** Keeps `tracked` in page order, which is also the saved order. */
  #reorder() {
    const order = [...document.querySelectorAll("#tasks .task")].map((node) => node.dataset.taskId);
    this.tracked = new Map(order.map((id) => [id, this.tracked.get(id)]));
  }

  save() {
    try {
      localStorage.setItem(STATE_KEY, JSON.stringify([...this.tracked.values()].map((t) => t.entry)));
    } catch {
      // Storage full or disabled: the page still works, a reload forgets.
    }
  }

  /** A reload: show the saved tasks, follow the unfinished ones from their persisted cursors. */
  #restore() {
    let entries = [];
    try {
      entries = JSON.parse(localStorage.getItem(STATE_KEY) ?? "[]");
    } catch {
      entries = [];
    }
    const list = document.getElementById("tasks");
    const unfinished = [];
    for (const entry of Array.isArray(entries) ? entries : []) {
      if (!entry?.id || !entry.task) continue;
      entry.seen ??= {};
      const t = this.#track(entry);
      list.append(t.card.root);
      if (!isTerminal(entry.task)) unfinished.push(t);
    }
    if (this.tracked.size > 0) {
      this.log.add("info", `page loaded: ${this.tracked.size} task(s) from localStorage, following ${unfinished.length}`);
    }
    for (const t of unfinished) t.follow(this.taskClient);
    this.#showEmpty();
  }

  #forget() {
    for (const t of this.tracked.values()) {
      t.stop();
      try {
        localStorage.removeItem(CLIENT_PREFIX + t.id);
      } catch {
        // nothing to forget
      }
    }
    this.tracked.clear();
    localStorage.removeItem(STATE_KEY);
    this.batch?.stop();
    this.batch = undefined;
    localStorage.removeItem(BATCH_KEY);
    document.getElementById("batch").replaceChildren();
    document.getElementById("tasks").replaceChildren();
    this.log.clear();
    this.#showEmpty();
  }

  #showEmpty() {
    document.getElementById("empty").hidden = this.tracked.size > 0 || this.batch !== undefined;
  }

  async #dropConnections() {
    try {
      const answer = await this.api("POST", "/v1/demo/drop-connections");
      // The server closes them without an answer. A browser re-sends a GET
      // whose reused keep-alive connection closed that way, so a watch may
      // not notice at all; one that does reconnects and resumes.
      // Only this tenant's held requests: other tenants keep theirs.
      const held = answer.heldRequests;
      this.log.add(
        "net",
        `server dropped this tenant's held connections (${held} held request${held === 1 ? "" : "s"}); ` +
          "the browser may re-send them by itself",
        { dropped: held },
      );
    } catch (e) {
      this.log.add("error", `drop connections: ${e.message}`);
    }
  }

  async deliver(t) {
    // One key per task: every press repeats the same delivery, and the
    // server must answer with the receipt it gave the first time.
    const key = `demo-delivery-${t.id}`;
    try {
      const first = await this.taskClient.deliver(t.id, key);
      const second = await this.taskClient.deliver(t.id, key);
      t.card.showReceipts(first, second);
      const equal = JSON.stringify(first) === JSON.stringify(second);
      this.log.add("deliver", `delivered twice with one idempotency key: ${equal ? "the same receipt both times" : "different receipts!"}`, {
        taskId: t.id,
        label: t.tag,
        equal,
      });
    } catch (e) {
      t.card.showDeliveryError(`delivery failed: ${e.message}`);
      this.log.add("error", `delivery failed: ${e.message}`, { taskId: t.id, label: t.tag });
    }
  }

  async #pollStats() {
    const box = document.getElementById("dedup");
    try {
      const stats = await this.api("GET", "/v1/demo/stats");
      if (Number.isSafeInteger(stats.retention)) this.retention = stats.retention;
      this.actions.showNotes(stats.notes);
      box.querySelector("strong").textContent = String(stats.deduplicated);
      box.dataset.deduplicated = String(stats.deduplicated);
      const reasons = Object.entries(stats.byReason ?? {})
        .filter(([reason, n]) => n > 0 && /duplicate|already/.test(reason))
        .map(([reason, n]) => `${reason} ${n}`);
      box.title = reasons.length ? reasons.join(", ") : "nothing deduplicated yet";
      box.classList.remove("stale");
    } catch {
      box.classList.add("stale"); // shown dimmed until the next answer
    }
  }

  #onNetwork(cut) {
    if (!cut) this.log.add("net", "network back: every watch resumes from the version it holds");
    this.#tick();
  }

  /** The connection indicator: the worst state among running watches. */
  #tick() {
    for (const t of this.tracked.values()) t.tick();
    const active = [...this.tracked.values()].filter((t) => t.watch && t.status.state !== "closed");
    const watches = this.batch?.active ? [...active, this.batch] : active;
    const states = new Set(watches.map((t) => t.status.state));
    let state = "idle";
    let text = "idle: no task in progress";
    if (states.has("offline")) {
      state = "offline";
      text = "offline";
    } else if (states.has("reconnecting")) {
      state = "reconnecting";
      const now = performance.now();
      const next = Math.min(...watches.filter((t) => t.status.state === "reconnecting").map((t) => t.retryAt ?? Infinity));
      text = next > now && Number.isFinite(next) ? `reconnecting in ${Math.ceil((next - now) / 1000)} s` : "reconnecting…";
    } else if (states.has("connecting")) {
      state = "connecting";
      text = "connecting…";
    } else if (states.has("live")) {
      state = "live";
      const tasks = active.length + (this.batch?.active ? this.batch.entry.taskIds.length : 0);
      // This tab's requests in flight: the held long-polls (a tab whose
      // batch rides another tab's connection holds none for it).
      const held = this.net.inFlight;
      text = `live · ${tasks} task${tasks === 1 ? "" : "s"} · ${held} connection${held === 1 ? "" : "s"}`;
    }
    const indicator = document.getElementById("connection");
    indicator.dataset.state = state;
    indicator.querySelector(".label").textContent = text;
    const cut = indicator.querySelector(".cut");
    cut.hidden = !this.net.isCut;
    cut.textContent = this.net.isCut ? `network cut · back in ${Math.ceil(this.net.cutRemainingMs / 1000)} s` : "";
  }
}

new App().start().catch((e) => {
  document.body.dataset.ready = "error";
  document.getElementById("fatal").hidden = false;
  document.getElementById("fatal").textContent = `The demo could not start: ${e.message}. Is the package built (npm run build)?`;
  throw e;
});

// One followed task on the demo page: its card, its watch, and how its
// reconnects went. What is shown comes only from the client: task views
// from `onUpdate` (merged by the client's mirror, which never moves
// version or progress backwards), connection states from `onStatus`,
// refusals from `onReject`.

import { TaskCard, describe, isTerminal, kindOf, kindOfView } from "./card.js";
import { showInside, showTimeline } from "./inside.js";

const range = (versions) =>
  versions.length === 1 ? `v${versions[0]}` : `v${versions[0]}–v${versions[versions.length - 1]}`;

/** One followed task: its card, its watch, and how its reconnects went. */
export class Tracked {
  entry;
  card;
  watch = undefined;
  status = { state: "closed" };
  /** When the next attempt starts (performance.now()), while reconnecting. */
  retryAt = 0;
  /** The version held when the connection was lost (or restored from storage): set until the resume is resolved. */
  #resumeFrom = null;
  #restored = false;
  /** Whether the current outage was logged already (one line per outage, not per attempt). */
  #outageLogged = false;
  /** The log line of the current run of live updates. */
  #liveLine = undefined;
  /** The timeline was asked for (once the task with steps ended). */
  #timelineAsked = false;
  /** The held draft whose text was asked for. */
  #draftRead = undefined;
  #app;

  constructor(app, entry) {
    this.#app = app;
    this.entry = entry;
    this.card = new TaskCard(entry, {
      onDeliver: () => app.deliver(this),
      onCancel: () => app.actions.cancel(this),
      onKill: () => app.actions.kill(this),
      onDecide: (decision, options) => app.actions.decide(this, decision, options),
    });
    this.card.root.dataset.workload = entry.workload;
    if (entry.scenario) this.card.root.dataset.scenario = entry.scenario;
    this.card.showTask(entry.task);
    this.card.showTimeline(entry.task.version, entry.seen);
    this.#showConnection();
  }

  get id() {
    return this.entry.id;
  }

  /** The short name used in the log. */
  get tag() {
    return `${this.entry.short} ${this.id.slice(-4)}`;
  }

  follow(client) {
    this.status = { state: "connecting" };
    this.#showConnection();
    this.watch = client.watch(this.id, {
      onUpdate: (u) => this.#onUpdate(u),
      onStatus: (s) => this.#onStatus(s),
      onReject: (r) => this.#onReject(r),
    });
    // `persist: true`: the client restored the task it saved earlier and
    // resumes from that version; what comes back is logged as a resume.
    const restored = this.watch.task;
    if (restored) {
      this.#show(restored);
      this.#resumeFrom = restored.version;
      this.#restored = true;
      this.log("resume", `restored v${restored.version} from localStorage; resuming from cursor ${restored.version}`, {
        mode: "restore",
        from: restored.version,
      });
    }
    this.watch.done.then(
      (task) => {
        this.#show(task);
        this.#app.save();
      },
      (err) => {
        if (err.code === "stopped") return;
        this.log("error", `watch ended: ${err.message}`, { code: err.code });
        this.card.showConnection(err.code === "not-found" ? "unknown to the server (restarted with new data?)" : err.message, "error");
      },
    );
  }

  stop() {
    this.watch?.stop();
  }

  /** Shows a view unless a newer one is shown already (the stored one and the watch's are two sources). */
  #show(task) {
    if (task.version < this.entry.task.version) return;
    this.entry.task = task;
    this.card.showTask(task);
    this.card.showTimeline(task.version, this.entry.seen);
    this.#showDrafts(task);
    this.#showInside(task);
  }

  /** Steps, budget and effects from the server's view; the timeline once it ended. */
  #showInside(task) {
    const raw = this.#app.net.viewOf(this.id);
    if (!raw?.steps) return;
    showInside(this.card, raw);
    if (!isTerminal(task) || this.#timelineAsked) return;
    this.#timelineAsked = true;
    this.#app.timeline(this.id).then(
      (answer) => showTimeline(this.card, answer),
      (e) => {
        this.#timelineAsked = false;
        this.#app.log.add("error", `timeline: ${e.message}`, { taskId: this.id, label: this.tag });
      },
    );
  }

  /**
   * Remembers each draft the task held for approval, so that the card can
   * offer to approve the one a revision replaced (as a page still showing
   * it would) and show the server refusing it.
   */
  #showDrafts(task) {
    const drafts = (this.entry.drafts ??= []);
    if (task.state === "waiting_approval" && task.artifactHash && !drafts.some((d) => d.artifactHash === task.artifactHash)) {
      drafts.push({ artifactHash: task.artifactHash, artifactRef: task.artifactRef, version: task.version });
    }
    const replaced = task.state === "waiting_approval" ? drafts.filter((d) => d.artifactHash !== task.artifactHash).at(-1) : undefined;
    this.card.showReplacedDraft(replaced);
    // A reviewer reads what they approve: the draft's text, once per draft.
    const hash = task.artifactHash;
    if (task.state !== "waiting_approval" || !hash || this.#draftRead === hash) return;
    this.#draftRead = hash;
    this.#app.draftText(this.id, task.version).then(
      (text) => this.entry.task.artifactHash === hash && this.card.showDraftText(hash, text),
      (e) => {
        this.#draftRead = undefined;
        this.#app.log.add("error", `draft text: ${e.message}`, { taskId: this.id, label: this.tag });
      },
    );
  }

  /** The draft a revision replaced, if any (for "Approve the replaced draft"). */
  get replacedDraft() {
    const task = this.entry.task;
    return (this.entry.drafts ?? []).filter((d) => d.artifactHash !== task.artifactHash).at(-1);
  }

  #onUpdate({ task, mode, applied, rejected }) {
    const from = this.entry.task.version;
    const net = this.#app.net;
    const texts = [];
    const resuming = this.#resumeFrom !== null;
    for (const version of applied) {
      let kind, text;
      const event = mode === "delta" ? net.eventAt(this.id, version) : undefined;
      if (event) {
        kind = kindOf(event);
        text = describe(event);
      } else {
        kind = kindOfView(task);
        text = `${task.state}, ${task.progress} %`;
      }
      const via = mode === "snapshot" ? "snapshot" : resuming ? "resume" : "live";
      this.entry.seen[version] = { kind, via, text };
      texts.push(text);
    }
    this.#show(task);
    this.#app.save();

    const facts = { mode, from, to: task.version, applied: applied.join(",") };
    let how;
    if (mode === "snapshot") {
      const gap = task.version - from;
      const retention = this.#app.retention;
      how = gap > retention ? `gap ${gap} > ${retention} → snapshot v${task.version}` : `snapshot v${task.version}`;
      how += ` (${task.state}, ${task.progress} %)`;
    } else if (resuming) {
      how = `${mode} ${range(applied)}: ${texts.join("; ")}`;
    } else {
      how = applied.map((v, i) => `v${v} ${texts[i]}`).join("; ");
    }
    if (resuming) {
      this.#resumeFrom = null;
      const restored = this.#restored ? " after reload" : "";
      this.#restored = false;
      this.log("resume", `resumed at v${from}${restored} → ${how}`, facts);
    } else if (mode === "snapshot") {
      // Not after an outage: the client found a gap or divergence itself.
      this.log("resume", `out of step at v${from} → ${how}`, facts);
    } else {
      this.#logLive(applied, texts[texts.length - 1], facts);
    }
    for (const r of rejected) this.#logRejection(r, mode);
  }

  /**
   * Live updates in a row (nothing else logged in between) share one
   * line, "v12–v25 progress 50 %", so that a 40-step job does not bury
   * the lines that explain reconnects.
   */
  #logLive(applied, text, facts) {
    const log = this.#app.log;
    const last = applied[applied.length - 1];
    if (log.isNewest(this.#liveLine)) {
      const updates = Number(this.#liveLine.dataset.updates) + applied.length;
      log.rewrite(this.#liveLine, `v${this.#liveLine.dataset.first}–v${last} ${text} (${updates} live updates)`, {
        ...facts,
        from: this.#liveLine.dataset.from,
        applied: `${this.#liveLine.dataset.applied},${applied.join(",")}`,
        updates,
      });
    } else {
      const first = applied[0];
      const what = applied.length === 1 ? `v${first} ${text}` : `${range(applied)} ${text}`;
      this.#liveLine = this.log("live", what, { ...facts, first, updates: applied.length });
    }
  }

  #onReject({ mode, rejected }) {
    for (const r of rejected) this.#logRejection(r, mode);
  }

  #logRejection({ version, reason }, mode) {
    const words = {
      "stale-answer": "stale response",
      "stale-snapshot": "stale snapshot",
      duplicate: "duplicate",
      gap: "answer with a gap",
      diverged: "diverging history",
      regressed: "regressing answer",
      "wrong-task": "answer for another task",
      "no-base": "delta without a base",
    };
    this.log("reject", `rejected ${words[reason] ?? reason} v${version} (${mode})`, { reason, version });
  }

  #onStatus(status) {
    this.status = status;
    const { state } = status;
    if (state === "reconnecting" || state === "offline") {
      this.#resumeFrom ??= this.entry.task.version;
      if (state === "reconnecting") this.retryAt = performance.now() + (status.retryInMs ?? 0);
      if (!this.#outageLogged) {
        this.#outageLogged = true;
        this.log(
          "conn",
          state === "offline"
            ? `offline at v${this.entry.task.version}: waiting for the network`
            : `connection lost at v${this.entry.task.version} (${status.error}); retrying with backoff`,
          { state },
        );
      }
    } else if (state === "live") {
      this.#outageLogged = false;
      // The client reports `live`, then (in the same turn) `onUpdate` if
      // the answer moved the task. No update by the next microtask means
      // the resume found nothing new.
      if (this.#resumeFrom !== null) {
        queueMicrotask(() => {
          if (this.#resumeFrom === null) return;
          const from = this.#resumeFrom;
          this.#resumeFrom = null;
          this.#restored = false;
          this.log("resume", `resumed at v${from} → caught up`, { mode: "caught-up", from, to: from, applied: "" });
        });
      }
    }
    this.#showConnection();
  }

  /** This task's connection, for its card (called on every status and tick). */
  #showConnection() {
    const { state } = this.status;
    let text = state;
    if (state === "reconnecting") {
      const left = this.retryAt - performance.now();
      const attempt = this.status.attempt ? ` (attempt ${this.status.attempt})` : "";
      text = left > 0 ? `reconnecting in ${Math.ceil(left / 1000)} s${attempt}` : "reconnecting…";
    } else if (state === "closed") {
      text = isTerminal(this.entry.task) ? "done" : "not followed";
    }
    this.card.showConnection(text, state);
  }

  tick() {
    if (this.status.state === "reconnecting") this.#showConnection();
  }

  /** Logs one line about this task. */
  log(kind, text, facts = {}) {
    return this.#app.log.add(kind, text, { taskId: this.id, label: this.tag, ...facts });
  }

}

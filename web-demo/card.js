// One task on the page: a card with its state, progress bar, numbers,
// connection, timeline of versions, result delivery, its lifecycle
// controls (cancel, kill the worker) and, while the task waits for a
// person, its draft with the decision buttons. Rendering only: what to
// show comes from tracked.js. The `data-*` attributes on the card are the
// page's contract with tests/e2e (state, version, progress, attempt).

const SVG = "http://www.w3.org/2000/svg";

/** Event kinds, in legend order, with what they mean. */
export const KINDS = {
  start: "started",
  progress: "progress",
  succeed: "succeeded",
  retry: "failed, will retry",
  fail: "failed",
  expire: "expired",
  hold: "waiting for approval",
  decide: "decided",
  cancel: "cancelled or stopping",
  lapse: "lease lapsed, re-queued",
};

/** The kind of a history event (a retryable failure gets its own colour). */
export function kindOf(event) {
  switch (event.type) {
    case "fail":
      return event.retryable ? "retry" : "fail";
    case "ack_cancel":
    case "cannot_cancel":
      return "cancel";
    case "abandon":
      return "lapse";
    case "timeout":
      return "expire";
    default:
      return event.type;
  }
}

/**
 * The kind of the change that produced `task`, when only the view is known
 * (a snapshot): its state tells the last event.
 */
export function kindOfView(task) {
  switch (task.state) {
    case "succeeded":
      return "succeed";
    case "failed":
      return "fail";
    case "expired":
    case "timed_out":
      return "expire";
    case "queued":
      return "retry"; // queued at a version > 0: requeued after a failure
    case "waiting_approval":
      return "hold";
    case "cancelling":
    case "cancel_ineffective":
    case "cancelled":
      return "cancel";
    case "unknown":
      return "lapse";
    default:
      return task.progress > 0 ? "progress" : "start";
  }
}

/** What a history event did, in words. */
export function describe(event) {
  switch (event.type) {
    case "start":
      return `started by ${event.worker}`;
    case "progress":
      return `progress ${event.progress} %`;
    case "succeed":
      return `succeeded, result ${event.resultHash}`;
    case "fail":
      return `failed: ${event.error}${event.retryable ? " (retryable)" : ""}`;
    case "expire":
      return "expired (time to live ran out)";
    case "hold":
      return `draft held for approval (${event.artifactHash})`;
    case "decide":
      return `${event.decision.replace("_", " ")} by ${event.actor ?? "someone"}`;
    case "cancel":
      return `cancel asked by ${event.actor ?? "someone"}`;
    case "ack_cancel":
      return "the worker stopped (cancelled)";
    case "cannot_cancel":
      return `the worker cannot stop: ${event.reason ?? "no reason given"}`;
    case "lapse":
      return `attempt ${event.attempt}'s lease lapsed: unknown`;
    case "abandon":
      return "no word within the grace period: re-queued";
    case "timeout":
      return "timed out (execution deadline passed)";
    default:
      return event.type;
  }
}

/** What the card says about a lifecycle state (none for the others). */
function noticeFor(task) {
  switch (task.state) {
    case "cancelling":
      return ["cancel requested: waiting for the worker to stop", ""];
    case "cancel_ineffective":
      return ["cancel did not take effect: the worker cannot stop now, the task ends cancelled when it finishes", "warn"];
    case "unknown":
      return [`the worker's lease lapsed: attempt ${task.attempts} may still be running`, "warn"];
    case "cancelled":
      return [task.resultHash ? "cancelled; a result arrived anyway and is kept for compensation" : "cancelled", ""];
    case "timed_out":
      return ["timed out: the execution deadline passed", "warn"];
    default:
      return ["", ""];
  }
}

/**
 * The attempt the progress bar is about: the running or last attempt, or,
 * while queued, the one waiting to start (at 0 %). A retryable failure
 * resets progress to 0 for the *next* attempt, so progress never goes
 * backwards within the attempt shown.
 */
export function shownAttempt(task) {
  return task.state === "queued" ? task.attempts + 1 : task.attempts;
}

/**
 * What the attempt counter is out of: `maxAttempts`, and the starts people
 * granted with a decision (`continuations`, PROTOCOL.md §Continuations),
 * shown apart, so an approved task never reads "attempt 2 of 1".
 */
function attemptBudget(task) {
  return task.continuations ? `${task.maxAttempts} + ${task.continuations} continued` : String(task.maxAttempts);
}

const TERMINAL = new Set(["succeeded", "failed", "expired", "cancelled", "timed_out"]);
/** States in which a worker holds the task (it can be killed). */
const HELD_BY_WORKER = new Set(["running", "cancelling", "cancel_ineffective"]);
export const isTerminal = (task) => TERMINAL.has(task?.state);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

export class TaskCard {
  /** The card's root element. */
  root;
  #parts;

  /**
   * The handlers run when a button is pressed: `onDeliver()`,
   * `onCancel()`, `onKill()`, and `onDecide(decision, {replaced})` (with
   * `replaced: true` for "Approve the replaced draft").
   */
  constructor({ id, label }, { onDeliver, onCancel, onKill, onDecide }) {
    const template = document.getElementById("task-template");
    this.root = template.content.firstElementChild.cloneNode(true);
    const q = (name) => this.root.querySelector(`[data-part="${name}"]`);
    this.#parts = {
      label: q("label"),
      id: q("id"),
      state: q("state"),
      bar: q("bar"),
      fill: q("fill"),
      percent: q("percent"),
      attempt: q("attempt"),
      version: q("version"),
      attempts: q("attempts"),
      result: q("result"),
      error: q("error"),
      conn: q("conn"),
      timeline: q("timeline"),
      deliver: q("deliver"),
      receipts: q("receipts"),
      cancel: q("cancel"),
      kill: q("kill"),
      notice: q("notice"),
      approval: q("approval"),
      question: q("question"),
      draft: q("draft"),
      draftText: q("draft-text"),
      staleApprove: q("stale-approve"),
      refusal: q("refusal"),
    };
    this.root.dataset.taskId = id;
    this.#parts.label.textContent = label;
    this.#parts.id.textContent = id;
    this.#parts.deliver.addEventListener("click", () => onDeliver());
    this.#parts.cancel.addEventListener("click", () => onCancel());
    this.#parts.kill.addEventListener("click", () => onKill());
    for (const button of this.root.querySelectorAll("[data-decision]")) {
      button.addEventListener("click", () => onDecide(button.dataset.decision, { replaced: false }));
    }
    this.#parts.staleApprove.addEventListener("click", () => onDecide("approve", { replaced: true }));
  }

  /** Shows a task view. The caller never passes an older version. */
  showTask(task) {
    const p = this.#parts;
    const attempt = shownAttempt(task);
    Object.assign(this.root.dataset, {
      state: task.state,
      version: String(task.version),
      progress: String(task.progress),
      attempt: String(attempt),
      attempts: String(task.attempts),
    });
    p.state.textContent = task.state;
    p.state.className = `badge state-${task.state}`;
    p.fill.style.width = `${task.progress}%`;
    p.bar.setAttribute("aria-valuenow", String(task.progress));
    p.percent.textContent = `${task.progress} %`;
    p.attempt.textContent = task.state === "queued" && task.attempts > 0 ? `attempt ${attempt} of ${attemptBudget(task)} waiting for a worker` : "";
    p.attempt.hidden = p.attempt.textContent === "";
    p.version.textContent = `v${task.version}`;
    p.attempts.textContent = `${task.attempts}/${attemptBudget(task)}`;
    p.result.textContent = task.resultHash ?? "—";
    p.error.textContent = task.error ?? "";
    p.error.hidden = !task.error;
    p.deliver.disabled = task.state !== "succeeded";
    p.cancel.disabled = isTerminal(task) || task.state === "cancelling";
    p.kill.disabled = !HELD_BY_WORKER.has(task.state);
    const [notice, tone] = noticeFor(task);
    p.notice.textContent = notice;
    p.notice.dataset.tone = tone;
    p.notice.hidden = notice === "";
    const waiting = task.state === "waiting_approval";
    p.approval.hidden = !waiting;
    if (waiting) {
      p.question.textContent = task.question ?? "Approve this draft?";
      p.draft.textContent = `${task.artifactRef} (${task.artifactHash})`;
      p.approval.dataset.artifactHash = task.artifactHash ?? "";
    }
  }

  /** Shows the text of the held draft `hash`, as its worker wrote it (the task's `draft` output). */
  showDraftText(hash, text) {
    const box = this.#parts.draftText;
    box.textContent = text;
    box.dataset.artifactHash = hash;
    box.hidden = !text;
  }

  /** Offers "Approve the replaced draft" while an earlier draft exists. */
  showReplacedDraft(draft) {
    this.#parts.staleApprove.hidden = !draft;
    if (draft) this.#parts.staleApprove.title = `approve ${draft.artifactHash} (v${draft.version}), as a page still showing it would`;
  }

  /** Shows why the server refused a decision (or clears it with `null`). */
  showRefusal(text, reason) {
    const p = this.#parts.refusal;
    p.textContent = text ?? "";
    p.hidden = !text;
    if (reason) p.dataset.reason = reason;
    else delete p.dataset.reason;
  }

  /** Shows the connection of this task's watch. */
  showConnection(text, state) {
    this.#parts.conn.textContent = text;
    this.#parts.conn.dataset.state = state;
    this.root.dataset.conn = state;
  }

  /**
   * Draws one dot per version 1..`version`: filled in its event's colour
   * when the page saw it, ringed when it arrived on a resume after a
   * disconnect, hollow when a snapshot skipped it.
   * `seen` maps version → {kind, via: "live" | "resume" | "snapshot", text}.
   */
  showTimeline(version, seen) {
    const svg = this.#parts.timeline;
    svg.replaceChildren();
    const count = Math.max(version, 1);
    const step = Math.min(22, 560 / count);
    const r = Math.max(2.5, Math.min(6, step / 2 - 1));
    const width = 12 + step * (count - 1) + 12;
    svg.setAttribute("viewBox", `0 0 ${width} 24`);
    svg.style.maxWidth = `${width}px`;
    const line = document.createElementNS(SVG, "line");
    Object.entries({ x1: 12, y1: 12, x2: 12 + step * (count - 1), y2: 12, class: "tl-axis" }).forEach(([k, v]) =>
      line.setAttribute(k, String(v)),
    );
    svg.append(line);
    for (let v = 1; v <= version; v++) {
      const dot = document.createElementNS(SVG, "circle");
      const info = seen[v];
      dot.setAttribute("cx", String(12 + step * (v - 1)));
      dot.setAttribute("cy", "12");
      dot.setAttribute("r", String(r));
      dot.setAttribute("class", info ? `tl-dot kind-${info.kind} via-${info.via}` : "tl-dot skipped");
      dot.dataset.version = String(v);
      const title = document.createElementNS(SVG, "title");
      title.textContent = info ? `v${v}: ${info.text} (${info.via})` : `v${v}: never seen (skipped by a snapshot)`;
      dot.append(title);
      svg.append(dot);
    }
  }

  /** Shows two receipts for the same key and whether they are equal. */
  showReceipts(first, second) {
    const box = this.#parts.receipts;
    box.replaceChildren();
    const equal = JSON.stringify(first) === JSON.stringify(second);
    box.dataset.equal = String(equal);
    box.append(el("div", "receipt-key", `key ${first.idempotencyKey}, twice:`));
    for (const [name, receipt] of [["1st", first], ["2nd", second]]) {
      const row = el("div", "receipt");
      const at = new Date(receipt.deliveredAtMs);
      const time = `${at.toLocaleTimeString([], { hour12: false })}.${String(at.getMilliseconds()).padStart(3, "0")}`;
      row.append(el("span", "receipt-n", name), el("code", "", `${receipt.resultHash} ${receipt.resultRef}, delivered at ${time}`));
      box.append(row);
    }
    box.append(el("div", equal ? "verdict ok" : "verdict bad", equal ? "same key, same receipt ✓" : "receipts differ ✗"));
    box.hidden = false;
  }

  showDeliveryError(message) {
    const box = this.#parts.receipts;
    box.replaceChildren(el("div", "verdict bad", message));
    box.dataset.equal = "false";
    box.hidden = false;
  }
}

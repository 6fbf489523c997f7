// One task on the page: a card with its state, progress bar, numbers,
// connection, timeline of versions and result delivery. Rendering only:
// what to show comes from app.js. The `data-*` attributes on the card are
// the page's contract with tests/e2e (state, version, progress, attempt).

const SVG = "http://www.w3.org/2000/svg";

/** Event kinds, in legend order, with what they mean. */
export const KINDS = {
  start: "started",
  progress: "progress",
  succeed: "succeeded",
  retry: "failed, will retry",
  fail: "failed",
  expire: "expired",
};

/** The kind of a history event (a retryable failure gets its own colour). */
export function kindOf(event) {
  if (event.type === "fail") return event.retryable ? "retry" : "fail";
  return event.type;
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
      return "expire";
    case "queued":
      return "retry"; // queued at a version > 0: requeued after a failure
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
    default:
      return event.type;
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

const TERMINAL = new Set(["succeeded", "failed", "expired"]);
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

  /** `onDeliver()` runs when "Deliver result" is pressed. */
  constructor({ id, label }, { onDeliver }) {
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
    };
    this.root.dataset.taskId = id;
    this.#parts.label.textContent = label;
    this.#parts.id.textContent = id;
    this.#parts.deliver.addEventListener("click", () => onDeliver());
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
    p.attempt.textContent = task.state === "queued" && task.attempts > 0 ? `attempt ${attempt} of ${task.maxAttempts} waiting for a worker` : "";
    p.attempt.hidden = p.attempt.textContent === "";
    p.version.textContent = `v${task.version}`;
    p.attempts.textContent = `${task.attempts}/${task.maxAttempts}`;
    p.result.textContent = task.resultHash ?? "—";
    p.error.textContent = task.error ?? "";
    p.error.hidden = !task.error;
    p.deliver.disabled = task.state !== "succeeded";
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

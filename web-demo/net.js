// The page's network. Every request the page makes, and every request its
// TaskClient makes (passed as the client's `fetch` option), goes through
// `DemoNetwork.fetch`, for two reasons:
//
// 1. "Disconnect for N s" must cut the client for real, as an outage does:
//    requests in flight fail (they are aborted, not answered), and new
//    ones fail at once until the time is up. The client cannot tell this
//    from a dead network, so what the page shows is its real reconnect
//    path: backoff, then a resume from the version it holds.
// 2. The client reports task views, not the events between them. The
//    timeline colours each version by the event that made it, so the
//    events are read here, from the resume answers as they pass through.
//    The answer is read before the client gets it, so an event is always
//    known by the time `onUpdate` names its version; the page draws only
//    versions the client actually applied.

const RESUME_PATH = /\/v1\/tasks\/([^/?#]+)\/resume(?:[?#]|$)/;

export class DemoNetwork {
  #cutUntil = 0;
  #restoreTimer = undefined;
  /** Controllers of the requests in flight, to abort them on a cut. */
  #inFlight = new Set();
  /** taskId → (version → event), from delta answers. */
  #events = new Map();
  /** taskId → the newest task view an answer carried, every field kept. */
  #views = new Map();
  #onChange;

  /** `onChange(cut: boolean)` is called when a cut starts and ends. */
  constructor({ onChange } = {}) {
    this.#onChange = onChange ?? (() => {});
  }

  /** Whether the network is cut now. */
  get isCut() {
    return Date.now() < this.#cutUntil;
  }

  /** Milliseconds until the cut ends (0 when not cut). */
  get cutRemainingMs() {
    return Math.max(0, this.#cutUntil - Date.now());
  }

  /** Requests of this tab in flight now (held long-polls and streams included). */
  get inFlight() {
    return this.#inFlight.size;
  }

  /** The event that produced `version` of a task, if an answer carried it. */
  eventAt(taskId, version) {
    return this.#events.get(taskId)?.get(version);
  }

  /**
   * The newest view of a task as the server sent it, with the fields the
   * client does not carry (steps, budget, effects: PROTOCOL.md §Steps,
   * §Budgets and side effects). A task with them is followed by
   * snapshots, so every answer brings them whole.
   */
  viewOf(taskId) {
    return this.#views.get(taskId);
  }

  /** A `fetch` with the same contract as the global one. */
  fetch = async (input, init = {}) => {
    if (this.isCut) throw new TypeError("the network is cut (demo)");
    // Our own controller, chained to the caller's signal: a cut aborts it
    // with a network error (the reason), which is what a dropped
    // connection looks like to the caller, not a cancellation of its own.
    const controller = new AbortController();
    const outer = init.signal;
    const forward = () => controller.abort(outer.reason);
    if (outer) {
      if (outer.aborted) forward();
      else outer.addEventListener("abort", forward, { once: true });
    }
    this.#inFlight.add(controller);
    try {
      const response = await fetch(input, { ...init, signal: controller.signal });
      const url = typeof input === "string" ? input : input.url;
      const match = RESUME_PATH.exec(url);
      if (match && response.ok) {
        // A long-poll answer arrives whole, so reading a copy first does
        // not delay the client.
        this.#record(decodeURIComponent(match[1]), await response.clone().text());
      }
      return response;
    } finally {
      this.#inFlight.delete(controller);
      outer?.removeEventListener("abort", forward);
    }
  };

  /** Cuts the network for `ms`: aborts what is in flight, fails what comes. */
  cutFor(ms) {
    this.#cutUntil = Date.now() + ms;
    for (const controller of this.#inFlight) {
      controller.abort(new TypeError("connection lost (demo cut)"));
    }
    this.#inFlight.clear();
    clearTimeout(this.#restoreTimer);
    this.#restoreTimer = setTimeout(() => this.restore(), ms);
    this.#onChange(true);
  }

  /** Ends a cut now. */
  restore() {
    clearTimeout(this.#restoreTimer);
    this.#cutUntil = 0;
    this.#onChange(false);
    // A browser fires `online` when connectivity returns; the client
    // listens for it to end its backoff wait at once. The simulated
    // network does the same.
    globalThis.dispatchEvent(new Event("online"));
  }

  #record(taskId, text) {
    let answer;
    try {
      answer = JSON.parse(text);
    } catch {
      return; // the client will judge (and refuse) it
    }
    const task = answer?.task;
    if (task && Number.isSafeInteger(task.version) && !(this.#views.get(taskId)?.version > task.version)) {
      this.#views.set(taskId, task);
    }
    if (answer?.mode !== "delta" || !Array.isArray(answer.events)) return;
    let known = this.#events.get(taskId);
    if (!known) this.#events.set(taskId, (known = new Map()));
    for (const entry of answer.events) {
      if (Number.isSafeInteger(entry?.version) && entry.event) known.set(entry.version, entry.event);
    }
  }
}

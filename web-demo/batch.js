// The moderation batch on the page: up to 500 items followed as one batch
// (`TaskClient.watchBatch`, PROTOCOL.md §Batches) over one held request,
// drawn as a grid (one cell per item, coloured by its state) under a
// summary bar (counts per state, overall progress). The client is shared
// across tabs (`shareAcrossTabs`): a second tab of the demo shows the same
// batch without a connection of its own.

/** The states in the order the summary bar lists them. */
const STATES = [
  "queued", "running", "waiting_approval", "unknown", "cancelling", "cancel_ineffective",
  "succeeded", "failed", "expired", "cancelled", "timed_out",
];

export class BatchView {
  /** Cells by task id, in item order. */
  #cells = new Map();
  #root;
  #watch;
  #status = { state: "connecting" };
  #progress;

  /**
   * @param app the page (its log, network and token minting)
   * @param entry {batchId, taskIds, scenarios, speed} as the workload answered
   */
  constructor(app, entry) {
    this.app = app;
    this.entry = entry;
    this.#root = document.getElementById("batch-template").content.firstElementChild.cloneNode(true);
    this.#root.dataset.batchId = entry.batchId;
    this.#root.querySelector("[data-part=id]").textContent = entry.batchId;
    const grid = this.#root.querySelector("[data-part=grid]");
    entry.taskIds.forEach((id, i) => {
      const cell = document.createElement("span");
      cell.className = "cell";
      cell.dataset.state = "queued";
      cell.dataset.item = String(i + 1);
      cell.dataset.taskId = id;
      cell.title = `item ${i + 1}${entry.scenarios?.[i] ? ` (${entry.scenarios[i]})` : ""}: queued`;
      grid.append(cell);
      this.#cells.set(id, cell);
    });
    this.#root.querySelector("[data-part=size]").textContent = String(entry.taskIds.length);
  }

  get root() {
    return this.#root;
  }

  get status() {
    return this.#status;
  }

  /** Whether the watch still runs. */
  get active() {
    return this.#watch !== undefined && this.#status.state !== "closed";
  }

  /** Follows the batch with `client` (one held request for every item). */
  follow(client) {
    const { log } = this.app;
    const tag = { label: "batch" };
    this.#watch = client.watchBatch(this.entry.batchId, {
      onUpdate: (u) => this.#paint(u.task),
      onProgress: (p) => this.#summarise(p),
      onStatus: (s) => {
        const was = this.#status.state;
        this.#status = s;
        if (s.state !== was) log.add("net", `batch watch ${s.state}${s.error ? `: ${s.error}` : ""}`, tag);
      },
    });
    this.#watch.done.then(
      () => log.add("info", `batch finished: every one of ${this.#cells.size} items is terminal`, tag),
      (e) => log.add("error", `batch watch ended: ${e.message}`, tag),
    );
  }

  stop() {
    this.#watch?.stop();
  }

  #paint(task) {
    const cell = this.#cells.get(task?.id);
    if (!cell) return;
    cell.dataset.state = task.state;
    cell.dataset.version = String(task.version);
    cell.dataset.attempts = String(task.attempts);
    const item = cell.dataset.item;
    const extra = task.error ? `, ${task.error}` : task.state === "running" ? `, ${task.progress} %` : "";
    cell.title = `item ${item}: ${task.state} (v${task.version}, attempt ${task.attempts}${extra})`;
  }

  /** The summary bar: counts per state and the overall progress. */
  #summarise(p) {
    this.#progress = p;
    const counts = p?.counts ?? {};
    const bar = this.#root.querySelector("[data-part=counts]");
    bar.replaceChildren(
      ...STATES.filter((s) => counts[s] > 0).map((s) => {
        const chip = document.createElement("span");
        chip.className = "chip";
        chip.dataset.state = s;
        chip.textContent = `${s.replace("_", " ")} ${counts[s]}`;
        return chip;
      }),
    );
    const percent = Math.round(p?.progress ?? 0);
    this.#root.querySelector("[data-part=fill]").style.width = `${percent}%`;
    this.#root.querySelector("[data-part=percent]").textContent = `${percent} %`;
    this.#root.dataset.terminal = String(p?.terminal ?? 0);
  }
}

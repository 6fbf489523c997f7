// The current attempt's lease of each task, as the last event left it
// (store.mjs). A heartbeat (or a repeated progress) renews the lease
// without a version: its record must be journaled all the same, or a
// replay would lapse the task earlier than it did. This tells such a
// renewal from a no-op.

export class Leases {
  /** taskId → the lease as JSON text */
  #leases = new Map();

  /**
   * Whether `lease` (an apply's) differs from what the task's last event
   * left; remembers it. After a sweep step the task's entry is dropped,
   * so the comparison is with no lease: at worst a record that changed
   * nothing is journaled, and replays the same way.
   */
  moved(taskId, lease) {
    const text = lease === undefined ? undefined : JSON.stringify(lease);
    const moved = text !== this.#leases.get(taskId);
    if (text === undefined) this.#leases.delete(taskId);
    else this.#leases.set(taskId, text);
    return moved;
  }

  /** The task's attempt ended (expired, or a sweep step): no lease any more. */
  ended(taskId) {
    this.#leases.delete(taskId);
  }
}

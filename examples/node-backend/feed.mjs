// The notifications feed (PROTOCOL.md §Notifications feed): per tenant, in
// commit order, numbered by one `seq` that rises across all tenants (so a
// tenant's feed has gaps, as the protocol allows).

export class Feeds {
  /** tenant → notifications, seq ascending */
  #feeds = new Map();
  #seq = 0;

  /** Appends a notification ({key, taskId, state, atMs}) to the tenant's feed. */
  push(tenant, notification) {
    let feed = this.#feeds.get(tenant);
    if (!feed) this.#feeds.set(tenant, (feed = []));
    feed.push({ seq: ++this.#seq, ...notification });
  }

  /** Up to `limit` of the tenant's notifications with `seq > after`. */
  page(tenant, after, limit) {
    const feed = this.#feeds.get(tenant) ?? [];
    // Binary search for the first entry past `after`.
    let lo = 0;
    let hi = feed.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (feed[mid].seq <= after) lo = mid + 1;
      else hi = mid;
    }
    return feed.slice(lo, lo + limit);
  }
}

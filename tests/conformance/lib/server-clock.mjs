// The backend's clock, as the suite can know it: the checks that judge a
// recorded time (a lapse at the lease's end, a notification when a
// deadline fell due) compare it with bounds on the server's clock, never
// with a sleep that hopes the backend was on time.
//
// A create is the one answer that carries the server's clock exactly:
// `expiresAtMs` is its clock at the create plus `ttlMs`. So the server's
// clock at the create lies between the suite's clock when it sent the
// request and when the answer came back, shifted by the offset between
// the two clocks; a create gives that offset within its round trip.

const PROBE_TTL_MS = 3_600_000;

/**
 * The offset of the server's clock from the suite's, as `{low, high}`
 * (server = suite + offset, for some offset in between), from a create
 * by `a`. Also returns the task, which a check may go on using.
 */
export async function clockOffset(a, body = {}) {
  const ttlMs = body.ttlMs ?? PROBE_TTL_MS;
  const sent = Date.now();
  const task = await a.createTask({ maxAttempts: 1, ...body, ttlMs });
  const answered = Date.now();
  const created = task.expiresAtMs - ttlMs;
  return { low: created - answered, high: created - sent, task, created };
}

/**
 * Bounds on the server's clock when it received a request the suite sent
 * at `sent` and saw answered at `answered`, given `offset`.
 */
export function receivedAt(offset, sent, answered) {
  return { low: sent + offset.low, high: answered + offset.high };
}

/** Sends with `send()` and returns its answer with the server-clock bounds of its receipt. */
export async function timed(offset, send) {
  const sent = Date.now();
  const answer = await send();
  return { answer, at: receivedAt(offset, sent, Date.now()) };
}

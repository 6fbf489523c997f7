// Executor events (PROTOCOL.md §Wire types). Event times are the
// executor's own ("whatever the executor reports"): small numbers like the
// seed's timeline, far below any task's expiresAtMs on the server's clock.

export const start = (atMs, worker = 'worker-1') => ({ type: 'start', atMs, worker });

export const progress = (atMs, value, cursor = `c${value}`) => ({
  type: 'progress',
  atMs,
  progress: value,
  cursor,
});

export const succeed = (atMs, resultRef, resultHash) => ({ type: 'succeed', atMs, resultRef, resultHash });

export const fail = (atMs, error, retryable) => ({ type: 'fail', atMs, error, retryable });

export const expire = (atMs) => ({ type: 'expire', atMs });

/**
 * `n` events that each change a fresh task (created with enough
 * `maxAttempts`): start, progress 1..99, a retryable fail, start again, ...
 * One version per event, so the task ends at version `n`.
 */
export function changes(n, atMs = 1000) {
  const out = [];
  let p = 0;
  while (out.length < n) {
    const t = atMs + out.length;
    if (out.length === 0 || p === -1) {
      out.push(start(t));
      p = 0;
    } else if (p < 99) {
      p += 1;
      out.push(progress(t, p));
    } else {
      out.push(fail(t, 'retry for more versions', true));
      p = -1;
    }
  }
  return out;
}

/** maxAttempts enough for `changes(n)`. */
export const attemptsFor = (n) => Math.ceil(n / 101) + 1;

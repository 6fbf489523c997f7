// Tasks in a given shape, built through the API.

import { attemptsFor, changes, fail, start, succeed } from './events.mjs';
import { uid } from './client.mjs';

/** A task at version `n` (one changing event per version); returns {task, events}. */
export async function taskAt({ a, exec }, n, { ttlMs = 3_600_000 } = {}) {
  const task = await a.createTask({ ttlMs, maxAttempts: attemptsFor(n) });
  const events = changes(n);
  await exec.drive(task.id, events);
  return { task, events };
}

/** A running task (version 1). */
export async function runningTask({ a, exec }, body = { ttlMs: 3_600_000, maxAttempts: 3 }) {
  const task = await a.createTask(body);
  await exec.drive(task.id, [start(100)]);
  return task;
}

/** A succeeded task (version 2) with a distinctive result. */
export async function succeededTask(ctx, { resultRef = `blob://${uid('r')}`, resultHash = `sha256:${uid('h')}` } = {}) {
  const task = await runningTask(ctx);
  await ctx.exec.drive(task.id, [succeed(200, resultRef, resultHash)]);
  return { ...task, resultRef, resultHash };
}

/** A failed task (version 2). */
export async function failedTask(ctx) {
  const task = await runningTask(ctx);
  await ctx.exec.drive(task.id, [fail(200, 'boom', false)]);
  return task;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it returns a truthy value or `timeoutMs` passes (then returns the last value). */
export async function waitFor(probe, { timeoutMs, intervalMs = 100 }) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value || Date.now() >= deadline) return value;
    await sleep(intervalMs);
  }
}

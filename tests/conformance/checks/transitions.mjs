// The pure-function vectors (tests/vectors/*.json steps `applyEvent` and
// `expireTask`) replayed over HTTP, so that the order of judgement and
// every reason are checked end to end (PROTOCOL.md §Wire types › State
// machine rules).
//
// A step gives a literal task and an event. Over HTTP the task is built
// with events (start, retryable fails, progress, succeed, fail, expire)
// until its state, attempts, maxAttempts, progress and result match the
// literal; then the step's event is sent and the outcome compared.
// Versions are compared relative to the literal's (the built task may
// have taken more versions to get there), history entries after it are
// compared in full, and times keep their distance to the deadline, as in
// vectors.mjs. `expireTask` is the backend's own timer: the built task has
// a short TTL (lib/short-ttl.mjs) and is watched until it has passed.
// Left out: literal tasks no sequence of events reaches (a queued task
// out of attempts, so `not-startable` has no HTTP equivalent), steps that
// expect an error about the literal task itself (`task.*` fields), and
// vectors with `requires` (the lifecycle's literal tasks carry leases and
// fencing that these events do not build).

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { assertMatches, assertResumeResponse } from '../lib/match.mjs';
import { expire, fail, progress, start, succeed } from '../lib/events.mjs';
import { SHORT_TTL_TIMEOUT_MS, awaitExpiry, shortLivedTask } from '../lib/short-ttl.mjs';

const DIR = new URL('../../vectors/', import.meta.url);
const TIME_KEYS = new Set(['atMs', 'expiresAtMs']);
const article = (word) => (/^[aeiou]/.test(word) ? 'an' : 'a');

/** The events that take a new task to the literal's state, or null. */
export function recipe(literal) {
  const { state, attempts, maxAttempts, progress: p } = literal;
  if (!Number.isInteger(attempts) || attempts > maxAttempts) return null;
  const tries = (n) => Array.from({ length: n }, () => [start(1), fail(2, 'retry', true)]).flat();
  const running = () => (attempts < 1 ? null : [...tries(attempts - 1), start(3), ...(p > 0 ? [progress(4, p)] : [])]);
  switch (state) {
    case 'queued':
      return p === 0 && (attempts === 0 || attempts < maxAttempts) ? tries(attempts) : null;
    case 'running':
      return running();
    case 'succeeded':
      return p === 100 && running() ? [...running(), succeed(5, literal.resultRef, literal.resultHash)] : null;
    case 'failed':
      return running() && [...running(), fail(5, literal.error ?? 'failed', false)];
    case 'expired':
      return attempts === 0 ? (p === 0 ? [expire(5)] : null) : running() && [...running(), expire(5)];
    default:
      return null;
  }
}

function loadSteps() {
  let files;
  try {
    files = readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
  } catch {
    return [];
  }
  const steps = [];
  for (const file of files) {
    const vector = JSON.parse(readFileSync(new URL(file, DIR), 'utf8'));
    // Seed 000's pure steps only: a lifecycle literal task carries a lease
    // and fencing state that these events do not build.
    if ((vector.requires ?? []).length > 0) continue;
    vector.steps.forEach((step, i) => {
      if (step.op !== 'applyEvent' && step.op !== 'expireTask') return;
      if (step.expectError || !step.task || recipe(step.task) === null) return;
      steps.push({ file, index: i + 1, step });
    });
  }
  return steps;
}

/** Maps the literal's times to a task's: same distance to the deadline. */
function timeMap(literal, expiresAtMs) {
  const offset = expiresAtMs - literal.expiresAtMs;
  const map = (value, key) => {
    if (Array.isArray(value)) return value.map((v) => map(v));
    if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, map(v, k)]));
    if (typeof value === 'number' && TIME_KEYS.has(key)) return value === literal.expiresAtMs ? expiresAtMs : value + offset;
    return value;
  };
  return map;
}

/**
 * The literal task on the server: {id, expiresAtMs, version, map}. With
 * `shortTtl`, on a task the backend expires by itself within seconds.
 */
async function build(ctx, literal, { shortTtl = false } = {}) {
  // Recipe times are a few ms from 0, far before any deadline: the same
  // events on any task, whatever its expiresAtMs.
  const events = recipe(literal).map((e) => timeMap(literal, literal.expiresAtMs + 3_600_000)(e));
  let task;
  let ttlMs = 3_600_000;
  let built;
  if (shortTtl) {
    ({ task, ttlMs, view: built } = await shortLivedTask(ctx, { maxAttempts: literal.maxAttempts, events }));
  } else {
    task = await ctx.a.createTask({ ttlMs, maxAttempts: literal.maxAttempts });
    if (events.length > 0) await ctx.exec.drive(task.id, events);
    built = await ctx.a.task(task.id);
  }
  const map = timeMap(literal, task.expiresAtMs);
  const { state, attempts, maxAttempts, progress: p, resultRef, resultHash } = literal;
  assertMatches(built, { state, attempts, maxAttempts, progress: p, resultRef, resultHash }, 'the literal task, built with events');
  return { id: task.id, expiresAtMs: task.expiresAtMs, ttlMs, version: built.version, map };
}

/** The expected task fields and history after the step, on the built task. */
async function assertAfter(ctx, built, literal, expectedTask, what) {
  const { history, version, id, ...fields } = expectedTask;
  const shift = built.version - literal.version;
  const task = await ctx.a.task(built.id);
  assertMatches(task, { ...built.map(fields), version: version === undefined ? undefined : version + shift }, `${what}: task`);
  if (history) {
    const added = history.filter((e) => e.version > literal.version).map((e) => ({ ...e, version: e.version + shift }));
    const answer = assertResumeResponse(await ctx.a.resume(built.id, { cursor: built.version }), undefined, `${what}: resume`);
    assertMatches(added.length === 0 ? [] : answer.events, built.map(added), `${what}: history entries after the literal's`);
  }
}

async function applyEvent(ctx, { step }, what) {
  const built = await build(ctx, step.task);
  const t = await ctx.exec.apply(built.id, built.map(step.event));
  const { task: expectedTask = {}, ...outcome } = step.expect;
  assertMatches(t, outcome, `${what}: transition`);
  await assertAfter(ctx, built, step.task, expectedTask, what);
}

async function expireTask(ctx, { step }, what) {
  const built = await build(ctx, step.task, { shortTtl: true });
  const { task: expectedTask = {}, changed } = step.expect;
  if (changed) {
    const answer = await awaitExpiry(ctx.a, built.id, built.version, built.ttlMs);
    assert.equal(answer?.task?.state, 'expired', `${what}: the backend did not expire the task by itself (ttlMs ${built.ttlMs})`);
  } else {
    // Unchanged: wait until a task created after it has expired by itself.
    const witness = await ctx.a.createTask({ ttlMs: built.ttlMs, maxAttempts: 1 });
    const answer = await awaitExpiry(ctx.a, witness.id, 0, built.ttlMs);
    assert.equal(answer?.task?.state, 'expired', `${what}: the witness task did not expire (ttlMs ${built.ttlMs})`);
  }
  await assertAfter(ctx, built, step.task, { version: step.task.version + (changed ? 1 : 0), ...expectedTask }, what);
}

export default {
  section: 'Shared vectors: the pure transitions over HTTP',
  protocol: 'Wire types › State machine rules',
  concurrency: 4,
  checks: loadSteps().map((s) => ({
    name: `${s.file} step ${s.index} (${s.step.op} on ${article(s.step.task.state)} ${s.step.task.state} task → ${s.step.expect.reason})`,
    timeoutMs: s.step.op === 'expireTask' ? SHORT_TTL_TIMEOUT_MS : undefined,
    run: (ctx) => (s.step.op === 'applyEvent' ? applyEvent : expireTask)(ctx, s, `${s.file} step ${s.index}`),
  })),
};

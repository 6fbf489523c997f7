// The shared vectors (tests/vectors/*.json) replayed over HTTP.
//
// PROTOCOL.md: a backend must reproduce taskwire-core's state machine
// exactly, as the vectors pin it down. A vector runs against a fresh book
// with ids and clocks of its own; over HTTP the server assigns ids and the
// creation time. So each vector task maps to a server task, and each of its
// times is shifted by that task's offset (server expiresAtMs − vector
// expiresAtMs): events stay exactly as far from the deadline as in the
// vector. Steps that HTTP cannot express are left out: deliveries (the
// server's clock), mirrors (client side), pure functions, blank callback
// ids (a blank header is a missing one: see the signature checks), and
// resume answers when --retention differs from the vector's window.
// Callback ids are made each server task's own (`{taskId}:{callbackId}`):
// over HTTP a tenant's callback id is refused on its other tasks, a rule
// of the HTTP boundary that core's book (fix-02: ids scoped to the task)
// does not have; within a task the vector's ids keep their meaning. For
// an unknown task the answer is 401 over HTTP (no secret to check
// against), where the book says not-found.
// A task whose TTL could run out during the replay (under 10 s) is created
// with a 60 s one instead: its events keep their distance to the deadline
// all the same, and nothing in a replayed vector reads the server's clock.
// Vectors that drive the clock (expireDue) or ids (create errors) are left
// out whole.
//
// The lifecycle (PROTOCOL.md §Lifecycle): executor events go as signed
// callbacks, people's events (`cancel`, `decide`) through their routes
// (the body without `type`, `atMs` and `actor`, which the server sets:
// its clock, the caller's credential), and the create fields are passed
// through. The lease is not on the wire, so expectations about it are
// not compared; a task created without a grace period has the server's
// default over HTTP (it only matters once a lease lapsed, which no
// replayed vector lets happen). Left out whole, and why:
// - vectors that apply the sweeper's events (`lapse`, `abandon`,
//   `timeout`) directly: over HTTP only the backend's sweeper records
//   them, at its own time (callbacks refuse them): lifecycle-03 to -07,
//   -10, -13 to -15;
// - vectors that drive the clock (`expireDue`): lifecycle-12;
// - vectors with a lease that could run out during the replay (the
//   backend's sweeper would lapse it): lifecycle-02 (which also uses the
//   pure functions), -08, -11;
// - vectors whose expectations depend on the server-assigned `atMs` or
//   `actor` of a person's event: a notification made by one (its `atMs`
//   is the server's clock), a history entry of one, or one judged by its
//   time against the TTL: lifecycle-07, -08, -11.
// Replayed: lifecycle-01 and -09 (fencing; a cancel the worker cannot
// honour), besides the seed's vectors.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { assertError, assertMatches, assertResumeResponse } from '../lib/match.mjs';
import { uid } from '../lib/client.mjs';

const DIR = new URL('../../vectors/', import.meta.url);
const SKIPPED_OPS = new Set(['deliver', 'mirrorNew', 'mirrorMerge']);
/** Events only the backend's sweeper records (callbacks refuse them). */
const SWEEPER_EVENTS = new Set(['lapse', 'abandon', 'timeout']);
/** People's events: sent through `POST …/cancel` and `…/decisions`. */
const ROUTES = { cancel: 'cancel', decide: 'decisions' };
/** Fields of a person's event the server sets itself. */
const SERVER_SET = new Set(['type', 'atMs', 'actor']);
/** The create fields of the lifecycle and the plan (§Steps), passed through. */
const LIFECYCLE_CREATE = ['deadlineMs', 'unknownGraceMs', 'autoRequeue', 'workflowVersion', 'steps'];
const REPLAYED_OPS = new Set(['create', 'apply', 'resume', 'get', 'drain']);
const MIN_TTL_MS = 10_000;
const STRETCHED_TTL_MS = 60_000;
const TIME_KEYS = new Set(['atMs', 'expiresAtMs', 'deadlineAtMs']);

function loadVectors() {
  let files;
  try {
    files = readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
  } catch {
    return [];
  }
  return files.map((f) => ({ file: f, ...JSON.parse(readFileSync(new URL(f, DIR), 'utf8')) }));
}

/**
 * Features a vector needs (its `requires`) that /v1 does not carry yet.
 * (The lifecycle of issue 11 is carried: PROTOCOL.md §Lifecycle.)
 * `server-clock`: the vector sets the server's clock at each callback
 * (`nowMs`), which HTTP cannot; lifecycle.mjs checks those rules live.
 */
const NOT_OVER_HTTP_YET = new Set(['server-clock']);

/** Why a vector cannot be replayed over HTTP, or null. */
function unreplayable(vector) {
  const missing = (vector.requires ?? []).filter((f) => NOT_OVER_HTTP_YET.has(f));
  if (missing.length > 0) return `needs ${missing.join(', ')}, not over HTTP yet`;
  const ids = new Set();
  for (const step of vector.steps) {
    if (!REPLAYED_OPS.has(step.op) && !SKIPPED_OPS.has(step.op)) return `uses ${step.op}`;
    if (step.op !== 'create') continue;
    if (step.expectError) return 'expects a create error';
    if (step.input.nowMs !== 0) return 'creates at another time than 0';
    if (ids.has(step.input.id)) return 'creates an id twice';
    ids.add(step.input.id);
  }
  return lifecycleUnreplayable(vector) ?? (vector.steps.some((s) => s.op === 'apply') ? null : 'has no callbacks');
}

/** Why a vector's lifecycle steps cannot be replayed over HTTP (see the top of this file), or null. */
function lifecycleUnreplayable(vector) {
  const created = new Map(); // vector id -> nowMs
  const people = new Set(); // vector ids a person's event reached
  const drains = vector.steps.some((s) => s.op === 'drain');
  const sweeper = vector.steps.find((s) => s.op === 'apply' && SWEEPER_EVENTS.has(s.event.type));
  if (sweeper) return `applies the sweeper's ${sweeper.event.type} directly`;
  for (const step of vector.steps) {
    if (step.op === 'create') created.set(step.input.id, step.input);
    if (step.op === 'get' && people.has(step.taskId)) {
      if ((step.expect?.history ?? []).some((e) => ROUTES[e.event?.type])) return "expects a history entry of a person's event (its atMs and actor are the server's)";
    }
    if (step.op === 'resume' && people.has(step.taskId)) {
      if ((step.expect?.events ?? []).some((e) => ROUTES[e.event?.type])) return "expects a history entry of a person's event (its atMs and actor are the server's)";
    }
    if (step.op !== 'apply') continue;
    const { type } = step.event;
    const input = created.get(step.taskId);
    if (input && ['start', 'heartbeat'].includes(type) && typeof step.event.leaseMs === 'number') {
      if (step.event.atMs + step.event.leaseMs - input.nowMs < MIN_TTL_MS) return `a ${step.event.leaseMs} ms lease could lapse during the replay`;
    }
    if (!ROUTES[type]) continue;
    people.add(step.taskId);
    if (step.callbackId !== undefined) return "sends a person's event with a callback id";
    if (step.expect?.notify && drains) return "expects the notification of a person's event (its atMs is the server's)";
    if (input && step.event.atMs >= input.nowMs + input.ttlMs) return "judges a person's event by its time against the TTL";
  }
  return null;
}

/** One vector's tasks on the server. */
class Replay {
  constructor(ctx, vector) {
    this.ctx = ctx;
    this.vector = vector;
    this.tasks = new Map(); // vector id -> {id, offset, vectorExpires, expiresAtMs}
    this.drained = new Set();
  }

  task(vectorId) {
    const t = this.tasks.get(vectorId);
    return t ?? { id: `missing-${uid('t')}`, offset: 0, vectorExpires: NaN, expiresAtMs: NaN, unknown: true };
  }

  /** Maps a vector value to the server's: ids and times of task `t`. */
  map(value, t, key) {
    if (Array.isArray(value)) return value.map((v) => this.map(v, t));
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.map(v, t, k)]));
    }
    if (typeof value === 'number' && TIME_KEYS.has(key)) {
      // The deadline itself maps to the server's deadline exactly; an
      // invalid (negative) time stays invalid.
      if (value < 0) return value;
      return value === t.vectorExpires ? t.expiresAtMs : value + t.offset;
    }
    if (key === 'taskId' || key === 'id') return this.tasks.get(value)?.id ?? value;
    return value;
  }

  async run() {
    for (const [i, step] of this.vector.steps.entries()) {
      if (SKIPPED_OPS.has(step.op)) continue;
      const where = `${this.vector.file} step ${i + 1} (${step.op}${step.taskId ? ` ${step.taskId}` : ''})`;
      await this[step.op](step, where);
    }
  }

  async create(step, where) {
    const { id, nowMs, ttlMs, maxAttempts } = step.input;
    const body = { ttlMs: ttlMs < MIN_TTL_MS ? STRETCHED_TTL_MS : ttlMs, maxAttempts };
    for (const k of LIFECYCLE_CREATE) if (step.input[k] !== undefined) body[k] = step.input[k];
    const created = await this.ctx.a.createTask(body);
    const vectorExpires = nowMs + ttlMs;
    const t = {
      id: created.id,
      vectorExpires,
      expiresAtMs: created.expiresAtMs,
      offset: created.expiresAtMs - vectorExpires,
      // Without one, the server's default grace period stands in for the book's none.
      defaultGrace: step.input.unknownGraceMs === undefined && step.input.autoRequeue !== false,
    };
    this.tasks.set(id, t);
    if (step.expect) {
      const { history, ...expected } = step.expect.task;
      assertMatches(created, this.fields(expected, t), `${where}: task`);
    }
  }

  /** A vector task's expected fields as the server shows them: mapped, without the lease (not on the wire). */
  fields(expected, t) {
    const { lease, ...rest } = this.map(expected, t);
    if (t.defaultGrace) delete rest.unknownGraceMs;
    return rest;
  }

  async apply(step, where) {
    if (typeof step.callbackId === 'string' && step.callbackId.trim() === '') return;
    if (ROUTES[step.event.type]) return this.act(step, where);
    const t = this.task(step.taskId);
    const id = step.callbackId === undefined ? uid('cb') : `${t.id}:${step.callbackId}`;
    const res = await this.ctx.exec.send(t.id, this.map(step.event, t), { id });
    if (step.expectError) {
      const { code, field } = step.expectError;
      const leaf = field.split('.').pop();
      if (t.unknown) return assertError(res, 401, 'unauthorized');
      return assertError(res, 400, code, leaf);
    }
    assert.equal(res.status, 200, `${where}: expected 200, got ${res.status}`);
    const { task: expectedTask = {}, ...outcome } = step.expect;
    const { lease, ...transition } = outcome;
    assertMatches(res.json, transition, `${where}: transition`);
    const { version, state, ...rest } = expectedTask;
    assertMatches(res.json, { version, state }, `${where}: transition`);
    await this.taskAfter(t, rest, where);
  }

  /** The task's other expected fields, through GET. */
  async taskAfter(t, expected, where) {
    const { history, ...fields } = this.fields(expected, t);
    if (Object.keys(fields).length > 0) assertMatches(await this.ctx.a.task(t.id), fields, `${where}: task after`);
  }

  /** A person's event, through its route: the server sets `type`, `atMs` and `actor`. */
  async act(step, where) {
    const t = this.task(step.taskId);
    const body = Object.fromEntries(Object.entries(step.event).filter(([k]) => !SERVER_SET.has(k)));
    const res = await this.ctx.a.act(t.id, ROUTES[step.event.type], body);
    if (step.expectError) {
      if (t.unknown) return assertError(res, 404, 'not-found');
      return assertError(res, 400, step.expectError.code, step.expectError.field.split('.').pop());
    }
    assert.equal(res.status, 200, `${where}: expected 200, got ${res.status}`);
    // The answer has no notify (a drain checks it) and no callback id.
    const { task: expectedTask = {}, changed, duplicate, reason } = step.expect;
    assertMatches(res.json, { changed, duplicate, reason }, `${where}: answer`);
    const { version, state, ...rest } = expectedTask;
    assertMatches(res.json.task, { version, state }, `${where}: answer.task`);
    await this.taskAfter(t, rest, where);
  }

  async resume(step, where) {
    if ((this.vector.retentionVersions ?? 8) !== this.ctx.retention) return;
    const t = this.task(step.taskId);
    const res = await this.ctx.a.resume(t.id, { cursor: step.cursor });
    if (step.expectError) return assertError(res, 404, step.expectError.code);
    const { task, ...answer } = step.expect;
    assertResumeResponse(res, { ...this.map(answer, t), ...(task && { task: this.fields(task, t) }) }, `${where}: answer`);
  }

  async get(step, where) {
    const t = this.task(step.taskId);
    const res = await this.ctx.a.get(t.id);
    if (step.expect === null) return assertError(res, 404, 'not-found');
    assert.equal(res.status, 200, `${where}: expected 200, got ${res.status}`);
    const { history, ...fields } = step.expect;
    assertMatches(res.json, this.fields(fields, t), `${where}: task`);
    if (history?.length > 0) {
      // GET carries no history; resume shows its last `retention` entries.
      const version = res.json.version;
      const cursor = Math.max(0, version - this.ctx.retention);
      const tail = history.filter((e) => e.version > cursor);
      const answer = await this.ctx.a.answer(t.id, cursor);
      assertMatches(answer.events, this.map(tail, t), `${where}: history (via resume from ${cursor})`);
    }
  }

  async drain(step, where) {
    const vectorIds = new Map([...this.tasks].map(([vid, t]) => [t.id, vid]));
    const fresh = (await this.ctx.a.feedSince(this.ctx.feedStart.a)).filter(
      (n) => vectorIds.has(n.taskId) && !this.drained.has(n.seq),
    );
    for (const n of fresh) this.drained.add(n.seq);
    // A drain lists notifications by task id, then time: compare in that order.
    const order = (x, y) => (x.taskId < y.taskId ? -1 : x.taskId > y.taskId ? 1 : x.atMs - y.atMs);
    const actual = fresh.map((n) => ({ taskId: vectorIds.get(n.taskId), state: n.state, atMs: n.atMs }));
    const expected = step.expect.map((e) => ({ ...e, atMs: this.map(e.atMs, this.task(e.taskId), 'atMs') }));
    assertMatches(actual.sort(order), expected.sort(order), `${where}: notifications`);
  }
}

const vectors = loadVectors();

/** Each vector file and why it is not replayed (null: it is). */
export const REPLAYABLE = vectors.map((v) => ({ file: v.file, unreplayable: unreplayable(v) }));

export default {
  section: 'Shared vectors (tests/vectors) over HTTP',
  protocol: 'Wire types',
  checks: vectors
    .filter((vector) => unreplayable(vector) === null)
    .map((vector) => ({
      name: `${vector.file} replayed over HTTP`,
      run: (ctx) => new Replay(ctx, vector).run(),
    })),
};

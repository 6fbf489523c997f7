// Assertions on protocol values. Responses may carry fields this suite
// does not know (PROTOCOL.md §Versioning), so objects are matched as in
// tests/vectors/README.md: every expected key must be present with a
// matching value, `null` means "absent", arrays match element by element
// (and an `undefined` expectation is no expectation).

import assert, { AssertionError } from 'node:assert/strict';

export const STATES = [
  'queued', 'running', 'succeeded', 'failed', 'expired', // seed 000
  'cancelling', 'cancel_ineffective', 'cancelled', 'waiting_approval', 'unknown', 'timed_out', // §Lifecycle
];
export const TERMINAL = ['succeeded', 'failed', 'expired', 'cancelled', 'timed_out'];
export const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function show(v) {
  return v === undefined ? 'absent' : JSON.stringify(v);
}

function fail(message) {
  throw new AssertionError({ message });
}

/** Vector-style match of `actual` against `expected`; `what` names the value. */
export function assertMatches(actual, expected, what = 'value') {
  if (expected === null) {
    if (actual !== undefined && actual !== null) fail(`${what}: expected absent, got ${show(actual)}`);
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) fail(`${what}: expected an array, got ${show(actual)}`);
    if (actual.length !== expected.length) {
      fail(`${what}: expected ${expected.length} elements, got ${actual.length}: ${show(actual)}`);
    }
    expected.forEach((e, i) => assertMatches(actual[i], e, `${what}[${i}]`));
    return;
  }
  if (typeof expected === 'object') {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) {
      fail(`${what}: expected an object, got ${show(actual)}`);
    }
    for (const [k, v] of Object.entries(expected)) {
      if (v !== undefined) assertMatches(actual[k], v, `${what}.${k}`);
    }
    return;
  }
  if (actual !== expected) fail(`${what}: expected ${show(expected)}, got ${show(actual)}`);
}

export function isCounter(v) {
  return Number.isInteger(v) && v >= 0 && v <= MAX_SAFE;
}

/** A TaskView: the fields of PROTOCOL.md §Wire types, with their types. */
export function assertTaskView(task, what = 'task') {
  if (typeof task !== 'object' || task === null) fail(`${what}: expected a TaskView, got ${show(task)}`);
  if (typeof task.id !== 'string' || task.id.trim() === '') fail(`${what}.id: expected a non-blank string, got ${show(task.id)}`);
  if (!STATES.includes(task.state)) fail(`${what}.state: expected one of ${STATES.join(', ')}, got ${show(task.state)}`);
  if (typeof task.expiresAtMs !== 'number' || !Number.isFinite(task.expiresAtMs)) {
    fail(`${what}.expiresAtMs: expected a finite number, got ${show(task.expiresAtMs)}`);
  }
  for (const k of ['attempts', 'maxAttempts', 'version']) {
    if (!isCounter(task[k])) fail(`${what}.${k}: expected an integer counter, got ${show(task[k])}`);
  }
  if (!Number.isInteger(task.progress) || task.progress < 0 || task.progress > 100) {
    fail(`${what}.progress: expected an integer 0..100, got ${show(task.progress)}`);
  }
  for (const k of ['resultRef', 'resultHash', 'error', 'artifactRef', 'artifactHash', 'question', 'decisionReason']) {
    if (task[k] !== undefined && task[k] !== null && typeof task[k] !== 'string') {
      fail(`${what}.${k}: expected a string when present, got ${show(task[k])}`);
    }
  }
  for (const k of ['deadlineAtMs', 'unknownGraceMs']) {
    if (task[k] !== undefined && task[k] !== null && !(typeof task[k] === 'number' && Number.isFinite(task[k]))) {
      fail(`${what}.${k}: expected a finite number when present, got ${show(task[k])}`);
    }
  }
  for (const k of ['continuations', 'decisionVersion']) {
    if (task[k] !== undefined && task[k] !== null && !isCounter(task[k])) fail(`${what}.${k}: expected a counter when present, got ${show(task[k])}`);
  }
  if (task.decision !== undefined && !['approve', 'request_changes', 'reject'].includes(task.decision)) {
    fail(`${what}.decision: expected approve, request_changes or reject, got ${show(task.decision)}`);
  }
}

/** The error shape of PROTOCOL.md §Conventions, with its status and code. */
export function assertError(res, status, code, field) {
  assert.equal(res.status, status, `expected HTTP ${status} (${code}), got ${res.status}`);
  assertJsonType(res);
  const err = res.json?.error;
  if (typeof err !== 'object' || err === null) fail(`expected {"error":{"code","message"}}, got ${show(res.json ?? res.text)}`);
  assert.equal(err.code, code, `error.code: expected ${show(code)}, got ${show(err.code)}`);
  if (typeof err.message !== 'string' || err.message.trim() === '') {
    fail(`error.message: expected a non-empty string, got ${show(err.message)}`);
  }
  if (field !== undefined) {
    const named = field instanceof RegExp ? field.test(err.message) : err.message.includes(field);
    assert.ok(named, `error.message should name the field ${field}: ${show(err.message)}`);
  }
  return err;
}

export function assertJsonType(res) {
  const type = res.headers.get('content-type') ?? '';
  assert.match(type, /^application\/json\b/i, `Content-Type: expected application/json, got ${show(type)}`);
}

export function assertNoStore(res, what = 'response') {
  const cc = res.headers.get('cache-control') ?? '';
  assert.ok(/(^|[\s,])no-store($|[\s,])/i.test(cc), `${what}: Cache-Control must include no-store, got ${show(cc)}`);
}

/**
 * A resume answer (body) against `{mode, versions, task}`: the mode, the
 * versions of the delta entries in order, and a vector-style match of
 * `task`. `task` never carries `history`.
 */
export function assertAnswer(answer, { mode, versions, events, task } = {}, what = 'answer') {
  if (typeof answer !== 'object' || answer === null) fail(`${what}: expected a resume answer, got ${show(answer)}`);
  if (!['caught-up', 'delta', 'snapshot'].includes(answer.mode)) fail(`${what}.mode: unknown mode ${show(answer.mode)}`);
  if (mode !== undefined) assert.equal(answer.mode, mode, `${what}.mode: expected ${show(mode)}, got ${show(answer.mode)}`);
  if (!Array.isArray(answer.events)) fail(`${what}.events: expected an array, got ${show(answer.events)}`);
  if (answer.mode !== 'delta' && answer.events.length > 0) {
    fail(`${what}.events: a ${answer.mode} answer has no events, got ${answer.events.length}`);
  }
  assertTaskView(answer.task, `${what}.task`);
  if ('history' in answer.task) fail(`${what}.task: must not carry history`);
  if (answer.mode === 'delta') {
    assert.ok(answer.events.length > 0, `${what}.events: a delta has at least one entry`);
    answer.events.forEach((e, i) => {
      if (!isCounter(e?.version)) fail(`${what}.events[${i}].version: expected a counter, got ${show(e?.version)}`);
      if (typeof e.event?.type !== 'string') fail(`${what}.events[${i}].event: expected an Event, got ${show(e.event)}`);
    });
    const vs = answer.events.map((e) => e.version);
    const last = vs[vs.length - 1];
    assert.equal(last, answer.task.version, `${what}: the last delta entry (${last}) must be the task's version (${answer.task.version})`);
    vs.forEach((v, i) => {
      if (i > 0 && v !== vs[i - 1] + 1) fail(`${what}.events: versions must be consecutive, oldest first: ${show(vs)}`);
    });
  }
  if (versions !== undefined) {
    assert.deepEqual(answer.events.map((e) => e.version), versions, `${what}.events: versions`);
  }
  if (events !== undefined) assertMatches(answer.events, events, `${what}.events`);
  if (task !== undefined) assertMatches(answer.task, task, `${what}.task`);
  return answer;
}

/** A 200 resume response: JSON, Cache-Control: no-store, and a valid answer. */
export function assertResumeResponse(res, expected, what = 'resume') {
  assert.equal(res.status, 200, `${what}: expected HTTP 200, got ${res.status}`);
  assertJsonType(res);
  assertNoStore(res, what);
  return assertAnswer(res.json, expected, what);
}

// PROTOCOL.md §Batches from the client's side: create a batch, follow it
// (resume and events), and the shape of a BatchAnswer. Each element of an
// answer's `tasks` is a resume answer of one task, checked as one.

import assert from 'node:assert/strict';
import { assertAnswer, assertJsonType, assertMatches, assertNoStore, assertTaskView, isCounter } from './match.mjs';
import { openEventStream } from './sse.mjs';

const enc = encodeURIComponent;
const MODES = ['caught-up', 'delta', 'snapshot'];

/** `n` create bodies, item `i` with kind `k<i>` and input `{item: i}` (`extra` merged in). */
export const items = (n, extra = {}) =>
  Array.from({ length: n }, (_, i) => ({ ttlMs: 3_600_000, maxAttempts: 3, kind: `k${i}`, input: { item: i }, ...extra }));

/** POST /v1/batches: `body` an object (sent as JSON) or a string (sent as is). */
export function createBatch(http, body, { key, token } = {}) {
  const headers = { 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  const opts = { headers, body: typeof body === 'string' ? body : JSON.stringify(body) };
  if (token !== undefined) opts.token = token;
  return http.request('POST', '/v1/batches', opts);
}

/**
 * Creates a batch of `bodies` and checks the 201: the batch at cursor 1
 * with every task open, the tasks in item order, each a version-0 task
 * of its body with `batchId` and the batch's epoch. Returns the answer.
 */
export async function createdBatch(http, bodies, opts) {
  const res = await createBatch(http, { items: bodies }, opts);
  assert.equal(res.status, 201, `create batch: expected 201, got ${res.status}`);
  assertJsonType(res);
  const batch = res.json;
  assert.equal(typeof batch?.batchId, 'string', `batch.batchId: expected a string, got ${JSON.stringify(batch?.batchId)}`);
  assert.ok(batch.batchId.trim() !== '' && Buffer.byteLength(batch.batchId) <= 255, 'batch.batchId: a non-blank id of at most 255 bytes');
  assertMatches(batch, { size: bodies.length, cursor: 1, open: bodies.length }, 'created batch');
  assertEpoch(batch, 'created batch');
  assert.ok(Array.isArray(batch.tasks) && batch.tasks.length === bodies.length, `batch.tasks: expected ${bodies.length} tasks`);
  batch.tasks.forEach((task, i) => {
    const what = `created batch.tasks[${i}]`;
    assertTaskView(task, what);
    assertMatches(task, { state: 'queued', version: 0, attempts: 0, maxAttempts: bodies[i].maxAttempts, batchId: batch.batchId, kind: bodies[i].kind ?? null }, what);
    assert.deepEqual(task.input, bodies[i].input, `${what}.input: the item's input, in item order`);
    assert.equal(task.epoch, batch.epoch, `${what}.epoch: each task as a single create answers it, in the batch's epoch`);
  });
  assert.equal(new Set(batch.tasks.map((t) => t.id)).size, bodies.length, 'every item is a task of its own');
  return batch;
}

/** GET /v1/batches/{id}/resume. */
export function batchResume(http, id, params = {}, opts = {}) {
  const q = Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${enc(v)}`)
    .join('&');
  return http.request('GET', `/v1/batches/${enc(id)}/resume${q ? `?${q}` : ''}`, opts);
}

/** A 200 batch resume for `cursor`, checked (no-store, the shape, `expected`); returns the answer. */
export async function batchAnswer(http, id, cursor, expected, params = {}) {
  const res = await batchResume(http, id, { cursor, ...params });
  const what = `batch resume (cursor=${cursor}${params.snapshot ? ', snapshot=1' : ''})`;
  return assertBatchResponse(res, { batchId: id, ...expected }, what);
}

/**
 * The batch's cursor now (a snapshot's). The cursor grows by one or more
 * per change (PROTOCOL.md §Batches, "The batch cursor"), so the checks
 * read it rather than count it; `after`, when given, it must exceed.
 */
export async function cursorNow(http, id, after) {
  const { cursor } = await batchAnswer(http, id, 0, { mode: 'snapshot' }, { snapshot: 1 });
  if (after !== undefined) assert.ok(cursor > after, `the batch cursor must grow with a change of one of its tasks: ${cursor} after ${after}`);
  return cursor;
}

export function assertBatchResponse(res, expected, what = 'batch resume') {
  assert.equal(res.status, 200, `${what}: expected HTTP 200, got ${res.status}`);
  assertJsonType(res);
  assertNoStore(res, what);
  return assertBatchAnswer(res.json, expected, what);
}

/** GET /v1/batches/{id}/events as a stream ({status, stream} as openEventStream gives it). */
export function batchEvents(http, id, { cursor, lastEventId, token, query = '' } = {}) {
  const params = [cursor === undefined ? '' : `cursor=${enc(cursor)}`, query].filter(Boolean).join('&');
  const headers = lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) };
  return openEventStream(http, `/v1/batches/${enc(id)}/events${params ? `?${params}` : ''}`, { headers, token });
}

function assertEpoch(value, what) {
  assert.equal(typeof value?.epoch, 'string', `${what}.epoch: expected a string, got ${JSON.stringify(value?.epoch)}`);
  assert.ok(value.epoch.trim() !== '', `${what}.epoch: must not be blank`);
}

/**
 * A BatchAnswer against `expected`: `{batchId, mode, cursor, size, open,
 * epoch, tasks}`, where `tasks` lists, in order, `{id, mode, versions,
 * events, task}` for each element (matched as resume answers). A snapshot
 * holds every task, a caught-up none, a delta at least one; no element is
 * `caught-up`.
 */
export function assertBatchAnswer(answer, expected = {}, what = 'batch answer') {
  assert.ok(answer !== null && typeof answer === 'object', `${what}: expected a BatchAnswer, got ${JSON.stringify(answer)}`);
  assert.ok(MODES.includes(answer.mode), `${what}.mode: unknown mode ${JSON.stringify(answer.mode)}`);
  for (const k of ['cursor', 'size', 'open']) {
    assert.ok(isCounter(answer[k]), `${what}.${k}: expected a counter, got ${JSON.stringify(answer[k])}`);
  }
  assert.ok(answer.open <= answer.size, `${what}: open (${answer.open}) cannot exceed size (${answer.size})`);
  assert.equal(typeof answer.batchId, 'string', `${what}.batchId: expected a string`);
  assertEpoch(answer, what);
  assert.ok(Array.isArray(answer.tasks), `${what}.tasks: expected an array, got ${JSON.stringify(answer.tasks)}`);
  if (answer.mode === 'snapshot') assert.equal(answer.tasks.length, answer.size, `${what}: a snapshot holds every task`);
  if (answer.mode === 'caught-up') assert.equal(answer.tasks.length, 0, `${what}: a caught-up answer holds no task`);
  if (answer.mode === 'delta') assert.ok(answer.tasks.length > 0, `${what}: a delta holds at least one task`);
  answer.tasks.forEach((t, i) => {
    assertAnswer(t, {}, `${what}.tasks[${i}]`);
    assert.notEqual(t.mode, 'caught-up', `${what}.tasks[${i}]: only tasks that changed are listed`);
    if (answer.mode === 'snapshot') assert.equal(t.mode, 'snapshot', `${what}.tasks[${i}]: a batch snapshot is a snapshot of every task`);
  });
  const { tasks, ...head } = expected;
  assertMatches(answer, head, what);
  if (tasks !== undefined) {
    assert.deepEqual(answer.tasks.map((t) => t.task.id), tasks.map((t) => t.id), `${what}.tasks: the tasks listed, in item order`);
    tasks.forEach(({ id, ...rest }, i) => assertAnswer(answer.tasks[i], rest, `${what}.tasks[${i}] (${id})`));
  }
  return answer;
}

/** The next message of a batch stream: `event: batch`, `id:` its cursor, a BatchAnswer. */
export async function batchMessage(stream, expected, what) {
  const m = await stream.next(5000);
  assert.ok(m, `${what}: the stream ended instead`);
  assert.equal(m.event, 'batch', `${what}: expected "event: batch", got ${JSON.stringify(m.event)}`);
  let answer;
  try {
    answer = JSON.parse(m.data);
  } catch {
    assert.fail(`${what}: data is not JSON: ${m.data}`);
  }
  assertBatchAnswer(answer, expected, what);
  assert.equal(m.id, String(answer.cursor), `${what}: "id:" must be the batch cursor after the message`);
  return answer;
}

// The two parties of PROTOCOL.md: a tenant's client (bearer token) and the
// executor (signed callbacks). Helpers assert the happy path so that
// checks read as the protocol does; the raw responses stay available.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { callbackBody, signedHeaders } from './sign.mjs';
import { assertJsonType, assertResumeResponse, assertTaskView } from './match.mjs';
import { openEventStream } from './sse.mjs';

export const uid = (prefix) => `${prefix}_${randomUUID().replaceAll('-', '')}`;

const enc = encodeURIComponent;
const query = (params) =>
  Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${enc(v)}`)
    .join('&');

/** A tenant's view of the API. */
export class Client {
  constructor(http) {
    this.http = http;
  }

  create(body, { key, headers = {} } = {}) {
    const h = { ...headers };
    if (key !== undefined) h['idempotency-key'] = key;
    const opts = { headers: h };
    if (typeof body === 'string') {
      opts.body = body;
      h['content-type'] = 'application/json';
    } else {
      opts.json = body;
    }
    return this.http.request('POST', '/v1/tasks', opts);
  }

  /** Creates a task and returns its view (asserts 201 at version 0). */
  async createTask(body = { ttlMs: 3_600_000, maxAttempts: 3 }, opts) {
    const res = await this.create(body, opts);
    assert.equal(res.status, 201, `create: expected 201, got ${res.status}`);
    assertJsonType(res);
    assertTaskView(res.json, 'created task');
    assert.equal(res.json.version, 0, 'a new task is at version 0');
    return res.json;
  }

  get(id) {
    return this.http.request('GET', `/v1/tasks/${enc(id)}`);
  }

  async task(id) {
    const res = await this.get(id);
    assert.equal(res.status, 200, `GET task: expected 200, got ${res.status}`);
    assertTaskView(res.json);
    return res.json;
  }

  resume(id, params = {}, opts = {}) {
    const q = query(params);
    return this.http.request('GET', `/v1/tasks/${enc(id)}/resume${q ? `?${q}` : ''}`, opts);
  }

  /** A 200 resume answer for `cursor`, checked against `expected`. */
  async answer(id, cursor, expected, params = {}) {
    const res = await this.resume(id, { cursor, ...params });
    return assertResumeResponse(res, expected, `answer(cursor=${cursor}${params.snapshot ? ', snapshot=1' : ''})`);
  }

  /** The task's version, read through resume (the minimum endpoint). */
  async version(id) {
    const a = await this.answer(id, 0, undefined, { snapshot: 1 });
    return a.task.version;
  }

  events(id, { cursor, lastEventId, headers = {}, token } = {}) {
    const q = cursor === undefined ? '' : `?cursor=${enc(cursor)}`;
    const h = { ...headers };
    if (lastEventId !== undefined) h['last-event-id'] = String(lastEventId);
    return openEventStream(this.http, `/v1/tasks/${enc(id)}/events${q}`, { headers: h, token });
  }

  /**
   * A person's request (PROTOCOL.md §Lifecycle): `what` is `cancel` or
   * `decisions`; `body` an object (sent as JSON), a string (sent as is), or
   * undefined (no body).
   */
  act(id, what, body) {
    const opts = typeof body === 'string' ? { body, headers: { 'content-type': 'application/json' } } : { json: body };
    return this.http.request('POST', `/v1/tasks/${enc(id)}/${what}`, opts);
  }

  /** Sends a person's request and asserts 200 with the answer's shape; returns it. */
  async acted(id, what, body) {
    const res = await this.act(id, what, body);
    assert.equal(res.status, 200, `${what}: expected 200, got ${res.status}`);
    assertJsonType(res);
    const a = res.json;
    for (const k of ['changed', 'duplicate']) {
      assert.equal(typeof a?.[k], 'boolean', `${what} answer.${k}: expected a boolean, got ${JSON.stringify(a?.[k])}`);
    }
    assert.equal(typeof a.reason, 'string', `${what} answer.reason: expected a string`);
    assertTaskView(a.task, `${what} answer.task`);
    return a;
  }

  deliver(id, key) {
    const headers = key === undefined ? {} : { 'idempotency-key': key };
    return this.http.request('POST', `/v1/tasks/${enc(id)}/deliveries`, { headers });
  }

  notifications(params = {}) {
    const q = query(params);
    return this.http.request('GET', `/v1/notifications${q ? `?${q}` : ''}`);
  }

  async page(after, limit) {
    const res = await this.notifications({ after, limit });
    assert.equal(res.status, 200, `notifications: expected 200, got ${res.status}`);
    assertJsonType(res);
    assert.ok(Array.isArray(res.json?.notifications), 'notifications: expected a "notifications" array');
    return res.json;
  }

  /** Every notification after `after`, following `next`. */
  async feedSince(after) {
    const all = [];
    for (;;) {
      const page = await this.page(after, 1000);
      if (page.notifications.length === 0) return all;
      all.push(...page.notifications);
      assert.ok(page.next > after, `notifications: next (${page.next}) must move past after (${after})`);
      after = page.next;
    }
  }

  /**
   * The feed's last seq, found with O(log n) probes of `after` (a feed
   * that grew for months is not paged through).
   */
  async feedTail() {
    const nonEmpty = async (after) => (await this.page(after, 1)).notifications.length > 0;
    if (!(await nonEmpty(0))) return 0;
    let lo = 0;
    let hi = 1;
    while (await nonEmpty(hi)) {
      lo = hi;
      hi *= 2;
    }
    // Entries exist after lo, none after hi.
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (await nonEmpty(mid)) lo = mid;
      else hi = mid;
    }
    return hi;
  }
}

/** The executor: signed callbacks (PROTOCOL.md §Executor callback). */
export class Executor {
  constructor(http, secret) {
    this.http = http;
    this.secret = secret;
  }

  /**
   * Sends `event` (its body names `taskId`), or the raw `body`, to
   * `taskId`'s callback path (`path` sends it to another task's). `id` is
   * the callback id; `headers` overrides the signed headers (undefined
   * drops one); `timestamp` and `secret` change what is signed.
   */
  send(taskId, event, { id = uid('cb'), body, timestamp, secret = this.secret, headers = {}, path = taskId } = {}) {
    const text = body ?? callbackBody(taskId, event);
    const signed = signedHeaders(secret, id, text, timestamp === undefined ? {} : { timestamp });
    return this.http.request('POST', `/v1/tasks/${enc(path)}/callbacks`, {
      body: text,
      headers: { 'content-type': 'application/json', ...signed, ...headers },
      token: null,
    });
  }

  /** Sends and asserts 200 with the transition shape; returns it. */
  async apply(taskId, event, opts) {
    const res = await this.send(taskId, event, opts);
    assert.equal(res.status, 200, `callback ${event?.type}: expected 200, got ${res.status}`);
    assertJsonType(res);
    const t = res.json;
    for (const k of ['changed', 'duplicate', 'duplicateCallback', 'notify']) {
      assert.equal(typeof t?.[k], 'boolean', `callback answer.${k}: expected a boolean, got ${JSON.stringify(t?.[k])}`);
    }
    assert.equal(typeof t.reason, 'string', 'callback answer.reason: expected a string');
    assert.ok(Number.isInteger(t.version), 'callback answer.version: expected an integer');
    assert.equal(typeof t.state, 'string', 'callback answer.state: expected a string');
    return t;
  }

  /**
   * Appends `chunk` ({attempt, offset, text}) to `taskId`'s output
   * `stream` (PROTOCOL.md §Live output › Append), signed as a callback;
   * `body` sends raw text instead, `path` another task's route.
   */
  output(taskId, stream, chunk, { id = uid('out'), body, path = taskId, pathStream = stream } = {}) {
    const text = body ?? JSON.stringify({ taskId, stream, ...chunk });
    const signed = signedHeaders(this.secret, id, text);
    return this.http.request('POST', `/v1/tasks/${enc(path)}/output/${enc(pathStream)}`, {
      body: text,
      headers: { 'content-type': 'application/json', ...signed },
      token: null,
    });
  }

  /** Applies events in order; each must change the task. Returns the last answer. */
  async drive(taskId, events) {
    let last;
    for (const e of events) {
      last = await this.apply(taskId, e);
      assert.equal(last.changed, true, `${e.type} should change the task (reason ${last.reason})`);
    }
    return last;
  }
}

/**
 * A worker (PROTOCOL.md §Workers): claims signed like callbacks, with a
 * tenant's callback secret, naming the tenant in `taskwire-tenant`.
 */
export class Worker {
  constructor(http, secret, tenant) {
    this.http = http;
    this.secret = secret;
    this.tenant = tenant;
  }

  /**
   * Sends a claim: `body` an object (sent as JSON) or the raw text. `id`
   * and `timestamp` choose what is signed (the same ones and the same
   * body are the same signed bytes); `secret` signs instead of the
   * tenant's; `tenant: null` sends no `taskwire-tenant`; `headers`
   * overrides (undefined drops one).
   */
  async send(body, { id = uid('clm'), timestamp, secret = this.secret, tenant = this.tenant, headers = {} } = {}) {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const signed = signedHeaders(secret, id, text, timestamp === undefined ? {} : { timestamp });
    const res = await this.http.request('POST', '/v1/work/claim', {
      body: text,
      headers: {
        'content-type': 'application/json',
        ...signed,
        ...(tenant === null ? {} : { 'taskwire-tenant': tenant }),
        ...headers,
      },
      token: null,
    });
    // The route is never 404 on a backend that offers workers: no check
    // expects it, and each says why at once.
    if (res.status === 404) {
      assert.fail(
        'POST /v1/work/claim answered 404: the backend offers no workers (PROTOCOL.md §Workers). ' +
          'A backend without them is run with --no-workers, which skips these checks',
      );
    }
    return res;
  }

  /**
   * Claims and asserts 200 with the answer's shape: `tasks`, each a task
   * view with its `lease`, and `nowMs`. Returns the answer.
   */
  async claim(body, opts) {
    const res = await this.send(body, opts);
    assertClaimResponse(res);
    return res.json;
  }
}

/** A 200 claim answer: `{"tasks":[TaskView + lease…],"nowMs":…}`. */
export function assertClaimResponse(res, what = 'claim') {
  assert.equal(res.status, 200, `${what}: expected 200, got ${res.status}`);
  assertJsonType(res);
  const a = res.json;
  assert.ok(Array.isArray(a?.tasks), `${what}: expected a "tasks" array, got ${JSON.stringify(a)}`);
  assert.ok(typeof a.nowMs === 'number' && Number.isFinite(a.nowMs), `${what}.nowMs: expected a number (the server's clock), got ${JSON.stringify(a.nowMs)}`);
  a.tasks.forEach((t, i) => {
    assertTaskView(t, `${what}.tasks[${i}]`);
    const l = t.lease;
    assert.ok(typeof l === 'object' && l !== null, `${what}.tasks[${i}].lease: expected an object, got ${JSON.stringify(l)}`);
    assert.ok(Number.isInteger(l.attempt) && l.attempt >= 1, `${what}.tasks[${i}].lease.attempt: expected an attempt, got ${JSON.stringify(l.attempt)}`);
    for (const k of ['expiresAtMs', 'leaseMs']) {
      assert.ok(typeof l[k] === 'number' && Number.isFinite(l[k]), `${what}.tasks[${i}].lease.${k}: expected a number, got ${JSON.stringify(l[k])}`);
    }
  });
  return a;
}

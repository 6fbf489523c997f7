// PROTOCOL.md §Live output over HTTP (issue 27): appends addressed by
// (attempt, offset) are idempotent, fenced by attempt, superseded by a
// newer attempt and closed by the task's end; a follower resumes by
// offset on the task's own long-poll, and one that asks for no output
// sees nothing of it. The vector `output-01-…` pins the judgement in
// core; these checks pin what a backend does with it. Skipped with
// --no-output. Each names the misreading it catches.

import assert from 'node:assert/strict';
import { assertError, assertMatches } from '../lib/match.mjs';

const HOUR = 3_600_000;
const ev = (type, attempt, extra = {}) => ({ type, atMs: Date.now(), attempt, ...extra });
const startOf = (attempt) => ev('start', attempt, { worker: `w${attempt}`, leaseMs: 60_000 });

/** A running task at attempt 1. */
async function running(a, exec) {
  const task = await a.createTask({ ttlMs: HOUR, maxAttempts: 3 });
  await exec.drive(task.id, [startOf(1)]);
  return task.id;
}

/** Appends and asserts it was delivered with `reason`; returns the answer. */
async function delivered(exec, id, chunk, reason, stream = 'draft') {
  const res = await exec.output(id, stream, chunk);
  assert.equal(res.status, 200, `append ${JSON.stringify(chunk)}: expected 200, got ${res.status} ${res.text}`);
  assertMatches(res.json, { reason }, `append ${JSON.stringify(chunk)}`);
  return res.json;
}

/** The `output` a follower holding (attempt, offset) of `draft` gets. */
async function outputFrom(a, id, attempt, offset, params = {}) {
  const res = await a.resume(id, { cursor: 0, output: 'draft', outputAttempt: attempt, outputOffset: offset, ...params });
  assert.equal(res.status, 200, `resume with output: ${res.status} ${res.text}`);
  return res.json.output;
}

const check = (name, run, extra = {}) => ({ name, needsOutput: true, run, ...extra });

export default {
  section: 'Live output',
  protocol: 'Live output',
  checks: [
    check('a chunk resent at its offset is a duplicate, and changes nothing', async ({ a, exec }) => {
      // Misreading caught: appending a resend again (the text doubles).
      const id = await running(a, exec);
      assertMatches(await delivered(exec, id, { attempt: 1, offset: 0, text: 'Hello' }, 'appended'), { attempt: 1, offset: 0, expected: 5 }, 'the first append');
      assertMatches(await delivered(exec, id, { attempt: 1, offset: 0, text: 'Hello' }, 'duplicate-chunk'), { expected: 5 }, 'the resend');
      assertMatches(await outputFrom(a, id, 0, 0), { attempt: 1, offset: 0, text: 'Hello', complete: false }, 'the output');
    }),
    check('different text at a written offset is a chunk-conflict; past the end an output-gap naming where to start', async ({ a, exec }) => {
      // Misreading caught: last write wins, or a hole in the text.
      const id = await running(a, exec);
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'Hello' }, 'appended');
      assertError(await exec.output(id, 'draft', { attempt: 1, offset: 0, text: 'Howdy' }), 409, 'chunk-conflict', 'body.text');
      const gap = assertError(await exec.output(id, 'draft', { attempt: 1, offset: 9, text: 'x' }), 409, 'output-gap', 'body.offset');
      assert.match(gap.message, /5$/, 'the gap names the offset expected next');
      // An overlap that agrees appends only what is new.
      assertMatches(await delivered(exec, id, { attempt: 1, offset: 3, text: 'lo, world' }, 'appended'), { offset: 5, expected: 12 }, 'an overlap');
      assertMatches(await outputFrom(a, id, 0, 0), { text: 'Hello, world' }, 'the output');
    }),
    check('output makes no task version', async ({ a, exec }) => {
      // Misreading caught: storing output as history (a version per token).
      const id = await running(a, exec);
      const before = await a.version(id);
      for (let i = 0; i < 5; i++) await delivered(exec, id, { attempt: 1, offset: i, text: 'x' }, 'appended');
      assert.equal(await a.version(id), before, 'the version after five appends');
    }),
    check("a replaced attempt's chunks are fenced off, and the new attempt supersedes its text", async ({ a, exec }) => {
      // Misreading caught: a zombie worker's tokens mixed into the retry's draft.
      const id = await running(a, exec);
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'Old draft' }, 'appended');
      await exec.drive(id, [ev('fail', 1, { error: 'boom', retryable: true }), startOf(2)]);
      assertMatches(await outputFrom(a, id, 1, 9), { attempt: 2, offset: 0, text: '' }, 'a follower of attempt 1 once attempt 2 started');
      assertError(await exec.output(id, 'draft', { attempt: 1, offset: 9, text: '!' }), 409, 'stale-attempt', 'body.attempt');
      assertError(await exec.output(id, 'draft', { attempt: 3, offset: 0, text: '!' }), 409, 'not-started', 'body.attempt');
      assertMatches(await delivered(exec, id, { attempt: 2, offset: 0, text: 'New' }, 'appended'), { superseded: true, attempt: 2 }, 'the new attempt');
      assertMatches(await outputFrom(a, id, 1, 9), { attempt: 2, offset: 0, text: 'New' }, 'the follower of attempt 1');
    }),
    check('the end of the task closes the output: output-closed, complete, a resend still a duplicate', async ({ a, exec }) => {
      // Misreading caught: a follower waiting on a stream that has ended.
      const id = await running(a, exec);
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'Done.' }, 'appended');
      await exec.drive(id, [ev('succeed', 1, { resultRef: 'blob://r', resultHash: 'sha256:r' })]);
      assertError(await exec.output(id, 'draft', { attempt: 1, offset: 5, text: '!' }), 409, 'output-closed', 'body.attempt');
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'Done.' }, 'duplicate-chunk');
      assertMatches(await outputFrom(a, id, 1, 5), { attempt: 1, offset: 5, text: '', complete: true }, 'the output');
    }),
    check('a follower resumes by offset in UTF-16 units, nothing duplicated or lost', async ({ a, exec }) => {
      // Misreading caught: offsets in bytes or code points, or a resume
      // that replays the whole buffer.
      const id = await running(a, exec);
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'naïve 😀' }, 'appended');
      await delivered(exec, id, { attempt: 1, offset: 8, text: ' café' }, 'appended');
      assertMatches(await outputFrom(a, id, 1, 6), { attempt: 1, offset: 6, text: '😀 café' }, 'from 6');
      assertMatches(await outputFrom(a, id, 1, 8), { offset: 8, text: ' café' }, 'from 8');
      assertMatches(await outputFrom(a, id, 1, 13), { offset: 13, text: '' }, 'at the end');
    }),
    check('a held long-poll that asks for output is answered by the next chunk', async ({ a, exec }) => {
      // Misreading caught: output that reaches a follower only with the
      // next task version (or the timeout).
      const id = await running(a, exec);
      const version = await a.version(id);
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'Hello' }, 'appended');
      const held = a.resume(id, { cursor: version, waitMs: 10_000, output: 'draft', outputAttempt: 1, outputOffset: 5 });
      await new Promise((r) => setTimeout(r, 300));
      const sent = Date.now();
      await delivered(exec, id, { attempt: 1, offset: 5, text: ', world' }, 'appended');
      const res = await held;
      assert.ok(Date.now() - sent < 2000, `answered ${Date.now() - sent} ms after the chunk`);
      assertMatches(res.json, { mode: 'caught-up', output: { attempt: 1, offset: 5, text: ', world' } }, 'the held answer');
    }),
    check('a follower that asks for no output gets the very answer it got before', async ({ a, exec }) => {
      // Misreading caught: output pushed to clients that know nothing of it.
      const id = await running(a, exec);
      const before = (await a.resume(id, { cursor: 0 })).text;
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'Hello' }, 'appended');
      assert.equal((await a.resume(id, { cursor: 0 })).text, before, 'the answer without output');
    }),
    check('limits: the stream name, the chunk size, the stream size, the signature', async ({ a, exec }) => {
      // Misreading caught: unbounded output, or one taken unsigned.
      const id = await running(a, exec);
      assertError(await exec.output(id, 'Draft!', { attempt: 1, offset: 0, text: 'x' }), 400, 'invalid-request', 'stream');
      assertError(await exec.output(id, 'draft', { attempt: 1, offset: 0, text: '' }), 400, 'invalid-request', 'body.text');
      assertError(await exec.output(id, 'draft', { attempt: 1, offset: 0, text: 'x'.repeat(65_537) }), 400, 'invalid-request', 'body.text');
      assertError(await exec.output(id, 'draft', { attempt: 1, offset: 1_048_575, text: 'xy' }), 400, 'invalid-request', 'body.offset');
      await delivered(exec, id, { attempt: 1, offset: 0, text: 'x'.repeat(65_536) }, 'appended');
      assertError(await exec.output(id, 'draft', { attempt: 1, offset: 0, text: 'x' }, { pathStream: 'log' }), 401, 'unauthorized');
      const unsigned = await a.http.request('POST', `/v1/tasks/${id}/output/draft`, { json: { taskId: id, stream: 'draft', attempt: 1, offset: 1, text: 'x' }, token: null });
      assert.equal(unsigned.status, 401, 'an unsigned append');
    }),
  ],
};

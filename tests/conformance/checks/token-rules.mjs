// PROTOCOL.md §Credentials, the rules around the token matrix: time at
// the edges of exp, nbf, the skew and the maximum lifetime (tokens minted
// a few seconds either side of each edge, so a backend's rounding to the
// second never decides); a stream that ends with its token; the scope
// claims and their limits; Authorization sent twice.
//
// The skew and the maximum lifetime are the backend's
// (--token-skew-secs, --token-max-lifetime-secs; 30 s and 1 h by default,
// the reference server's). Each check names the misreading it catches.

import assert from 'node:assert/strict';
import { assertError } from '../lib/match.mjs';
import { runningTask } from '../lib/scenarios.mjs';
import { hs256 } from '../lib/tokens.mjs';
import { rawPost } from '../lib/raw.mjs';

/** Seconds either side of an edge: more than a clock's rounding to the second and its drift. */
const MARGIN_S = 5;
/** How late a stream may end after its token stopped being accepted. */
const STREAM_LAG_MS = 3000;

const nowS = () => Math.floor(Date.now() / 1000);

/** A watch token for `tasks` (and `extra` claims) with tenant A's first key. */
function token(ctx, extra) {
  const claims = { sub: 'conformance-user', aud: ctx.config.browserAudience, exp: nowS() + 600, rights: ['watch'], ...extra };
  return hs256(ctx.config.browserKeys[0], claims);
}

/** GET task `id` with `bearer`: 200, or the asserted error. */
async function expectGet(ctx, id, bearer, [status, code], what) {
  const res = await ctx.a.http.request('GET', `/v1/tasks/${id}`, { token: bearer });
  if (status === 200) assert.equal(res.status, 200, `${what}: expected 200, got ${res.status} ${res.text}`);
  else {
    try {
      assertError(res, status, code);
    } catch (err) {
      err.message = `${what}: ${err.message}`;
      throw err;
    }
  }
}

const OK = [200];
const REFUSED = [401, 'unauthorized'];
const EXPIRED = [401, 'token-expired'];

export default {
  section: 'Credentials: token rules',
  protocol: 'Credentials',
  checks: [
    {
      // Misreadings caught: no skew allowed on exp (a token a second past
      // exp refused), or the skew on exp only (nbf exact); and a refusal
      // past the skew that is not token-expired.
      name: 'exp and nbf allow the skew: accepted just inside it, refused just past it (exp: token-expired; nbf: unauthorized)',
      needsBrowserKey: true,
      async run(ctx) {
        const task = await runningTask(ctx);
        const skew = ctx.config.tokenSkewSecs;
        const cases = [
          [`exp ${skew - MARGIN_S} s ago (inside the ${skew} s skew)`, { exp: nowS() - (skew - MARGIN_S) }, OK],
          [`exp ${skew + MARGIN_S} s ago (past the skew)`, { exp: nowS() - (skew + MARGIN_S) }, EXPIRED],
          [`nbf in ${skew - MARGIN_S} s (inside the skew)`, { nbf: nowS() + (skew - MARGIN_S) }, OK],
          [`nbf in ${skew + MARGIN_S} s (past the skew)`, { nbf: nowS() + (skew + MARGIN_S) }, REFUSED],
        ];
        for (const [what, claims, expected] of cases) {
          if (expected === OK && skew < MARGIN_S) continue; // no inside to mint at
          await expectGet(ctx, task.id, token(ctx, { tasks: [task.id], ...claims }), expected, what);
        }
      },
    },
    {
      // Misreading caught: no maximum lifetime (a token valid for a day
      // or a year rides in URLs), or one judged without the skew.
      name: 'the maximum lifetime: an exp up to lifetime + skew ahead is accepted, past it 401 unauthorized (not token-expired)',
      needsBrowserKey: true,
      async run(ctx) {
        const task = await runningTask(ctx);
        const edge = ctx.config.tokenMaxLifetimeSecs + ctx.config.tokenSkewSecs;
        const cases = [
          [`exp in ${edge - MARGIN_S} s (lifetime + skew − ${MARGIN_S} s)`, nowS() + edge - MARGIN_S, OK],
          [`exp in ${edge + MARGIN_S} s (lifetime + skew + ${MARGIN_S} s)`, nowS() + edge + MARGIN_S, REFUSED],
          ['exp in a year', nowS() + 365 * 86_400, REFUSED],
        ];
        for (const [what, exp, expected] of cases) {
          await expectGet(ctx, task.id, token(ctx, { tasks: [task.id], exp }), expected, what);
        }
      },
    },
    {
      // Misreading caught: a stream opened with a browser token stays open
      // after the token stops being accepted (a page keeps a revoked or
      // leaked grant for as long as the connection lives).
      name: 'an SSE stream opened with a browser token ends when the token stops being accepted (exp + skew)',
      needsBrowserKey: true,
      timeoutMs: 20_000,
      async run(ctx) {
        const task = await runningTask(ctx);
        const skew = ctx.config.tokenSkewSecs;
        // Accepted for about 3 s more: exp is (skew − 3) s ago.
        const exp = nowS() - skew + 3;
        const endsAtMs = (exp + skew) * 1000;
        const res = await ctx.a.events(task.id, { token: token(ctx, { tasks: [task.id], exp }) });
        assert.equal(res.status, 200, `events with the token: expected 200, got ${res.status} ${res.text ?? ''}`);
        const stream = res.stream;
        try {
          const first = await stream.next(5000);
          assert.ok(first, 'the stream ended before its first message');
          let end;
          const waitMs = endsAtMs - Date.now() + 1000 + STREAM_LAG_MS;
          try {
            while ((end = await stream.next(Math.max(waitMs, 1000))) !== null) {
              // The task does not change: a message here is only allowed as a re-answer.
            }
          } catch {
            assert.fail(`the stream is still open ${Math.round((Date.now() - endsAtMs) / 1000)} s after its token stopped being accepted (exp + ${skew} s skew)`);
          }
          const endedAt = Date.now();
          assert.ok(endedAt >= endsAtMs - 1000 - MARGIN_S * 1000, `the stream ended ${Math.round((endsAtMs - endedAt) / 1000)} s before its token stopped being accepted`);
        } finally {
          stream.close();
        }
      },
    },
    {
      // Misreadings caught: "one of tasks, batch" read as exactly one (a
      // token with both refused), or a batch claim that hides the tasks.
      name: 'scope: a token with both tasks and batch covers each on its own routes; aud may be a list holding the audience',
      needsBrowserKey: true,
      async run(ctx) {
        const task = await runningTask(ctx);
        const batch = await ctx.a.http.request('POST', '/v1/batches', { json: { items: [{ ttlMs: 3_600_000, maxAttempts: 1 }] } });
        assert.equal(batch.status, 201, `batch create: ${batch.text}`);
        const both = token(ctx, { tasks: [task.id], batch: batch.json.batchId });
        await expectGet(ctx, task.id, both, OK, 'a token with both, on its task');
        const follow = await ctx.a.http.request('GET', `/v1/batches/${batch.json.batchId}/resume?cursor=0`, { token: both });
        assert.equal(follow.status, 200, `a token with both, on its batch: expected 200, got ${follow.status} ${follow.text}`);
        const aud = ctx.config.browserAudience;
        await expectGet(ctx, task.id, token(ctx, { tasks: [task.id], aud: [`not-${aud}`, aud] }), OK, 'aud a list that holds the audience');
        await expectGet(ctx, task.id, token(ctx, { tasks: [task.id], aud: [`not-${aud}`] }), REFUSED, 'aud a list without it');
      },
    },
    {
      // Misreadings caught: no limit on a token's claims (a token naming
      // thousands of tasks, a megabyte of sub as the actor), a 400 for
      // them, or an empty tasks list taken as "every task".
      name: 'claim limits: more than 100 task ids, a sub over 255 bytes, an empty tasks list are 401 unauthorized; 100 ids and 255 bytes pass',
      needsBrowserKey: true,
      async run(ctx) {
        const task = await runningTask(ctx);
        const others = (n) => Array.from({ length: n }, (_, i) => `tsk_other_${i}`);
        const cases = [
          ['100 task ids', { tasks: [task.id, ...others(99)] }, OK],
          ['101 task ids', { tasks: [task.id, ...others(100)] }, REFUSED],
          ['a sub of 255 bytes', { tasks: [task.id], sub: 'é'.repeat(127) + 'x' }, OK],
          ['a sub of 256 bytes', { tasks: [task.id], sub: 'é'.repeat(128) }, REFUSED],
          ['tasks: [] and no batch', { tasks: [] }, REFUSED],
          ['neither tasks nor batch', {}, REFUSED],
        ];
        for (const [what, claims, expected] of cases) {
          await expectGet(ctx, task.id, token(ctx, claims), expected, what);
        }
      },
    },
    {
      // Misreadings caught: the last Authorization header counts, or the
      // two are joined ("Bearer a, Bearer b") into one unknown token.
      name: 'Authorization sent twice: the first counts, later ones are ignored',
      async run(ctx) {
        const task = await runningTask(ctx);
        const path = `/v1/tasks/${task.id}`;
        const send = (first, second) =>
          rawPost(ctx.a.http, path, { method: 'GET', headers: [['authorization', `Bearer ${first}`], ['authorization', `Bearer ${second}`]] });
        const good = await send(ctx.config.token, 'not-a-token');
        assert.equal(good.status, 200, `a good token, then a bad one: expected 200 (the first counts), got ${good.status} ${good.text}`);
        assertError(await send('not-a-token', ctx.config.token), 401, 'unauthorized');
      },
    },
  ],
};

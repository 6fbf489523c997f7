// The token cache of a token function (js/token.js, issue 29): tokens are
// kept per scope, the least recently used dropped past MAX_KEPT scopes,
// so a page that follows task after task for hours does not keep every
// token it was ever given. A dropped scope asks again; a kept one does not.
import { test } from "node:test";
import assert from "node:assert/strict";
import { bearer, MAX_KEPT } from "../../dist/client/token.js";

test("tokens are kept per scope, the least recently used dropped past MAX_KEPT", async () => {
  const asked = [];
  const sent = [];
  const fetchFor = bearer(
    async (url, init) => {
      sent.push(init.headers.authorization);
      return new Response("{}", { status: 200 });
    },
    (scope) => {
      asked.push(scope.tasks[0]);
      return `token-${scope.tasks[0]}-${asked.length}`;
    },
    (value) => new Error(`bad token ${value}`),
  );
  const use = (id) => fetchFor({ tasks: [id] })("http://api.invalid/x", {});
  for (let i = 0; i < MAX_KEPT; i++) await use(`t${i}`);
  assert.equal(asked.length, MAX_KEPT, "one ask per scope");
  await use("t0"); // used again: now the most recent, still kept
  assert.equal(asked.length, MAX_KEPT, "a kept scope is not asked again");
  await use("t-new"); // one scope too many: t1, the least recently used, goes
  assert.equal(asked.length, MAX_KEPT + 1);
  await use("t0");
  assert.equal(asked.length, MAX_KEPT + 1, "t0 was kept");
  await use("t1");
  assert.deepEqual(asked.slice(-1), ["t1"], "t1 was dropped and asks again");
  assert.equal(sent.at(-1), `Bearer token-t1-${MAX_KEPT + 2}`);
});

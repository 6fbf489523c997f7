// taskwire/react on the server (SSR): `renderToString` renders what the
// hooks know (the page's `initial`, `connecting`; `idle` without an id)
// without starting a watch, so no request is held for a page that is
// only rendered to HTML. The watch starts when the browser hydrates
// (tests/js/react.test.mjs covers that part). Also: `useCreateTask`'s
// errors are the client's `TaskwireError`s, a request that cannot be
// sent as JSON included.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createElement } from "react";
import { renderToString } from "react-dom/server";
import { TaskClient, TaskwireError } from "../../dist/client/node.js";
import { useCreateTask, useTask, useTaskBatch } from "../../dist/react.js";

const task = { id: "t1", state: "running", attempts: 1, maxAttempts: 1, progress: 40, version: 3, expiresAtMs: 1e13, kind: "summary" };

test("renderToString renders the hooks' state without starting a watch", () => {
  const started = [];
  const client = {
    watch: (id) => (started.push(id), assert.fail("no watch during SSR")),
    watchBatch: (id) => (started.push(id), assert.fail("no batch watch during SSR")),
  };
  function Row() {
    const { task: shown, status } = useTask(client, "t1", { initial: task });
    const none = useTask(client, null);
    const batch = useTaskBatch(client, "b1", { initial: { batchId: "b1", cursor: 2, tasks: [task] } });
    return createElement("p", null, `${shown?.kind} ${shown?.progress} ${status.state} ${none.status.state} ${batch.tasks.length} ${batch.cursor} ${batch.status.state}`);
  }
  const html = renderToString(createElement(Row));
  assert.equal(html, "<p>summary 40 connecting idle 1 2 connecting</p>");
  assert.deepEqual(started, []);
});

test("useCreateTask's create rejects with the client's TaskwireError, a request JSON cannot carry included", async () => {
  let sent = 0;
  const client = new TaskClient({ baseUrl: "http://backend.test", fetch: async () => (sent++, new Response("{}", { status: 500 })) });
  let create;
  function Form() {
    create = useCreateTask(client).create;
    return null;
  }
  renderToString(createElement(Form));
  const cyclic = { ttlMs: 1000, maxAttempts: 1 };
  cyclic.input = cyclic;
  await assert.rejects(create(cyclic), (e) => e instanceof TaskwireError && e.code === "invalid-request" && /input/.test(e.message));
  assert.equal(sent, 0);
});

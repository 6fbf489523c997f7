// The test page of tests/js/react.test.mjs: the hooks under StrictMode,
// with the page's fetch counted, and controls the test drives through
// `window.page`. `?task=` and `?batch=` name what it follows at first.
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import init, { TaskClient } from "taskwire/client";
import { useCreateTask, useTask, useTaskBatch } from "taskwire/react";

await init();
const params = new URLSearchParams(location.search);

// Every request of the client, counted: the watch requests in flight
// (a long-poll is in flight while the server holds it) per task or
// batch id, each batch request's query, and each create's idempotency
// key and answer.
const inFlight = new Map();
// When the count of watch requests in flight last changed (any id): a
// test waits until it has been quiet for a while, so that the gap between
// an answered request and the next one is seen, however short.
let lastChange = performance.now();
function count(id, by) {
  inFlight.set(id, (inFlight.get(id) ?? 0) + by);
  lastChange = performance.now();
}
const batchRequests = [];
const creates = [];
function countingFetch(url, init) {
  const watched = /\/v1\/(tasks|batches)\/([^/?]+)\/(resume|events)/.exec(url);
  const sent = fetch(url, init);
  if (watched) {
    const id = watched[2];
    if (watched[1] === "batches") batchRequests.push({ id, query: new URL(url).search });
    count(id, 1);
    sent.then(
      () => count(id, -1),
      () => count(id, -1),
    );
  } else if (init?.method === "POST" && /\/v1\/tasks$/.test(url)) {
    const entry = { key: new Headers(init.headers).get("idempotency-key"), id: undefined };
    creates.push(entry);
    sent.then((r) => r.clone().json()).then((t) => (entry.id = t.id), () => {});
  }
  return sent;
}

const client = new TaskClient({
  baseUrl: params.get("api"),
  token: params.get("token"),
  fetch: countingFetch,
  backoff: { initialMs: 100, maxMs: 400 },
});

// What each TaskView committed: [version, status] per render that React
// committed (StrictMode renders twice, commits once).
const commits = [];

function TaskView({ taskId }) {
  const { task, status, error } = useTask(client, taskId);
  useEffect(() => {
    commits.push({ taskId, version: task?.version ?? null, state: task?.state ?? null, status: status.state, error: error?.code ?? null });
  }, [taskId, task, status, error]);
  return (
    <p id="view" data-task={taskId ?? ""} data-version={task?.version ?? ""} data-state={task?.state ?? ""} data-status={status.state}>
      {task ? `${task.state} v${task.version} ${task.progress}%` : status.state}
      {error && ` (${error.code})`}
    </p>
  );
}

// What each BatchView committed: one entry per state object the hook
// returned (StrictMode replays the first commit's effects with the same
// object), and every update its onUpdate heard.
const batchCommits = [];
const committed = new WeakSet();
const batchUpdates = [];

function BatchView({ batchId, initial }) {
  // A new listener on every render: the hook calls the latest without
  // restarting its watch.
  const state = useTaskBatch(client, batchId, { initial, onUpdate: (u) => batchUpdates.push({ batchId, id: u.task.id, version: u.task.version }) });
  const { tasks, progress, cursor, status, error } = state;
  useEffect(() => {
    if (committed.has(state)) return;
    committed.add(state);
    batchCommits.push({ batchId, cursor, status: JSON.stringify(status), error: error?.code ?? null, tasks: tasks.map((t) => ({ id: t.id, version: t.version, state: t.state })) });
  }, [batchId, state]);
  return (
    <section id="batch" data-batch={batchId ?? ""} data-cursor={cursor} data-status={status.state} data-terminal={progress?.terminal ?? ""} data-size={progress?.size ?? ""}>
      <ol>
        {tasks.map((t) => (
          <li key={t.id} data-task={t.id} data-version={t.version} data-state={t.state}>
            {t.state} v{t.version} {t.progress}%
          </li>
        ))}
      </ol>
      {progress && `${progress.terminal}/${progress.size} done, ${Math.round(progress.progress)}%`}
      {error && ` (${error.code})`}
    </section>
  );
}

/** The created task, followed from the create's answer: its kind must outlive the watch's updates (resume answers lack it). */
function CreatedView({ created }) {
  const { task } = useTask(client, created?.id, { initial: created });
  return <output id="created-kind">{task ? `${task.kind}@${task.version}` : ""}</output>;
}

function App() {
  const [shown, setShown] = useState(true);
  const [taskId, setTaskId] = useState(params.get("task") || null);
  const [batch, setBatch] = useState({ id: params.get("batch") || null, initial: undefined });
  const { create, task, pending, error } = useCreateTask(client);
  window.page = {
    show: setShown,
    watch: setTaskId,
    watchBatch: (id) => setBatch({ id, initial: undefined }),
    /** Creates a batch of `n` tasks here and follows it from the create's answer. */
    createBatch: async (n) => {
      const created = await client.createBatch(Array.from({ length: n }, () => ({ ttlMs: 600_000, maxAttempts: 3, kind: "react-test" })));
      setBatch({ id: created.batchId, initial: created });
      return created.batchId;
    },
    inFlight: () => [...inFlight].reduce((sum, [, n]) => sum + n, 0),
    inFlightFor: (id) => inFlight.get(id) ?? 0,
    quietForMs: () => performance.now() - lastChange,
    batchRequests: () => batchRequests,
    creates: () => creates,
    commits: () => commits,
    batchCommits: () => batchCommits,
    batchUpdates: () => batchUpdates,
  };
  return (
    <>
      <button id="create" onClick={() => create({ ttlMs: 600_000, maxAttempts: 3, kind: "react-test" }).catch(() => {})}>
        Create
      </button>
      <output id="created" data-pending={String(pending)}>
        {task?.id ?? ""}
        {error && error.code}
      </output>
      <CreatedView created={task} />
      {shown && <TaskView taskId={taskId} />}
      {shown && <BatchView batchId={batch.id} initial={batch.initial} />}
    </>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);

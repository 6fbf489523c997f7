// The test page of tests/js/react.test.mjs: the hooks under StrictMode,
// with the page's fetch counted, and controls the test drives through
// `window.page`.
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import init, { TaskClient } from "taskwire/client";
import { useCreateTask, useTask } from "taskwire/react";

await init();
const params = new URLSearchParams(location.search);

// Every request of the client, counted: the watch requests in flight
// (a long-poll is in flight while the server holds it) per task, and
// each create's idempotency key and answer.
const inFlight = new Map();
const creates = [];
function countingFetch(url, init) {
  const watched = /\/v1\/tasks\/([^/?]+)\/(resume|events)/.exec(url);
  const sent = fetch(url, init);
  if (watched) {
    const id = watched[1];
    inFlight.set(id, (inFlight.get(id) ?? 0) + 1);
    sent.then(
      () => inFlight.set(id, inFlight.get(id) - 1),
      () => inFlight.set(id, inFlight.get(id) - 1),
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

function App() {
  const [shown, setShown] = useState(true);
  const [taskId, setTaskId] = useState(params.get("task") || null);
  const { create, task, pending, error } = useCreateTask(client);
  window.page = {
    show: setShown,
    watch: setTaskId,
    inFlight: () => [...inFlight].reduce((sum, [, n]) => sum + n, 0),
    inFlightFor: (id) => inFlight.get(id) ?? 0,
    creates: () => creates,
    commits: () => commits,
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
      {shown && <TaskView taskId={taskId} />}
    </>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);

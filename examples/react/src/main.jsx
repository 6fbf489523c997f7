// taskwire's React hooks against the reference server: create a task
// (useCreateTask: a double click makes one) or start the server's demo
// workload, and follow it (useTask) through disconnects to its end; the
// same for a batch (useTaskBatch, in batch.jsx).
import { StrictMode, useState } from "react";
import { createRoot } from "react-dom/client";
import init, { TaskClient } from "taskwire/client";
import { useCreateTask, useTask } from "taskwire/react";
import { Batches } from "./batch.jsx";

await init();
// Same origin: the dev server (vite.config.js) passes /v1 on with the token.
const client = new TaskClient({ baseUrl: location.origin });

/** The server's demo workload (`--demo`): a summary that runs to `succeeded` in ~6 s. */
async function startDemoSummary() {
  const r = await fetch("/v1/demo/workloads/summary", { method: "POST", body: JSON.stringify({ approval: false, speed: 4 }) });
  if (!r.ok) throw new Error(`the demo workload: HTTP ${r.status} (is the server running with --demo?)`);
  return (await r.json()).taskIds[0];
}

function TaskView({ taskId, created }) {
  // `initial`: the task just created is shown at once (a watch reports
  // a task only when it changes).
  const { task, status, error } = useTask(client, taskId, { initial: created });
  if (error) return <p>Cannot follow {taskId}: {error.code}</p>;
  if (!task) return <p>{taskId}: {status.state}…</p>;
  const live = !["succeeded", "failed", "expired", "cancelled", "timed_out"].includes(task.state);
  return (
    <section>
      <p>
        <code>{task.id}</code> v{task.version}: <strong>{task.state}</strong> ({status.state})
      </p>
      <progress value={task.progress} max={100} style={{ width: "100%" }} />
      {live && <button onClick={() => client.cancel(task.id).catch(console.error)}>Cancel</button>}
    </section>
  );
}

function App() {
  const [taskId, setTaskId] = useState(null);
  const [problem, setProblem] = useState(null);
  const { create, task: created, pending, error } = useCreateTask(client);
  const submit = async () => {
    const task = await create({ ttlMs: 600_000, maxAttempts: 3, kind: "react-example" });
    setTaskId(task.id);
  };
  return (
    <main>
      <h1>taskwire + React</h1>
      <p>
        <button disabled={pending} onClick={() => submit().catch(() => {})}>Create a task</button>{" "}
        <button onClick={() => startDemoSummary().then(setTaskId, setProblem)}>Run the demo summary</button>
      </p>
      <p><small>A created task stays queued (no executor runs it here): use Cancel. The demo summary has the server's own executor.</small></p>
      {error && <p>Create failed: {error.code ?? error.message}</p>}
      {problem && <p>{problem.message}</p>}
      {taskId && <TaskView taskId={taskId} created={created} />}
      <Batches client={client} />
    </main>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);

// The example's batch part: create a batch (or start the server's demo
// batch) and follow all of its tasks with useTaskBatch, over one held
// request, re-rendered once per answer rather than once per task.
import { useState } from "react";
import { useTaskBatch } from "taskwire/react";

const TERMINAL = ["succeeded", "failed", "expired", "cancelled", "timed_out"];

/** The server's demo batch (`--demo`): moderation items its own workers play, to the end. */
async function startDemoBatch(items) {
  const r = await fetch("/v1/demo/workloads/batch", { method: "POST", body: JSON.stringify({ items, speed: 4 }) });
  if (!r.ok) throw new Error(`the demo batch: HTTP ${r.status} (is the server running with --demo?)`);
  return (await r.json()).batchId;
}

function BatchView({ client, batchId, created }) {
  // `initial`: the batch just created is shown at once, and followed by
  // delta from its cursor rather than from a snapshot.
  const { tasks, progress, status, error } = useTaskBatch(client, batchId, { initial: created });
  if (error) return <p>Cannot follow {batchId}: {error.code}</p>;
  return (
    <section>
      <p>
        Batch <code>{batchId}</code> ({status.state}):{" "}
        {progress ? `${progress.terminal} of ${progress.size} done, ${Math.round(progress.progress)}%` : "…"}
      </p>
      <progress value={progress?.progress ?? 0} max={100} style={{ width: "100%" }} />
      <table>
        <tbody>
          {tasks.map((task, i) => (
            <tr key={task.id}>
              <td>{i + 1}</td>
              <td><code>{task.id}</code></td>
              <td><strong>{task.state}</strong></td>
              <td><progress value={task.progress} max={100} /></td>
              <td>{!TERMINAL.includes(task.state) && <button onClick={() => client.cancel(task.id).catch(console.error)}>Cancel</button>}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** Creates a batch of three tasks (one idempotency key per click) or starts the demo batch, and follows it. */
export function Batches({ client }) {
  const [followed, setFollowed] = useState({ batchId: null, created: undefined });
  const [pending, setPending] = useState(false);
  const [problem, setProblem] = useState(null);
  const create = async () => {
    setPending(true);
    setProblem(null);
    try {
      const items = Array.from({ length: 3 }, (_, i) => ({ ttlMs: 600_000, maxAttempts: 3, kind: "react-example", input: { item: i } }));
      const created = await client.createBatch(items, { idempotencyKey: crypto.randomUUID() });
      setFollowed({ batchId: created.batchId, created });
    } catch (e) {
      setProblem(e);
    } finally {
      setPending(false);
    }
  };
  const runDemo = () => startDemoBatch(12).then((batchId) => setFollowed({ batchId, created: undefined }), setProblem);
  return (
    <>
      <h2>A batch</h2>
      <p>
        <button disabled={pending} onClick={create}>Create a batch of 3</button>{" "}
        <button onClick={runDemo}>Run the demo batch (12 items)</button>
      </p>
      <p><small>A created batch stays queued (no executor runs it here): cancel its tasks. The demo batch has the server's own workers.</small></p>
      {problem && <p>{problem.code ?? problem.message}</p>}
      {followed.batchId && <BatchView client={client} batchId={followed.batchId} created={followed.created} />}
    </>
  );
}

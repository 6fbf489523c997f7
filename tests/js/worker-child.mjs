// A worker in a process of its own, for worker-crash.test.mjs to kill
// with SIGKILL mid-step: it claims one task of TASKWIRE_KIND, reports a
// progress, prints `{"claimed": id, "attempt": n}` and then works
// forever (its heartbeats keep the lease alive until it dies).
import { createWorker } from "../../js/worker.js";

const worker = createWorker({
  url: process.env.TASKWIRE_URL,
  tenant: process.env.TASKWIRE_TENANT,
  secret: process.env.TASKWIRE_SECRET,
  leaseMs: Number(process.env.TASKWIRE_LEASE_MS),
  waitMs: 1000,
});
worker.handle(process.env.TASKWIRE_KIND, async (job) => {
  await job.progress(10, "step-1");
  process.stdout.write(JSON.stringify({ claimed: job.id, attempt: job.attempt }) + "\n");
  await new Promise(() => {});
});
await worker.run();

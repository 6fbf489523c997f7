"""An 8-step document summary, run as taskwire jobs of kind "summary".

    TASKWIRE_URL=http://127.0.0.1:8080 TASKWIRE_TENANT=demo \
    TASKWIRE_SECRET=whsec_... python examples/summary_worker.py

Input: {"doc": "...", "approval": true}. With "approval", the draft waits
for a person (hold) and the next attempt reads the decision. SIGTERM or
Ctrl-C shuts down gracefully: an unfinished summary goes back to the queue.
"""

import asyncio
import hashlib
import os
import signal

from taskwire_worker import Job, Result, Worker

STEPS = ["load", "split", "clean", "outline", "summarize", "draft", "review", "publish"]
STEP_MS = int(os.environ.get("TASKWIRE_STEP_MS", "400"))

worker = Worker(
    url=os.environ["TASKWIRE_URL"],
    tenant=os.environ["TASKWIRE_TENANT"],
    secret=os.environ["TASKWIRE_SECRET"],
    lease_ms=int(os.environ.get("TASKWIRE_LEASE_MS", "30000")),
    concurrency=int(os.environ.get("TASKWIRE_CONCURRENCY", "1")),
)


@worker.job("summary")
async def summary(job: Job) -> Result:
    doc = str((job.input or {}).get("doc", ""))
    wants_approval = bool((job.input or {}).get("approval"))
    decision = job.task.get("decision")  # set when a person decided on our hold
    draft = " ".join(doc.split()[:12])
    for number, step in enumerate(STEPS, start=1):
        job.check()  # before the tool call: a cancel stops here
        await asyncio.sleep(STEP_MS / 1000)  # the tool call (a model, a fetch...)
        if step == "draft" and decision == "request_changes":
            draft = f"{draft} ({job.task.get('decisionReason', 'revised')})"
        if step == "review" and wants_approval and decision is None:
            digest = "sha256:" + hashlib.sha256(draft.encode()).hexdigest()
            await job.hold(f"mem://drafts/{job.id}", digest, "Publish this summary?")
        if step == "publish":
            # An external write: the key is the same in every attempt, so a
            # store with a unique key makes a repeated publish a no-op.
            print(f"publish {job.key(step, 'write')}: {draft!r}", flush=True)
        job.check()  # after the tool call
        await job.progress(round(100 * number / len(STEPS)), cursor=step)
    digest = "sha256:" + hashlib.sha256(draft.encode()).hexdigest()
    return Result(result_ref=f"mem://summaries/{job.id}", result_hash=digest)


async def main() -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(worker.shutdown(10_000)))
    print(f"worker {worker.name} ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())

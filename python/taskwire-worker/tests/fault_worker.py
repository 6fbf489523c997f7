"""A worker process for the fault tests: the test starts it, pauses it
(SIGSTOP), kills it (SIGKILL) and reads what it did from a JSON-lines file.

Configured by the environment (faults_support.WorkerProc sets it):

- FW_URL, FW_TENANT, FW_SECRET, FW_TOKEN: the server, and the tenant token
  (used only to read the task back after each step, as a check).
- FW_NAME: the worker's name; its notes go to FW_DIR/<name>.jsonl.
- FW_DIR: the test's directory; the fake external system is
  FW_DIR/external.sqlite3, the upstream input FW_DIR/upstream.txt.
- FW_LEASE_MS, FW_WAIT_MS, FW_SKEW_MS (the local clock's error).
- FW_PAUSE: comma-separated `point:step:attempt` where the process stops
  dead (its whole event loop, heartbeats included) after noting `paused`,
  until the file FW_DIR/go-<name> exists. Points: `in-call` (the model
  call ran, its reservation is open), `after-spend` (the call settled, the
  step not yet reported succeeded), `before-effect`, `after-write` (the
  external write returned, its record not yet sent).
- FW_SLOW: steps whose model call takes 30 s (a call to cancel midway).
- FW_CALL_MS: how long each model call takes (default 0).
- FW_NEW_STEP: "new code" of the `approval` kind, whose plan has one more
  step of that name, run after the approval and before `publish`.
- FW_VERSIONS: comma-separated workflow versions the worker runs (its
  claims leave tasks planned for others); unset: any.

Kinds: `pipeline` (every step of the task's plan is a model call through
`job.spend`; `notify` and `publish` also make an external write through
`job.effect`; an `OverBudget` ends the task with `budget_exhausted`), and
`approval` (a `draft` step, a hold on the upstream input's hash until a
person approves, then a `publish` step).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import fake_external
import httpx

from taskwire_worker import (
    Amount,
    Exhausted,
    Job,
    OverBudget,
    Result,
    StepOutput,
    Usage,
    Worker,
    budget_exhausted,
)

ENV = os.environ
NAME = ENV["FW_NAME"]
DIR = Path(ENV["FW_DIR"])
EXTERNAL = DIR / "external.sqlite3"
PAUSES = {p for p in ENV.get("FW_PAUSE", "").split(",") if p}
SLOW = {s for s in ENV.get("FW_SLOW", "").split(",") if s}
CALL_MS = int(ENV.get("FW_CALL_MS", "0"))
NEW_STEP = ENV.get("FW_NEW_STEP", "")
SKEW_MS = float(ENV.get("FW_SKEW_MS", "0"))
EFFECT_STEPS = {"notify", "publish"}
# Each call reserves 150 tokens and uses 100: a dead attempt's open
# reservation, charged in full, shows as 150.
ESTIMATE = Amount(tokens=150, cost_cents=3)
USED = Usage(tokens=100, cost_cents=2, tool_calls=1)


def note(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "pid": os.getpid(), **fields})
    with (DIR / f"{NAME}.jsonl").open("a") as out:
        out.write(line + "\n")


def pause(point: str, step: str, attempt: int) -> None:
    """Stops the process dead (no await: heartbeats stop too) until released."""
    if f"{point}:{step}:{attempt}" not in PAUSES:
        return
    note("paused", point=point, step=step, attempt=attempt)
    go = DIR / f"go-{NAME}"
    while not go.exists():
        time.sleep(0.01)
    note("resumed", point=point, step=step, attempt=attempt)


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


async def model_call(job: Job, step: str) -> str:
    """One paid call of `step`, within the task's budget."""

    async def call() -> tuple[str, Usage]:
        note("call", step=step, attempt=job.attempt)
        if step in SLOW:
            note("calling", step=step, attempt=job.attempt)
            await asyncio.sleep(30)
        await asyncio.sleep(CALL_MS / 1000)
        pause("in-call", step, job.attempt)
        return f"{step} by attempt {job.attempt}", USED

    value = await job.spend(step, ESTIMATE, call, step=step)
    note("spent", step=step, attempt=job.attempt)
    pause("after-spend", step, job.attempt)
    return value


async def external_write(job: Job, step: str, payload: str) -> str:
    async def write(key: str) -> str:
        resource = fake_external.write(EXTERNAL, key, payload, f"{NAME}@{job.attempt}")
        note("wrote", step=step, attempt=job.attempt, key=key, resource=resource)
        pause("after-write", step, job.attempt)
        return resource

    pause("before-effect", step, job.attempt)
    try:
        resource = await job.effect(step, "post", write)
    except BaseException as e:
        note("effect-refused", step=step, attempt=job.attempt, error=repr(e))
        raise
    note("effect", step=step, attempt=job.attempt, resource=resource)
    return resource


async def read_back(job: Job, step: str) -> None:
    """The task as the server has it after a step (a check for the test)."""
    token = ENV.get("FW_TOKEN")
    if not token:
        return
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {token}"}) as client:
        task = (await client.get(f"{ENV['FW_URL']}/v1/tasks/{job.id}")).json()
    note(
        "after-step",
        step=step,
        attempt=job.attempt,
        budget=task.get("budget"),
        used=task.get("used"),
        reserved=task.get("reserved"),
    )


async def pipeline(job: Job) -> Result | Exhausted:
    note("claimed", attempt=job.attempt, now_ms=job.now_ms(), local_ms=time.time() * 1000)
    last: Result | None = None
    for step in [s["name"] for s in job.task["steps"]]:

        async def run(step: str = step) -> StepOutput:
            value = await model_call(job, step)
            if step in EFFECT_STEPS:
                await external_write(job, step, f"{step} of {job.id}")
            return StepOutput(f"mem://{job.id}/{step}@{job.attempt}", digest(value))

        try:
            done = await job.step(step, run)
        except OverBudget as e:
            note("over-budget", step=step, attempt=job.attempt, reason=e.reason)
            return budget_exhausted(last)
        last = Result(done.output_ref, done.output_hash)
        await read_back(job, step)
    note("done", attempt=job.attempt, now_ms=job.now_ms(), local_ms=time.time() * 1000)
    return Result(f"mem://{job.id}/report@{job.attempt}", digest(f"report {job.attempt}"))


async def approval(job: Job) -> Result:
    decision = job.task.get("decision")
    note("claimed", attempt=job.attempt, decision=decision, plan=job.task.get("workflowVersion"))

    async def draft() -> StepOutput:
        value = await model_call(job, "draft")
        return StepOutput(f"mem://{job.id}/draft", digest(value))

    await job.step("draft", draft)
    if decision != "approve":
        upstream = DIR / "upstream.txt"
        source = upstream.read_text() if upstream.exists() else "input v1"
        artifact = digest(source)
        note("hold", attempt=job.attempt, artifact=artifact, source=source)
        await job.hold(f"mem://{job.id}/artifact/{artifact}", artifact, "Publish this?")
    approved = str(job.task["artifactHash"])
    if NEW_STEP:

        async def new_step() -> StepOutput:
            note("new-step", attempt=job.attempt)
            return StepOutput(f"mem://{job.id}/{NEW_STEP}", digest(NEW_STEP))

        await job.step(NEW_STEP, new_step)

    async def publish() -> StepOutput:
        resource = await external_write(job, "publish", approved)
        return StepOutput(f"mem://{job.id}/published/{resource}", approved)

    await job.step("publish", publish)
    note("done", attempt=job.attempt, artifact=approved)
    return Result(f"mem://{job.id}/report@{job.attempt}", approved)


async def main() -> None:
    # The library's own account (its last report and the answer) goes to the log.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker = Worker(
        url=ENV["FW_URL"],
        tenant=ENV["FW_TENANT"],
        secret=ENV["FW_SECRET"],
        name=NAME,
        lease_ms=int(ENV.get("FW_LEASE_MS", "1000")),
        wait_ms=int(ENV.get("FW_WAIT_MS", "500")),
        now=lambda: time.time() * 1000 + SKEW_MS,
        workflow_versions=[v for v in ENV.get("FW_VERSIONS", "").split(",") if v],
    )
    worker.handle("pipeline", pipeline)
    worker.handle("approval", approval)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(worker.shutdown(0)))
    note("ready")
    await worker.run()
    note("exited", offset_ms=worker.clock.offset_ms)


if __name__ == "__main__":
    asyncio.run(main())

"""What the step tests share: a three-step plan, step outputs, and the
task's steps read back as (name, status, attempt)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from taskwire_worker import Job, StepOutput, Usage

STEPS = ["load", "classify", "publish"]
PLAN = {"workflowVersion": "2026-09-17.1", "steps": STEPS}


def output_of(job: Job, name: str, usage: Usage | None = None) -> StepOutput:
    return StepOutput(f"blob://{job.id}/{name}", f"sha256:{name}", usage=usage)


def ready(output: StepOutput) -> Callable[[], Awaitable[StepOutput]]:
    async def run() -> StepOutput:
        return output

    return run


def never(ran: list[str], name: str) -> Callable[[], Awaitable[StepOutput]]:
    """A step that must not run: records that it did, and fails."""

    async def run() -> StepOutput:
        ran.append(name)
        raise AssertionError(f"step {name} ran")

    return run


def steps_of(task: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(s["name"], s["status"], s.get("attempt")) for s in task["steps"]]

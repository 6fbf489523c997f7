"""Step reports the server refuses reach the handler as a `StepError`
(final), before the step runs; a bad step output names its field."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from conftest import Server, running
from step_helpers import PLAN, never, output_of, ready, steps_of

from taskwire_worker import ConfigError, Job, Result, StepError, StepOutput, Usage


async def test_an_unknown_step_name_raises_step_error_and_runs_nothing(server: Server) -> None:
    task = await server.create("pack", **PLAN)
    errors: list[StepError] = []
    ran: list[str] = []
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        await job.step("load", ready(output_of(job, "load")))
        try:
            await job.step("extract", never(ran, "extract"))
        except StepError as e:
            errors.append(e)
            raise
        raise AssertionError("unreachable")

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert [(e.step, e.reason) for e in errors] == [("extract", "unknown-step")]
    assert ran == []
    assert done["attempts"] == 1, "a StepError is final"
    assert done["error"] == (
        "StepError: step 'extract': unknown-step: the task's plan has no step of that name"
    )
    assert steps_of(done) == [
        ("load", "succeeded", 1),
        ("classify", "pending", None),
        ("publish", "pending", None),
    ]


async def test_a_step_of_a_task_without_a_plan_raises_step_error_no_plan(server: Server) -> None:
    task = await server.create("pack")
    errors: list[StepError] = []
    ran: list[str] = []
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        try:
            await job.step("load", never(ran, "load"))
        except StepError as e:
            errors.append(e)
            raise
        raise AssertionError("unreachable")

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert [(e.step, e.reason) for e in errors] == [("load", "no-plan")]
    assert ran == []
    assert "steps" not in done
    assert done["error"].startswith("StepError: step 'load': no-plan: ")


async def test_a_step_skipped_meanwhile_is_a_step_conflict_and_is_not_run(server: Server) -> None:
    task = await server.create("pack", **PLAN)
    claimed, go_on = asyncio.Event(), asyncio.Event()
    seen: dict[str, Any] = {}
    ran: list[str] = []
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        claimed.set()
        await go_on.wait()
        # The claim said pending: only the server's answer says otherwise.
        seen["done"] = job.step_done("classify")
        try:
            await job.step("classify", never(ran, "classify"))
        except StepError as e:
            seen["error"] = (e.step, e.reason)
            raise
        raise AssertionError("unreachable")

    async with running(worker):
        await asyncio.wait_for(claimed.wait(), 30)
        skip = {
            "type": "step",
            "atMs": round(time.time() * 1000),
            "name": "classify",
            "status": "skipped",
            "attempt": 1,
        }
        resp = await server.signed_report(task["id"], skip)
        assert resp.status_code == 200, resp.text
        assert resp.json()["reason"] == "step-recorded"
        go_on.set()
        done = await server.wait_state(task["id"], "failed")
    assert seen == {"done": False, "error": ("classify", "step-conflict")}
    assert ran == []
    assert done["steps"][1]["status"] == "skipped"
    assert done["error"].startswith("StepError: step 'classify': step-conflict: ")


def test_step_outputs_and_usage_name_the_bad_field() -> None:
    with pytest.raises(ConfigError, match=r"^output_ref: must be a non-blank string, got ' '$"):
        StepOutput(" ", "sha256:x")
    with pytest.raises(ConfigError, match=r"^output_hash: must be a non-blank string"):
        StepOutput("blob://x", "")
    with pytest.raises(ConfigError, match=r"^tokens: must be from 0 to 9007199254740991, got -1$"):
        Usage(tokens=-1)
    with pytest.raises(ConfigError, match=r"^cost_cents: must be an integer, got 2.5$"):
        Usage(cost_cents=2.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^tool_calls: must be an integer, got True$"):
        Usage(tool_calls=True)
    assert Usage(tokens=5).to_wire() == {"tokens": 5, "costCents": 0, "toolCalls": 0}

"""Steps with checkpoints (PROTOCOL.md §Steps) from a Python worker
against the real server: each step runs once across attempts, a new
attempt starts from the earlier ones' checkpoints, a failing or cancelled
step is reported failed. The refusals are in test_step_errors.py."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from conftest import Server, running
from step_helpers import PLAN, STEPS, never, output_of, ready, steps_of

from taskwire_worker import Checkpoint, Job, Result, RetryableError, StepOutput, Usage


async def test_three_steps_each_run_once_and_the_task_shows_their_checkpoints(
    server: Server,
) -> None:
    task = await server.create("pack", **PLAN)
    runs: Counter[str] = Counter()
    ran_twice: list[str] = []
    after_load = asyncio.Event()
    seen: dict[str, Any] = {}
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        hashes = []
        for i, name in enumerate(STEPS, start=1):

            async def run(name: str = name) -> StepOutput:
                runs[name] += 1
                usage = Usage(tokens=812, cost_cents=3, tool_calls=1) if name == "publish" else None
                return output_of(job, name, usage)

            checkpoint = await job.step(name, run, label=f"{i}/3: {name}")
            hashes.append(checkpoint.output_hash)
            if name == "load":
                await after_load.wait()
        # Finished in this attempt: not run again, the same checkpoint.
        seen["again"] = await job.step("load", never(ran_twice, "load"))
        seen["checkpoint"] = job.step_checkpoint("classify")
        seen["done"] = [job.step_done(name) for name in [*STEPS, "nope"]]
        # Without a name, the awaited cancel check it always was.
        seen["checked"] = await job.checkpoint()
        return Result(result_ref=f"blob://{job.id}", result_hash=",".join(hashes))

    async with running(worker):
        mid = await server.wait_for(
            task["id"], lambda t: t["steps"][0]["status"] == "succeeded", "load succeeded"
        )
        # Progress follows the finished steps: one of three.
        assert mid["progress"] == 33
        assert steps_of(mid) == [
            ("load", "succeeded", 1),
            ("classify", "pending", None),
            ("publish", "pending", None),
        ]
        after_load.set()
        done = await server.wait_state(task["id"], "succeeded")
    assert runs == {"load": 1, "classify": 1, "publish": 1}
    assert ran_twice == []
    assert done["resultHash"] == "sha256:load,sha256:classify,sha256:publish"
    assert steps_of(done) == [(name, "succeeded", 1) for name in STEPS]
    for i, (step, name) in enumerate(zip(done["steps"], STEPS, strict=True), start=1):
        assert step["outputRef"] == f"blob://{task['id']}/{name}"
        assert step["outputHash"] == f"sha256:{name}"
        assert step["label"] == f"{i}/3: {name}"
    assert "usage" not in done["steps"][0]
    assert done["steps"][2]["usage"] == {"tokens": 812, "costCents": 3, "toolCalls": 1}
    assert seen["again"] == Checkpoint(f"blob://{task['id']}/load", "sha256:load")
    assert seen["checkpoint"] == Checkpoint(f"blob://{task['id']}/classify", "sha256:classify")
    assert seen["done"] == [True, True, True, False]
    assert seen["checked"] is None


async def test_a_retried_attempt_skips_the_finished_step_and_starts_from_its_checkpoint(
    server: Server,
) -> None:
    task = await server.create("pack", **PLAN)
    runs: Counter[tuple[int, str]] = Counter()
    claimed: dict[int, Any] = {}
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        claimed[job.attempt] = (
            job.step_checkpoint("load"),
            job.step_checkpoint("classify"),
            [job.step_done(name) for name in STEPS],
        )
        hashes = []
        for name in STEPS:

            async def run(name: str = name) -> StepOutput:
                runs[job.attempt, name] += 1
                return output_of(job, name)

            hashes.append((await job.step(name, run)).output_hash)
            if job.attempt == 1:
                # Attempt 1 dies after its first step.
                raise RetryableError("worker lost its vendor session")
        return Result(result_ref=f"blob://{job.id}", result_hash=",".join(hashes))

    async with running(worker):
        done = await server.wait_state(task["id"], "succeeded")
    assert done["attempts"] == 2
    assert runs == {(1, "load"): 1, (2, "classify"): 1, (2, "publish"): 1}
    # Attempt 2 used attempt 1's checkpoint for the step it skipped.
    assert done["resultHash"] == "sha256:load,sha256:classify,sha256:publish"
    assert steps_of(done) == [
        ("load", "succeeded", 1),
        ("classify", "succeeded", 2),
        ("publish", "succeeded", 2),
    ]
    assert claimed[1] == (None, None, [False, False, False])
    load = Checkpoint(f"blob://{task['id']}/load", "sha256:load")
    assert claimed[2] == (load, None, [True, False, False])


async def test_a_step_whose_run_raises_is_reported_failed_and_the_error_is_re_raised_as_is(
    server: Server,
) -> None:
    task = await server.create("pack", **PLAN)
    raised: list[BaseException] = []
    caught: list[BaseException] = []
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        await job.step("load", ready(output_of(job, "load")))

        async def classify() -> StepOutput:
            error = ValueError("the classifier's answer is not JSON")
            raised.append(error)
            raise error

        try:
            await job.step("classify", classify, label="2/3: classifying")
        except ValueError as e:
            caught.append(e)
            raise
        raise AssertionError("unreachable")

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert len(caught) == 1
    assert caught[0] is raised[0]
    # A ValueError is final: one attempt, the error as the handler raised it.
    assert done["attempts"] == 1
    assert done["error"] == "ValueError: the classifier's answer is not JSON"
    assert steps_of(done) == [
        ("load", "succeeded", 1),
        ("classify", "failed", 1),
        ("publish", "pending", None),
    ]
    assert done["steps"][1]["label"] == "2/3: classifying"
    assert "outputRef" not in done["steps"][1]


async def test_a_cancel_stops_a_running_step_which_is_reported_failed(server: Server) -> None:
    task = await server.create("pack", **PLAN)
    started = asyncio.Event()
    seen: dict[str, Any] = {}
    # A 3 s lease: a heartbeat every second carries the cancel to the job.
    worker = server.worker(lease_ms=3000)

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        async def load() -> StepOutput:
            started.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        try:
            await job.step("load", load)
        except asyncio.CancelledError:
            seen["why"] = job.cancelled
            raise
        raise AssertionError("unreachable")

    async with running(worker):
        await asyncio.wait_for(started.wait(), 30)
        await server.wait_for(
            task["id"], lambda t: t["steps"][0]["status"] == "running", "load running"
        )
        await server.cancel(task["id"])
        done = await server.wait_state(task["id"], "cancelled")
    assert seen == {"why": "cancel"}
    assert steps_of(done)[0] == ("load", "failed", 1)


async def test_a_cancel_answered_to_a_succeeded_step_keeps_its_checkpoint_for_cannot_cancel(
    server: Server,
) -> None:
    task = await server.create("pack", **PLAN)
    started, go_on = asyncio.Event(), asyncio.Event()
    seen: dict[str, Any] = {}
    ran: list[str] = []
    # The default 30 s lease: no heartbeat comes before the step's report,
    # so that report's answer is what carries the cancel.
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        async def load() -> StepOutput:
            started.set()
            await go_on.wait()
            return output_of(job, "load")

        try:
            await job.step("load", load)
            raise AssertionError("the cancel was not raised")
        except asyncio.CancelledError:
            seen["why"] = job.cancelled
            # The external write is done: the job goes on, the step is not
            # run again, and its checkpoint is there.
            await job.cannot_cancel("loaded already")
        seen["again"] = await job.step("load", never(ran, "load"))
        return Result(result_ref=f"blob://{job.id}", result_hash="sha256:kept")

    async with running(worker):
        await asyncio.wait_for(started.wait(), 30)
        await server.cancel(task["id"])
        go_on.set()
        done = await server.wait_state(task["id"], "cancelled")
    assert seen == {
        "why": "cancel",
        "again": Checkpoint(f"blob://{task['id']}/load", "sha256:load"),
    }
    assert ran == []
    assert steps_of(done)[0] == ("load", "succeeded", 1)


async def test_a_replaced_attempt_is_stopped_at_its_step_report_and_runs_nothing(
    server: Server,
) -> None:
    task = await server.create("pack", **PLAN)
    claimed, go_on = asyncio.Event(), asyncio.Event()
    runs: Counter[tuple[int, str]] = Counter()
    stopped: dict[int, str | None] = {}
    worker = server.worker()

    @worker.job("pack")
    async def pack(job: Job) -> Result:
        if job.attempt == 1:
            claimed.set()
            await go_on.wait()
        hashes = []
        for name in STEPS:

            async def run(name: str = name) -> StepOutput:
                runs[job.attempt, name] += 1
                return output_of(job, name)

            try:
                hashes.append((await job.step(name, run)).output_hash)
            except asyncio.CancelledError:
                stopped[job.attempt] = job.cancelled
                raise
        return Result(result_ref=f"blob://{job.id}", result_hash=",".join(hashes))

    async with running(worker):
        await asyncio.wait_for(claimed.wait(), 30)
        # Attempt 1 ends while its job waits (as a lost worker's would): the
        # task is queued again, and the job's next report hears `stop`.
        fail = {
            "type": "fail",
            "atMs": round(time.time() * 1000),
            "error": "ended by the test",
            "retryable": True,
            "attempt": 1,
        }
        resp = await server.signed_report(task["id"], fail)
        assert resp.status_code == 200, resp.text
        assert resp.json()["reason"] == "requeued"
        go_on.set()
        done = await server.wait_state(task["id"], "succeeded")
    assert stopped == {1: "stop"}
    assert runs == {(2, "load"): 1, (2, "classify"): 1, (2, "publish"): 1}
    assert steps_of(done) == [(name, "succeeded", 2) for name in STEPS]

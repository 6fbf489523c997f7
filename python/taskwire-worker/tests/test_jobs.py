"""A job's life against the real server: progress, result, cancel, errors, hold."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import Server, running

from taskwire_worker import FatalError, Job, ReportError, Result, RetryableError, Worker


async def test_claimed_job_reports_progress_and_success_that_the_page_sees(server: Server) -> None:
    task = await server.create(input={"doc": "hello"})
    go_on = asyncio.Event()
    seen: dict[str, Any] = {}
    worker = server.worker(name="py-1")

    @worker.job("summary")
    async def summary(job: Job) -> Result:
        seen.update(id=job.id, attempt=job.attempt, input=job.input, kind=job.kind)
        await job.progress(30, cursor="step-3")
        await go_on.wait()
        return Result(result_ref=f"mem://{job.id}", result_hash="sha256:01")

    async with running(worker):
        mid = await server.wait_for(task["id"], lambda t: t["progress"] == 30, "at 30 %")
        assert mid["state"] == "running"
        assert mid["attempts"] == 1
        go_on.set()
        done = await server.wait_state(task["id"], "succeeded")
    assert seen == {"id": task["id"], "attempt": 1, "input": {"doc": "hello"}, "kind": "summary"}
    assert done["resultRef"] == f"mem://{task['id']}"
    assert done["resultHash"] == "sha256:01"
    assert done["progress"] == 100


async def test_cancel_reaches_a_running_job_through_a_heartbeat_and_is_acknowledged(
    server: Server,
) -> None:
    task = await server.create()
    started = asyncio.Event()
    seen: dict[str, Any] = {}
    # A 3 s lease: a heartbeat every second; the job itself never reports,
    # so only a heartbeat's answer can carry the cancel to it.
    worker = server.worker(lease_ms=3000)

    @worker.job("summary")
    async def forever(job: Job) -> Result:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen["why"] = job.cancelled
            raise
        raise AssertionError("unreachable")

    async with running(worker):
        await asyncio.wait_for(started.wait(), 30)
        answer = await server.cancel(task["id"])
        assert answer["task"]["state"] == "cancelling"
        done = await server.wait_state(task["id"], "cancelled")
    assert seen == {"why": "cancel"}
    assert done["attempts"] == 1
    history = await server.history(task["id"])
    assert [e["event"]["type"] for e in history["events"]][-1] == "ack_cancel"


async def test_retryable_error_requeues_and_final_error_fails_with_attempts_left(
    server: Server,
) -> None:
    task = await server.create(maxAttempts=3)
    attempts: list[tuple[int, Any]] = []
    worker = server.worker()

    @worker.job("summary")
    async def flaky(job: Job) -> Result:
        attempts.append((job.attempt, job.task.get("error")))
        if job.attempt == 1:
            raise RetryableError("vendor answered 503")
        raise ValueError("the document is not UTF-8")

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert attempts == [(1, None), (2, "RetryableError: vendor answered 503")]
    assert done["attempts"] == 2
    assert done["maxAttempts"] == 3
    assert done["error"] == "ValueError: the document is not UTF-8"


async def test_fatal_error_fails_at_once(server: Server) -> None:
    task = await server.create(maxAttempts=5)
    worker = server.worker()

    @worker.job("summary")
    async def fatal(job: Job) -> Result:
        raise FatalError("model does not exist")

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert done["attempts"] == 1
    assert done["error"] == "FatalError: model does not exist"


async def test_hold_waits_for_a_decision_that_the_next_attempt_reads(server: Server) -> None:
    task = await server.create(input={"doc": "draft me"})
    seen: list[dict[str, Any]] = []
    worker = server.worker()

    @worker.job("summary")
    async def reviewed(job: Job) -> Result:
        seen.append({k: job.task.get(k) for k in ("decision", "decisionReason", "artifactHash")})
        if job.task.get("decision") is None:
            await job.hold("mem://drafts/1", "sha256:d1", "Publish this?")
        return Result(result_ref="mem://final/1", result_hash="sha256:f1")

    async with running(worker):
        held = await server.wait_state(task["id"], "waiting_approval")
        assert held["artifactHash"] == "sha256:d1"
        assert held["question"] == "Publish this?"
        answer = await server.decide(task["id"], "approve", "sha256:d1", held["version"])
        assert answer["changed"] is True, answer
        done = await server.wait_state(task["id"], "succeeded")
    assert seen[0] == {"decision": None, "decisionReason": None, "artifactHash": None}
    assert seen[1]["decision"] == "approve"
    assert seen[1]["artifactHash"] == "sha256:d1"
    assert done["attempts"] == 2
    assert done["resultRef"] == "mem://final/1"


async def test_a_handler_that_returns_no_result_fails_final_naming_the_field(
    server: Server,
) -> None:
    task = await server.create()
    worker = server.worker()

    @worker.job("summary")
    async def sloppy(job: Job) -> Any:
        return {"resultRef": "mem://x"}

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert "resultHash" in done["error"]
    assert done["attempts"] == 1


async def test_concurrent_jobs_run_side_by_side(server: Server) -> None:
    tasks = [await server.create(input={"n": n}) for n in range(3)]
    inside = 0
    most = 0
    all_in = asyncio.Event()
    worker = server.worker(concurrency=3)

    @worker.job("summary")
    async def together(job: Job) -> Result:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        if most == 3:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 30)
        inside -= 1
        return Result(result_ref=f"mem://{job.input['n']}", result_hash="sha256:3")

    async with running(worker):
        for task in tasks:
            await server.wait_state(task["id"], "succeeded")
    assert most == 3


async def test_a_wrong_secret_stops_the_worker_with_the_servers_refusal(server: Server) -> None:
    worker = Worker(
        url=server.url,
        tenant=server.tenant,
        secret="whsec_" + "A" * 44,
        wait_ms=0,
    )
    worker.handle("summary", lambda job: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(ReportError) as refused:
        await asyncio.wait_for(worker.run(), 30)
    assert refused.value.status == 401


async def test_a_cancel_the_job_cannot_honour_is_shown_and_the_job_goes_on(
    server: Server,
) -> None:
    task = await server.create()
    started = asyncio.Event()
    finish = asyncio.Event()
    seen: list[str | None] = []
    worker = server.worker(lease_ms=3000)

    @worker.job("summary")
    async def published(job: Job) -> Result:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(job.cancelled)
            await job.cannot_cancel("the report is already published")
            seen.append(job.cancelled)
        await finish.wait()
        return Result(result_ref="mem://published", result_hash="sha256:77")

    async with running(worker):
        await asyncio.wait_for(started.wait(), 30)
        await server.cancel(task["id"])
        await server.wait_state(task["id"], "cancel_ineffective")
        finish.set()
        done = await server.wait_state(task["id"], "cancelled")
    assert seen == ["cancel", None]
    assert done["resultRef"] == "mem://published"


async def test_a_cancel_answered_to_the_jobs_own_progress_can_be_answered_cannot_cancel(
    server: Server,
) -> None:
    task = await server.create()
    started, go_on = asyncio.Event(), asyncio.Event()
    seen: list[str | None] = []
    # The default 30 s lease: no heartbeat comes before the progress, so
    # the cancel arrives in the answer to the job's own report.
    worker = server.worker()

    @worker.job("summary")
    async def published(job: Job) -> Result:
        started.set()
        await go_on.wait()
        try:
            await job.progress(50)
        except asyncio.CancelledError:
            seen.append(job.cancelled)
            await job.cannot_cancel("the report is already published")
            seen.append(job.cancelled)
        # Nothing is left pending: the job awaits as usual.
        await asyncio.sleep(0.01)
        return Result(result_ref="mem://published", result_hash="sha256:78")

    async with running(worker):
        await asyncio.wait_for(started.wait(), 30)
        await server.cancel(task["id"])
        go_on.set()
        done = await server.wait_state(task["id"], "cancelled")
    assert seen == ["cancel", None]
    assert done["resultRef"] == "mem://published"
    history = await server.history(task["id"])
    kinds = [e["event"]["type"] for e in history["events"]]
    assert "cannot_cancel" in kinds, kinds

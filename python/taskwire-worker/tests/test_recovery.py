"""Workers that die, run on wrong clocks, or shut down, against the real server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import Server, running

from taskwire_worker import Job, Result

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "summary_worker.py"


def start_example(server: Server, log: Path, **env: str) -> subprocess.Popen[bytes]:
    """The example worker as a real process of its own."""
    full = {
        **os.environ,
        "TASKWIRE_URL": server.url,
        "TASKWIRE_TENANT": server.tenant,
        "TASKWIRE_SECRET": server.secret,
        **env,
    }
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE)], env=full, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )


async def test_sigkilled_worker_is_replaced_and_its_late_report_is_fenced(
    server: Server, tmp_path: Path
) -> None:
    # A 2 s lease and a 100 ms grace: the dead attempt is given up on
    # quickly. 8 steps of 600 ms: the kill lands mid-step.
    task = await server.create(input={"doc": "a b c d e f"}, unknownGraceMs=100)
    env = {"TASKWIRE_LEASE_MS": "2000", "TASKWIRE_STEP_MS": "600"}
    first = start_example(server, tmp_path / "first.log", **env)
    try:
        await server.wait_for(task["id"], lambda t: t["progress"] >= 25, "at 25 %")
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
    second = start_example(server, tmp_path / "second.log", **env)
    try:
        # The lease lapses (unknown), the grace passes, the task is queued
        # again and the second process claims it as attempt 2.
        replaced = await server.wait_for(
            task["id"], lambda t: t["attempts"] == 2 and t["state"] == "running", "attempt 2"
        )
        assert replaced["attempts"] == 2
        late = await server.signed_report(
            task["id"],
            {
                "type": "progress",
                "atMs": time.time() * 1000,
                "progress": 90,
                "cursor": "from-the-dead",
                "attempt": 1,
            },
        )
        assert late.status_code == 200, late.text
        answer = late.json()
        assert answer["next"] == "stop"
        assert answer["reason"] == "stale-attempt"
        assert answer["attempt"] == 2
        assert answer["changed"] is False
        done = await server.wait_state(task["id"], "succeeded", timeout_s=60)
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            second.wait(timeout=30)
        except subprocess.TimeoutExpired:
            second.kill()
    assert done["attempts"] == 2
    assert done["resultRef"] == f"mem://summaries/{task['id']}"
    history = await server.history(task["id"])
    cursors = [e["event"].get("cursor") for e in history["events"]]
    assert "from-the-dead" not in cursors


async def run_skewed(server: Server, skew_ms: float) -> dict[str, Any]:
    task = await server.create()
    # Lease 1.5 s, the job 4 s: it lives on heartbeats alone.
    worker = server.worker(lease_ms=1500, now=lambda: time.time() * 1000 + skew_ms)

    @worker.job("summary")
    async def slow(job: Job) -> Result:
        await asyncio.sleep(4)
        return Result(result_ref="mem://slow", result_hash="sha256:5")

    async with running(worker):
        done = await server.wait_state(task["id"], "succeeded", "failed", timeout_s=60)
    assert abs(worker.clock.offset_ms + skew_ms) < 5000, worker.clock.offset_ms
    return done


async def test_a_worker_clock_ten_minutes_ahead_keeps_its_lease(server: Server) -> None:
    done = await run_skewed(server, +600_000)
    assert done["state"] == "succeeded"
    # created (0), start (1), succeed (2): no lapse, no recovery, no retry.
    assert (done["attempts"], done["version"]) == (1, 2)


async def test_a_worker_clock_ten_minutes_behind_keeps_its_lease(server: Server) -> None:
    done = await run_skewed(server, -600_000)
    assert done["state"] == "succeeded"
    assert (done["attempts"], done["version"]) == (1, 2)


async def test_graceful_shutdown_hands_an_unfinished_job_to_another_worker(
    server: Server,
) -> None:
    task = await server.create()
    started = asyncio.Event()
    why: list[str | None] = []
    first = server.worker(name="leaving")

    @first.job("summary")
    async def endless(job: Job) -> Result:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            why.append(job.cancelled)
        raise AssertionError("unreachable")

    run = asyncio.create_task(first.run())
    await asyncio.wait_for(started.wait(), 30)
    await first.shutdown(grace_ms=200)
    await run
    assert why == ["shutdown"]
    requeued = await server.get(task["id"])
    assert requeued["state"] == "queued"
    assert requeued["error"] == "worker shut down"
    second = server.worker(name="staying")

    @second.job("summary")
    async def quick(job: Job) -> Result:
        return Result(result_ref="mem://done", result_hash="sha256:2")

    async with running(second):
        done = await server.wait_state(task["id"], "succeeded")
    assert done["attempts"] == 2


async def test_graceful_shutdown_lets_a_job_finish_within_the_grace(server: Server) -> None:
    task = await server.create()
    started = asyncio.Event()
    worker = server.worker()

    @worker.job("summary")
    async def short(job: Job) -> Result:
        started.set()
        await asyncio.sleep(0.5)
        return Result(result_ref="mem://short", result_hash="sha256:3")

    run = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 30)
    await worker.shutdown(grace_ms=30_000)
    await run
    done = await server.get(task["id"])
    assert (done["state"], done["attempts"]) == ("succeeded", 1)


async def test_the_example_holds_for_approval_and_publishes_once_approved(
    server: Server, tmp_path: Path
) -> None:
    task = await server.create(input={"doc": "one two three", "approval": True})
    log = tmp_path / "example.log"
    example = start_example(server, log, TASKWIRE_STEP_MS="50")
    try:
        held = await server.wait_state(task["id"], "waiting_approval")
        assert held["question"] == "Publish this summary?"
        assert "publish" not in log.read_text()
        await server.decide(task["id"], "approve", held["artifactHash"], held["version"])
        done = await server.wait_state(task["id"], "succeeded")
    finally:
        example.send_signal(signal.SIGTERM)
        try:
            example.wait(timeout=30)
        except subprocess.TimeoutExpired:
            example.kill()
    assert done["attempts"] == 2
    assert log.read_text().count(f"publish {task['id']}:publish:write") == 1
    assert example.returncode == 0, log.read_text()  # SIGTERM: a graceful shutdown

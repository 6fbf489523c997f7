"""Seed 001 §12, scenario 8: a worker whose clock is 10 minutes off. The
lease is judged on the server's clock, the library corrects its reports by
the server's `nowMs` (PROTOCOL.md §Workers, Reports), and the task succeeds
with no spurious lapse. A real worker process (tests/fault_worker.py) whose
`Worker(now=...)` is skewed; the real server on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from conftest import Server
from faults_support import WorkerProc, create, steps_of, within_budget

STEPS = ["load", "notify", "classify", "publish"]
TEN_MINUTES_MS = 600_000


@pytest.mark.parametrize("skew_ms", [TEN_MINUTES_MS, -TEN_MINUTES_MS])
async def test_8_a_skewed_worker_clock_causes_no_spurious_lapse(
    store_server: Server, workers: Callable[..., WorkerProc], skew_ms: int
) -> None:
    server = store_server
    task = await create(server, "pipeline", STEPS, budget={"maxTokens": 1000})
    # The skew is real: a report stamped with that clock, uncorrected, is refused.
    raw = await server.signed_report(
        task["id"],
        {
            "type": "progress",
            "progress": 1,
            "cursor": "",
            "atMs": round(time.time() * 1000) + skew_ms,
            "attempt": 1,
        },
    )
    assert raw.status_code == 400 and "clock-skew" in raw.text, raw.text
    states: list[tuple[str, int]] = []

    async def watch() -> None:
        while True:
            seen = await server.get(task["id"])
            states.append((seen["state"], seen["attempts"]))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    try:
        # A 1 s lease and 4 calls of 400 ms: the task outlives several
        # leases, so only renewals judged on the server's clock keep it.
        worker = workers("skewed", FW_SKEW_MS=str(skew_ms), FW_CALL_MS="400")
        done = await server.wait_state(task["id"], "succeeded", "failed", "cancelled")
    finally:
        watcher.cancel()
    assert done["state"] == "succeeded", done
    assert done["attempts"] == 1, "never lapsed, never re-queued"
    assert {s for s, _ in states} <= {"queued", "running", "succeeded"}, states
    assert steps_of(done) == [(s, "succeeded", 1) for s in STEPS]
    assert within_budget(done)
    # It met the skew (its first claim was refused for its time) and corrected it.
    assert "clock resynchronised" in worker.log_text()
    # The worker's view of the server's clock is the server's, not its own.
    for note in worker.events("claimed") + worker.events("done"):
        assert abs(note["now_ms"] - note["local_ms"]) < 2000, note

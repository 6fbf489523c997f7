"""Seed 001 §12, scenarios 5 and 6: a budget that covers half the steps,
and a person cancelling in the middle of a model call. Real worker
processes (tests/fault_worker.py), the real server on SQLite and on
PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fake_external
from conftest import Server
from faults_support import WorkerProc, create, report, steps_of, within_budget

EIGHT = [f"step-{n}" for n in range(1, 9)]


async def test_5_a_budget_for_half_the_steps_ends_with_the_partial_result(
    store_server: Server, workers: Callable[..., WorkerProc]
) -> None:
    server = store_server
    # Each call reserves 150 tokens and uses 100: 4 calls fit in 450
    # (400 used + 150 > 450 refuses the fifth).
    budget = {"maxTokens": 450}
    task = await create(server, "pipeline", EIGHT, budget=budget)
    observed: list[dict[str, Any]] = []

    async def watch() -> None:
        while True:
            observed.append(await server.get(task["id"]))
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        worker = workers("budget")
        done = await server.wait_state(task["id"], "succeeded", "failed", "cancelled")
    finally:
        watcher.cancel()
    assert done["state"] == "failed", done
    assert done["error"] == "budget-exhausted"
    assert done["attempts"] == 1, "not retried: another attempt meets the same budget"
    partial = f"mem://{task['id']}/step-4@1"
    assert done["resultRef"] == partial, "the partial result: the last finished step's output"
    # Read back by the worker after every step: never above the budget.
    after = worker.events("after-step")
    assert [e["step"] for e in after] == EIGHT[:4]
    for seen in after + observed + [done]:
        assert within_budget(seen), seen
    assert done["used"] == {"tokens": 400, "costCents": 8, "toolCalls": 4}
    assert done.get("reserved") is None
    # The fifth reservation was refused and its call never made.
    assert [(e["step"], e["reason"]) for e in worker.events("over-budget")] == [
        ("step-5", "over-budget")
    ]
    assert [e["step"] for e in worker.events("call")] == EIGHT[:4]
    assert [r["id"] for r in done["reservations"]] == [f"1:{s}" for s in EIGHT[:4]]
    # The state explains itself: four done, the refused one failed, the rest pending.
    assert steps_of(done) == [
        *[(s, "succeeded", 1) for s in EIGHT[:4]],
        ("step-5", "failed", 1),
        *[(s, "pending", None) for s in EIGHT[5:]],
    ]


async def test_6_a_cancel_in_the_middle_of_a_model_call(
    store_server: Server, workers: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    server = store_server
    steps = ["load", "notify", "classify", "publish"]
    task = await create(server, "pipeline", steps, budget={"maxTokens": 1000})
    # A 3 s lease (a heartbeat a second): the short SIGSTOP below is no lapse.
    worker = workers("cancelled", FW_SLOW="classify", FW_LEASE_MS="3000")
    await worker.wait_note("calling", lambda e: e["step"] == "classify")
    # Held still while the cancel lands, so the reservation below
    # certainly meets a `cancelling` task, not one the worker ended.
    worker.freeze()
    try:
        asked = await server.cancel(task["id"], "changed my mind")
        assert (asked["reason"], asked["task"]["state"]) == ("cancel-requested", "cancelling")
        late = await report(
            server,
            task["id"],
            {"type": "reserve", "reservation": "1:after-cancel", "tokens": 10, "attempt": 1},
        )
        assert late["changed"] is False and late["duplicate"] is False, late
        assert late["reason"] == "not-running"
    finally:
        worker.thaw()
    done = await server.wait_state(task["id"], "cancelled", "succeeded", "failed")
    assert done["state"] == "cancelled", done
    assert done["attempts"] == 1
    # Ended by the worker's own stop (the library's cancellation), not a lapse.
    assert "ack_cancel -> cancelled (cancel-acknowledged)" in worker.log_text()
    # Finished steps stay succeeded, the interrupted one failed, the unrun one pending.
    assert steps_of(done) == [
        ("load", "succeeded", 1),
        ("notify", "succeeded", 1),
        ("classify", "failed", 1),
        ("publish", "pending", None),
    ]
    # The effect made before the cancel is listed, and nothing after it ran.
    assert [(e["step"], e["attempt"]) for e in done["effects"]] == [("notify", 1)]
    assert len(fake_external.resources(tmp_path / "external.sqlite3")) == 1
    assert [e["step"] for e in worker.events("call")] == ["load", "notify", "classify"]
    assert worker.events("done") == []
    # The interrupted call released its reservation; the refused one was never granted.
    reservations = {r["id"]: r.get("settled") for r in done["reservations"]}
    assert set(reservations) == {"1:load", "1:notify", "1:classify"}
    assert reservations["1:classify"] == {"tokens": 0, "costCents": 0, "toolCalls": 0}
    assert done.get("reserved") is None and within_budget(done)
    assert done["used"]["tokens"] == 200

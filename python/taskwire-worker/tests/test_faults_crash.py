"""Seed 001 §12, scenarios 1-3: a worker process dies after a model call,
dies after an external write, and lives on as a zombie after its task was
delivered again. Real worker processes (tests/fault_worker.py), SIGKILL and
SIGSTOP, the real server on SQLite and on PostgreSQL.

Acceptance (001 §12): no duplicated side effect, an explainable state, the
budget never exceeded, and the task going on after the failure.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import fake_external
import pytest
from conftest import Server
from faults_support import WorkerProc, create, report, steps_of, within_budget

STEPS = ["load", "notify", "classify", "publish"]
BUDGET = {"maxTokens": 700, "maxCostCents": 100}


@pytest.mark.parametrize("point", ["after-spend", "in-call"])
async def test_1_worker_dies_after_a_model_call_and_the_step_runs_again(
    store_server: Server, workers: Callable[..., WorkerProc], tmp_path: Path, point: str
) -> None:
    server = store_server
    task = await create(server, "pipeline", STEPS, budget=BUDGET)
    first = workers("first", FW_PAUSE=f"{point}:classify:1")
    await first.wait_note("paused")
    seen = await server.get(task["id"])
    assert seen["state"] == "running" and within_budget(seen)
    first.kill()  # the model call is done, its step never reported succeeded
    second = workers("second")
    done = await server.wait_state(task["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert done["attempts"] == 2
    # Steps finished before the crash are not run again; classify is.
    assert steps_of(done) == [
        ("load", "succeeded", 1),
        ("notify", "succeeded", 1),
        ("classify", "succeeded", 2),
        ("publish", "succeeded", 2),
    ]
    calls = [(e["step"], e["attempt"]) for e in first.events("call") + second.events("call")]
    assert calls == [
        ("load", 1),
        ("notify", 1),
        ("classify", 1),
        ("classify", 2),
        ("publish", 2),
    ]
    reservations = {r["id"]: r.get("settled") for r in done["reservations"]}
    if point == "in-call":
        # The dead attempt's open reservation is charged in full (150).
        assert reservations["1:classify"] == {"tokens": 150, "costCents": 3, "toolCalls": 0}
        assert done["used"]["tokens"] == 4 * 100 + 150
    else:
        assert reservations["1:classify"] == {"tokens": 100, "costCents": 2, "toolCalls": 1}
        assert done["used"]["tokens"] == 5 * 100
    assert done.get("reserved") is None and within_budget(done)
    # One external write per effect step, each recorded once.
    assert [(e["step"], e["attempt"]) for e in done["effects"]] == [("notify", 1), ("publish", 2)]
    assert len(fake_external.resources(tmp_path / "external.sqlite3")) == 2
    assert done["resultRef"] == f"mem://{task['id']}/report@2"


async def test_2_connection_lost_after_an_external_write_before_its_record(
    store_server: Server, workers: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    server = store_server
    task = await create(server, "pipeline", STEPS, budget=BUDGET)
    first = workers("first", FW_PAUSE="after-write:publish:1")
    wrote = await first.wait_note("wrote", lambda e: e["step"] == "publish")
    await first.wait_note("paused")
    first.kill()  # the write happened; the effect report was never sent
    before = await server.get(task["id"])
    assert [e["step"] for e in before.get("effects", [])] == ["notify"], "publish not recorded"
    second = workers("second")
    done = await server.wait_state(task["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done
    key = f"{task['id']}:publish:post"
    external = tmp_path / "external.sqlite3"
    # Written twice (the second attempt could not know), created once.
    assert [w for w in fake_external.writes(external) if w[0] == key] == [
        (key, "first@1"),
        (key, "second@2"),
    ]
    created = [r for r in fake_external.resources(external) if r[0] == key]
    assert [r[1] for r in created] == [wrote["resource"]], "exactly one external resource"
    effects = [e for e in done["effects"] if e["step"] == "publish"]
    assert effects == [
        {"step": "publish", "action": "post", "resourceId": wrote["resource"], "attempt": 2}
    ]
    recorded = second.events("effect")
    assert [(e["step"], e["resource"]) for e in recorded] == [("publish", wrote["resource"])]
    assert within_budget(done)


async def test_3_a_zombie_attempt_is_fenced_while_the_redelivered_one_finishes(
    store_server: Server, workers: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    server = store_server
    task = await create(server, "pipeline", STEPS, budget=BUDGET)
    zombie = workers("zombie", FW_PAUSE="before-effect:notify:1")
    await zombie.wait_note("paused")
    zombie.freeze()  # SIGSTOP: no heartbeat, the lease lapses
    second = workers("second", FW_PAUSE="before-effect:notify:2")
    await second.wait_note("paused")
    seen = await server.get(task["id"])
    assert (seen["state"], seen["attempts"]) == ("running", 2)
    # The zombie wakes up and goes on with its external write and its record.
    zombie.release()
    zombie.thaw()
    refused = await zombie.wait_note("effect-refused")
    assert refused["attempt"] == 1
    zombie_wrote = zombie.events("wrote")
    # Its reports are fenced: stale-attempt, next stop.
    late = await report(
        server, task["id"], {"type": "step", "name": "notify", "status": "running", "attempt": 1}
    )
    assert (late["reason"], late["next"], late["attempt"]) == ("stale-attempt", "stop", 2)
    assert late["changed"] is False and late["duplicate"] is False
    mid = await server.get(task["id"])
    assert "effects" not in mid or all(e["step"] != "notify" for e in mid["effects"])
    second.release()
    done = await server.wait_state(task["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert done["resultRef"] == f"mem://{task['id']}/report@2", "attempt 2's result"
    key = f"{task['id']}:notify:post"
    created = [r for r in fake_external.resources(tmp_path / "external.sqlite3") if r[0] == key]
    assert len(created) == 1, f"one external resource for the key: {created}"
    notify = [e for e in done["effects"] if e["step"] == "notify"]
    assert len(notify) == 1 and notify[0]["attempt"] == 2
    if zombie_wrote:  # the zombie's write came first: attempt 2 got its id back
        assert notify[0]["resourceId"] == zombie_wrote[0]["resource"] == created[0][1]
    assert steps_of(done)[1] == ("notify", "succeeded", 2)
    assert zombie.events("done") == [], "the zombie never finished the task"
    assert within_budget(done)

"""Seed 001 §12, scenarios 4 and 7: a new workflow version deployed while a
task waits for approval, and the upstream input changing while it waits.
Real worker processes (tests/fault_worker.py), the real server on SQLite
and on PostgreSQL; PROTOCOL.md §Steps (a plan is fixed for the task's life:
`plan-conflict`) and §Decisions (a decision on another artifact or an
older version is `stale-decision`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from pathlib import Path

import fake_external
from conftest import Server
from faults_support import WorkerProc, create, report, steps_of

V1_STEPS = ["draft", "publish"]


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


async def test_4_a_new_workflow_version_cannot_take_over_a_task_held_under_the_old_one(
    store_server: Server, workers: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    server = store_server
    task = await create(server, "approval", V1_STEPS, workflowVersion="report-v1")
    old = workers("v1-before")
    held = await server.wait_state(task["id"], "waiting_approval", "failed")
    assert held["state"] == "waiting_approval", held
    h1 = sha("input v1")
    assert held["artifactHash"] == h1
    old.stop()  # the deploy: the old code is gone while the task waits
    assert old.proc.returncode == 0, old.log_text()
    approved = await server.decide(task["id"], "approve", h1, held["version"])
    assert approved["changed"] is True and approved["task"]["state"] == "queued"
    # The new code starts its next attempt with its own plan (a worker's
    # claim names no plan, so the start is sent as such a worker would).
    new_plan = {"workflowVersion": "report-v2", "steps": ["draft", "review", "publish"]}
    start = {"type": "start", "attempt": held["attempts"] + 1, "worker": "v2", "leaseMs": 2000}
    answer = await report(server, task["id"], {**start, **new_plan})
    assert answer["reason"] == "plan-conflict", answer
    assert answer["changed"] is False and answer["duplicate"] is False
    after = await server.get(task["id"])
    assert after["state"] == "queued", "the new code did not take the task"
    assert after["attempts"] == held["attempts"]
    assert after["workflowVersion"] == "report-v1"
    assert [s["name"] for s in after["steps"]] == V1_STEPS
    # A worker of the old version continues it under v1.
    workers("v1-after")
    done = await server.wait_state(task["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert done["workflowVersion"] == "report-v1"
    assert steps_of(done) == [("draft", "succeeded", 1), ("publish", "succeeded", 2)]
    assert done["resultHash"] == h1
    published = fake_external.resources(tmp_path / "external.sqlite3")
    assert [p[2] for p in published] == [h1]
    assert [(e["step"], e["attempt"]) for e in done["effects"]] == [("publish", 2)]


async def test_4b_a_claiming_worker_of_the_new_version_does_not_take_the_old_task(
    store_server: Server, workers: Callable[..., WorkerProc]
) -> None:
    server = store_server
    task = await create(server, "approval", V1_STEPS, workflowVersion="report-v1")
    old = workers("v1-before")
    held = await server.wait_state(task["id"], "waiting_approval", "failed")
    old.stop()
    await server.decide(task["id"], "approve", held["artifactHash"], held["version"])
    # The new code names the version it runs (Worker(workflow_versions=)):
    # its claims leave the v1 task to a v1 worker.
    new = workers("v2", FW_NEW_STEP="review", FW_VERSIONS="report-v2")
    # Up to 3 s for the new code to claim it (it would within ~0.5 s).
    for _ in range(60):
        if new.events("claimed"):
            break
        await asyncio.sleep(0.05)
    seen = await server.get(task["id"])
    assert new.events("claimed") == [], f"the v2 worker took the v1 task: {seen}"
    assert seen["state"] == "queued"
    # A worker of the old code finishes it under its own plan.
    workers("v1-after", FW_VERSIONS="report-v1")
    done = await server.wait_state(task["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert done["workflowVersion"] == "report-v1"


async def test_7_an_approval_of_the_old_artifact_does_not_apply_to_the_changed_one(
    store_server: Server, workers: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    server = store_server
    upstream = tmp_path / "upstream.txt"
    upstream.write_text("input v1")
    task = await create(server, "approval", V1_STEPS)
    worker = workers("approval")
    first = await server.wait_state(task["id"], "waiting_approval", "failed")
    h1, v1 = first["artifactHash"], first["version"]
    assert h1 == sha("input v1")
    # A reviewer opens the page on (H1, v1). Meanwhile the upstream input
    # changes and the flow is re-run on it (someone asks for changes), so
    # the task now holds a new artifact.
    upstream.write_text("input v2")
    rerun = await server.decide(task["id"], "request_changes", h1, v1)
    assert rerun["changed"] is True
    h2 = sha("input v2")
    second = await server.wait_for(
        task["id"],
        lambda t: t["state"] == "waiting_approval" and t.get("artifactHash") == h2,
        "held on the changed artifact",
    )
    v2 = second["version"]
    assert v2 > v1 and second["attempts"] == 2
    # The reviewer's approval of what they saw is refused, and so is any
    # mix of the old artifact or the old version.
    for artifact, version in ((h1, v1), (h1, v2), (h2, v1)):
        stale = await server.decide(task["id"], "approve", artifact, version)
        assert (stale["reason"], stale["changed"]) == ("stale-decision", False), stale
        assert stale["task"]["state"] == "waiting_approval"
        assert stale["task"]["artifactHash"] == h2
    assert (await server.get(task["id"]))["version"] == v2, "nothing changed"
    # An approval of the artifact the task holds now applies.
    ok = await server.decide(task["id"], "approve", h2, v2)
    assert ok["changed"] is True and ok["task"]["state"] == "queued", ok
    done = await server.wait_state(task["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done
    assert done["resultHash"] == h2, "what was published is what was approved"
    published = fake_external.resources(tmp_path / "external.sqlite3")
    assert [p[2] for p in published] == [h2], "the old artifact was never published"
    assert [e["attempt"] for e in worker.events("hold")] == [1, 2]
    assert [e["step"] for e in worker.events("call")] == ["draft"], "the draft ran once"
    assert steps_of(done) == [("draft", "succeeded", 1), ("publish", "succeeded", 3)]

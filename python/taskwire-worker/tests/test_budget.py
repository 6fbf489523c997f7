"""Budgets and side effects (PROTOCOL.md §Budgets and side effects) from a
Python worker against the real server: a call within the budget runs and
its usage is settled, one past it is `OverBudget` and never runs; a
failing call releases its whole reservation; an external write is made
once across two attempts; `budget_exhausted` ends the task failed with
`budget-exhausted`, keeping the partial result."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Server, running

from taskwire_worker import (
    Amount,
    ConfigError,
    Exhausted,
    FatalError,
    Job,
    OverBudget,
    Result,
    RetryableError,
    Usage,
    budget_exhausted,
)
from taskwire_worker.attempt import final_event

BUDGET = {"maxTokens": 1000, "maxCostCents": 50}


async def test_a_call_within_the_budget_settles_and_one_past_it_is_over_budget_and_never_runs(
    server: Server,
) -> None:
    task = await server.create("spend", budget=BUDGET)
    ran: list[str] = []
    seen: dict[str, Any] = {}
    worker = server.worker()

    @worker.job("spend")
    async def handler(job: Job) -> Result:
        async def draft() -> tuple[str, Usage]:
            ran.append("draft")
            seen["reserved_during"] = (await server.get(job.id))["reserved"]
            return "a draft", Usage(tokens=400, cost_cents=15, tool_calls=2)

        async def polish() -> tuple[str, Usage]:
            ran.append("polish")
            return "never", Usage()

        seen["value"] = await job.spend("draft", Amount(tokens=600, cost_cents=20), draft)
        try:
            # 400 used + 700 > 1000: refused before the call.
            await job.spend("polish", Amount(tokens=700), polish)
        except OverBudget as e:
            seen["refused"] = e
        return Result("mem://draft", "sha256:draft")

    async with running(worker):
        done = await server.wait_state(task["id"], "succeeded")
    assert seen["value"] == "a draft"
    assert ran == ["draft"], "the refused call was not made"
    assert seen["reserved_during"] == {"tokens": 600, "costCents": 20}
    refused = seen["refused"]
    assert isinstance(refused, FatalError), "final: another attempt meets the same budget"
    assert (refused.reservation, refused.reason) == ("1:polish", "over-budget")
    assert done["budget"] == BUDGET
    assert done["used"] == {"tokens": 400, "costCents": 15, "toolCalls": 2}
    assert done.get("reserved") is None
    assert [(r["id"], r["settled"]) for r in done["reservations"]] == [
        ("1:draft", {"tokens": 400, "costCents": 15, "toolCalls": 2})
    ]


async def test_a_failing_call_releases_its_whole_reservation_and_its_error_reaches_the_handler(
    server: Server,
) -> None:
    task = await server.create("spend-fail", budget=BUDGET, workflowVersion="v1", steps=["draft"])
    thrown = ValueError("the model answered garbage")
    seen: dict[str, Any] = {}
    worker = server.worker()

    @worker.job("spend-fail")
    async def handler(job: Job) -> Result:
        async def failing() -> tuple[str, Usage]:
            raise thrown

        async def cheap() -> tuple[int, Usage]:
            return 7, Usage(tokens=10)

        try:
            await job.spend("draft", Amount(tokens=900, cost_cents=40), failing, step="draft")
        except ValueError as e:
            seen["caught"] = e
        seen["after"] = await server.get(job.id)
        # The released budget is there again for the next call.
        seen["next"] = await job.spend("retry", Amount(tokens=900, cost_cents=40), cheap)
        return Result("mem://r", "sha256:r")

    async with running(worker):
        done = await server.wait_state(task["id"], "succeeded")
    assert seen["caught"] is thrown, "the call's own error, not a settle's"
    assert seen["after"].get("reserved") is None, "the reservation is released"
    assert [(r["id"], r["step"], r["settled"]) for r in seen["after"]["reservations"]] == [
        ("1:draft", "draft", {"tokens": 0, "costCents": 0, "toolCalls": 0})
    ]
    assert seen["next"] == 7
    assert done["used"] == {"tokens": 10, "costCents": 0, "toolCalls": 0}


async def test_an_effect_is_written_once_across_two_attempts(server: Server) -> None:
    task = await server.create("effect")
    writes: list[tuple[int, str]] = []
    answers: dict[int, tuple[str | None, str]] = {}
    worker = server.worker()

    @worker.job("effect")
    async def handler(job: Job) -> Result:
        async def write(key: str) -> str:
            writes.append((job.attempt, key))
            return f"T-{job.attempt}"

        before = job.recorded_effect("publish", "ticket")
        answers[job.attempt] = (before, await job.effect("publish", "ticket", write))
        if job.attempt == 1:
            raise RetryableError("crashed after the write")
        return Result("mem://r", "sha256:r")

    async with running(worker):
        done = await server.wait_state(task["id"], "succeeded")
    assert done["attempts"] == 2
    assert writes == [(1, f"{task['id']}:publish:ticket")], "written once, under job.key"
    assert answers == {1: (None, "T-1"), 2: ("T-1", "T-1")}
    assert done["effects"] == [
        {"step": "publish", "action": "ticket", "resourceId": "T-1", "attempt": 1}
    ]


async def test_a_second_write_in_the_attempt_is_answered_with_the_first_id(server: Server) -> None:
    task = await server.create("effect-again")
    ids: list[str] = []
    worker = server.worker()

    @worker.job("effect-again")
    async def handler(job: Job) -> Result:
        # The claimed task records nothing yet, so both writes are made
        # (the outside system dedups by the key); the server keeps the first.
        for resource in ("T-first", "T-second"):

            async def write(key: str, resource: str = resource) -> str:
                return resource

            ids.append(await job.effect("publish", "ticket", write))
        return Result("mem://r", "sha256:r")

    async with running(worker):
        done = await server.wait_state(task["id"], "succeeded")
    assert ids == ["T-first", "T-first"]
    assert [e["resourceId"] for e in done["effects"]] == ["T-first"]


async def test_budget_exhausted_fails_the_task_and_keeps_the_partial_result(
    server: Server,
) -> None:
    task = await server.create("exhausted", budget={"maxTokens": 100})
    worker = server.worker()

    @worker.job("exhausted")
    async def handler(job: Job) -> Result | Exhausted:
        async def call() -> tuple[str, Usage]:
            return "d", Usage(tokens=100)

        await job.spend("draft", Amount(tokens=100), call)
        try:
            await job.spend("more", Amount(tokens=1), call)
        except OverBudget:
            return budget_exhausted(Result("mem://partial", "sha256:partial"))
        return Result("mem://all", "sha256:all")

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert done["error"] == "budget-exhausted"
    assert (done["resultRef"], done["resultHash"]) == ("mem://partial", "sha256:partial")
    assert done["attempts"] == 1, "not retried"


async def test_budget_exhausted_without_a_partial_result(server: Server) -> None:
    task = await server.create("exhausted-bare", budget={"maxTokens": 1})
    worker = server.worker()

    @worker.job("exhausted-bare")
    async def handler(job: Job) -> Exhausted:
        return budget_exhausted()

    async with running(worker):
        done = await server.wait_state(task["id"], "failed")
    assert done["error"] == "budget-exhausted"
    assert "resultRef" not in done


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ConfigError, match="tokens: must be from 0"):
        Amount(tokens=-1)
    with pytest.raises(ConfigError, match="cost_cents: must be an integer"):
        Amount(cost_cents=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"partial\.result_hash: must be a non-blank"):
        budget_exhausted(Result("mem://p", " "))


def test_an_exhausted_ending_is_the_last_report_after_a_cancel_too() -> None:
    partial = Exhausted(Result("mem://p", "sha256:p"))
    exhaust = {"type": "exhaust", "resultRef": "mem://p", "resultHash": "sha256:p"}
    assert final_event(None, False, partial) == exhaust
    # The server ends a cancelling task cancelled, keeping the partial result.
    assert final_event("cancel", False, partial) == exhaust
    assert final_event(None, False, Exhausted()) == {"type": "exhaust"}
    assert final_event("stop", False, partial) is None
    # A blank partial made without budget_exhausted: a bug, final.
    bad = final_event(None, False, Exhausted(Result("", "h")))
    assert bad is not None and bad["type"] == "fail" and bad["retryable"] is False

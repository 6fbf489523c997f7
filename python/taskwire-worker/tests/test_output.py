"""Live output from a Python worker against the real server: a draft
written word by word reaches a follower exactly, and a retried attempt's
draft replaces the failed one's."""

from __future__ import annotations

import asyncio

from conftest import Server, running

from taskwire_worker import Job, Result, RetryableError

DRAFT = "The summary, written word by word: naïve café 😀 done."


async def follow(server: Server, task_id: str) -> tuple[str, list[int]]:
    """Long-polls `draft` as a page would, from what it holds, until complete.

    Returns the text and the attempts it showed, in order.
    """
    text, attempt, cursor, attempts = "", 0, 0, []
    for _ in range(200):
        params = {
            "cursor": cursor,
            "waitMs": 5000,
            "output": "draft",
            "outputAttempt": attempt,
            "outputOffset": len(text.encode("utf-16-le")) // 2,
        }
        resp = await server.api.get(f"/v1/tasks/{task_id}/resume", params=params)
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        cursor = answer["task"]["version"]
        out = answer["output"]
        if out["attempt"] > attempt:
            # A newer attempt: its text replaces, never joins, the old one.
            text, attempt = "", out["attempt"]
            attempts.append(attempt)
        assert out["offset"] == len(text.encode("utf-16-le")) // 2, (out, text)
        text += out["text"]
        if out["complete"]:
            return text, attempts
    raise AssertionError(f"never complete: {text!r}")


async def test_a_draft_written_word_by_word_reaches_the_follower_exactly(server: Server) -> None:
    task = await server.create()
    worker = server.worker()

    @worker.job("summary")
    async def summary(job: Job) -> Result:
        draft = job.output("draft")
        for word in DRAFT.split(" "):
            await draft.write(word if word == "done." else word + " ")
            await asyncio.sleep(0.01)
        # No flush: the rest goes before the succeed.
        return Result(result_ref="mem://s", result_hash="sha256:s")

    async with running(worker):
        text, attempts = await follow(server, task["id"])
    assert text == DRAFT
    assert attempts == [1]


async def test_a_retried_attempts_draft_replaces_the_failed_ones(server: Server) -> None:
    task = await server.create()
    worker = server.worker()

    @worker.job("summary")
    async def summary(job: Job) -> Result:
        draft = job.output("draft")
        if job.attempt == 1:
            await draft.write("A first draft that fails")
            await draft.flush()
            raise RetryableError("vendor busy")
        await draft.write("The second draft.")
        return Result(result_ref="mem://s", result_hash="sha256:s")

    async with running(worker):
        await server.wait_state(task["id"], "succeeded")
    text, attempts = await follow(server, task["id"])
    assert text == "The second draft."
    assert attempts == [2]

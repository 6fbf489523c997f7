"""The vendor helper's unknown submit, and a lost report answer, end to end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from conftest import Server, running
from local_http import CuttingProxy, Vendor

from taskwire_worker import PENDING, Job, Result, Worker


@pytest.fixture
async def vendor() -> AsyncIterator[Vendor]:
    # Its submit answers after 2 s; the client gives up after 0.3 s.
    v = await Vendor(submit_delay_s=2.0, polls_to_finish=3).start()
    yield v
    await v.close()


def vendor_worker(server: Server, vendor: Vendor, with_lookup: bool) -> Worker:
    worker = server.worker()
    http = httpx.AsyncClient(base_url=vendor.url, timeout=httpx.Timeout(0.3, connect=2.0))

    async def submit(key: str) -> str:
        resp = await http.post("/jobs", headers={"idempotency-key": key})
        resp.raise_for_status()
        return str(resp.json()["id"])

    async def poll(handle: str) -> Any:
        body = (await http.get(f"/jobs/{handle}")).raise_for_status().json()
        return body["result"] if body["status"] == "done" else PENDING

    async def lookup(key: str) -> str | None:
        resp = await http.get(f"/lookup/{key}")
        return None if resp.status_code == 404 else str(resp.json()["id"])

    @worker.job("ocr")
    async def ocr(job: Job) -> Result:
        result = await job.vendor(
            "recognize",
            submit=submit,
            poll=poll,
            lookup=lookup if with_lookup else None,
            first_delay_ms=50,
        )
        return Result(result_ref=f"mem://{result}", result_hash="sha256:0c")

    return worker


async def test_an_unknown_submit_is_never_resubmitted_and_fails_final(
    server: Server, vendor: Vendor
) -> None:
    task = await server.create(kind="ocr", maxAttempts=3)
    async with running(vendor_worker(server, vendor, with_lookup=False)):
        done = await server.wait_state(task["id"], "failed")
    assert vendor.submits == [f"{task['id']}:recognize:submit"]
    assert done["attempts"] == 1
    assert "SubmitUnknownError" in done["error"]
    assert "not repeated blindly" in done["error"]


async def test_an_unknown_submit_is_resolved_by_lookup_and_polled_to_its_end(
    server: Server, vendor: Vendor
) -> None:
    task = await server.create(kind="ocr", maxAttempts=3)
    async with running(vendor_worker(server, vendor, with_lookup=True)):
        done = await server.wait_state(task["id"], "succeeded")
    key = f"{task['id']}:recognize:submit"
    assert vendor.submits == [key]
    assert vendor.jobs[key] == 3
    assert done["resultRef"] == f"mem://r-{key}"
    assert done["attempts"] == 1


async def test_a_report_whose_answer_was_lost_is_resent_with_the_same_id_and_body(
    server: Server,
) -> None:
    upstream = server.url.removeprefix("http://")
    proxy = await CuttingProxy(upstream=upstream).start()
    task = await server.create()
    client = httpx.AsyncClient(timeout=httpx.Timeout(15.0, connect=5.0))
    worker = Worker(
        url=proxy.url, tenant=server.tenant, secret=server.secret, wait_ms=2000, client=client
    )

    @worker.job("summary")
    async def two_steps(job: Job) -> Result:
        proxy.cut_reports = 1  # the next report is applied, its answer lost
        await job.progress(50, cursor="half")
        return Result(result_ref="mem://twice", result_hash="sha256:22")

    try:
        async with running(worker):
            done = await server.wait_state(task["id"], "succeeded")
    finally:
        await proxy.close()
        await client.aclose()
    progress = [(i, b) for i, b in proxy.reports if b'"type":"progress"' in b]
    assert len(progress) == 2
    (first_id, first_body), (second_id, second_body) = progress
    assert (first_id, first_body) == (second_id, second_body)
    history = await server.history(task["id"])
    kinds = [e["event"]["type"] for e in history["events"]]
    assert kinds.count("progress") == 1
    assert done["version"] == 3  # start, progress, succeed


async def test_a_worker_cut_off_from_the_server_gives_its_job_up_and_another_finishes_it(
    server: Server,
) -> None:
    upstream = server.url.removeprefix("http://")
    proxy = await CuttingProxy(upstream=upstream).start()
    task = await server.create(unknownGraceMs=100)
    started = asyncio.Event()
    why: list[str | None] = []
    client = httpx.AsyncClient(timeout=httpx.Timeout(15.0, connect=5.0))
    cut_off = Worker(
        url=proxy.url,
        tenant=server.tenant,
        secret=server.secret,
        lease_ms=1500,
        wait_ms=2000,
        client=client,
    )

    @cut_off.job("summary")
    async def stranded(job: Job) -> Result:
        started.set()
        proxy.unreachable = True  # from now on nothing gets through
        try:
            await asyncio.Event().wait()
        finally:
            why.append(job.cancelled)
        raise AssertionError("unreachable")

    rescuer = server.worker(name="rescuer")

    @rescuer.job("summary")
    async def rescue(job: Job) -> Result:
        return Result(result_ref="mem://rescued", result_hash="sha256:4")

    try:
        async with running(cut_off):
            await asyncio.wait_for(started.wait(), 30)
            async with running(rescuer):
                done = await server.wait_state(task["id"], "succeeded")
            assert why == ["lease-lost"]
    finally:
        await proxy.close()
        await client.aclose()
    assert done["attempts"] == 2
    assert done["resultRef"] == "mem://rescued"

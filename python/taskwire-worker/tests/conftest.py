"""Each test starts the real reference server on a temporary SQLite dir.

The binary is `$TASKWIRE_SERVER_BIN` (scripts/test-python.sh sets it), or
`$CARGO_TARGET_DIR/debug/taskwire-server`, or the workspace's
`target/debug/taskwire-server`. A missing binary is an error, never a skip.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from taskwire_worker import Worker

REPO = Path(__file__).resolve().parents[3]
TENANT = "demo"
TOKEN = "demo-token-for-tests"
# Workers running in the background (`running`): a wait fails at once when
# one of them died, instead of waiting out its timeout.
RUNS: list[asyncio.Task[None]] = []


def server_binary() -> Path:
    explicit = os.environ.get("TASKWIRE_SERVER_BIN")
    if explicit:
        return Path(explicit)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug" / "taskwire-server"


class Server:
    """A running taskwire-server and the calls a test makes to it."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str, secret: str) -> None:
        self.proc = proc
        self.url = url
        self.secret = secret
        self.tenant = TENANT
        self.api = httpx.AsyncClient(
            base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30.0
        )

    def worker(self, **options: Any) -> Worker:
        options.setdefault("wait_ms", 2000)
        return Worker(url=self.url, tenant=self.tenant, secret=self.secret, **options)

    async def create(self, kind: str = "summary", **fields: Any) -> dict[str, Any]:
        body = {"ttlMs": 600_000, "maxAttempts": 3, "kind": kind, **fields}
        resp = await self.api.post("/v1/tasks", json=body)
        assert resp.status_code == 201, resp.text
        return resp.json()

    async def get(self, task_id: str) -> dict[str, Any]:
        resp = await self.api.get(f"/v1/tasks/{task_id}")
        assert resp.status_code == 200, resp.text
        return resp.json()

    async def history(self, task_id: str) -> dict[str, Any]:
        resp = await self.api.get(f"/v1/tasks/{task_id}/resume", params={"cursor": 0})
        assert resp.status_code == 200, resp.text
        return resp.json()

    async def cancel(self, task_id: str, reason: str = "test") -> dict[str, Any]:
        resp = await self.api.post(f"/v1/tasks/{task_id}/cancel", json={"reason": reason})
        assert resp.status_code == 200, resp.text
        return resp.json()

    async def decide(self, task_id: str, decision: str, artifact_hash: str, version: int) -> Any:
        body = {"decision": decision, "artifactHash": artifact_hash, "version": version}
        resp = await self.api.post(f"/v1/tasks/{task_id}/decisions", json=body)
        assert resp.status_code == 200, resp.text
        return resp.json()

    async def wait_for(
        self,
        task_id: str,
        check: Callable[[dict[str, Any]], bool],
        what: str,
        timeout_s: float = 30.0,
    ) -> dict[str, Any]:
        """Polls the task until `check` holds (generous: a state, never a time)."""
        end = time.monotonic() + timeout_s
        task = await self.get(task_id)
        while not check(task):
            for run in RUNS:
                if run.done() and not run.cancelled() and run.exception() is not None:
                    raise AssertionError("a worker stopped") from run.exception()
            if time.monotonic() > end:
                pytest.fail(f"task {task_id} never became {what}; last seen: {task}")
            await asyncio.sleep(0.05)
            task = await self.get(task_id)
        return task

    async def wait_state(self, task_id: str, *states: str, timeout_s: float = 30.0) -> Any:
        return await self.wait_for(
            task_id, lambda t: t["state"] in states, " or ".join(states), timeout_s
        )

    async def signed_report(self, task_id: str, event: dict[str, Any]) -> httpx.Response:
        """A report signed as a worker would, sent by the test itself."""
        body = json.dumps({**event, "taskId": task_id})
        msg_id = f"cb_test_{secrets.token_hex(8)}"
        now = int(time.time())
        from datetime import UTC, datetime

        sig = Webhook(self.secret).sign(msg_id, datetime.fromtimestamp(now, tz=UTC), body)
        headers = {
            "webhook-id": msg_id,
            "webhook-timestamp": str(now),
            "webhook-signature": sig,
            "content-type": "application/json",
        }
        return await self.api.post(
            f"/v1/tasks/{task_id}/callbacks", content=body.encode(), headers=headers
        )


def _drain(stream: Any, sink: Path) -> None:
    with sink.open("ab") as out:
        for line in iter(stream.readline, b""):
            out.write(line)
            out.flush()


@asynccontextmanager
async def running_server(data: str, tmp_path: Path) -> AsyncIterator[Server]:
    """The real server on `data` (a directory or a PostgreSQL URL), its
    stderr in `tmp_path/server.log`; killed on exit."""
    binary = server_binary()
    if not binary.exists():
        pytest.fail(
            f"no server binary at {binary}: run `cargo build -p taskwire-server "
            "--bin taskwire-server` or set TASKWIRE_SERVER_BIN"
        )
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    log = tmp_path / "server.log"
    proc = subprocess.Popen(
        [
            str(binary),
            "--listen",
            "127.0.0.1:0",
            "--data",
            data,
            "--token",
            f"{TOKEN}={TENANT}",
            "--callback-secret",
            f"{TENANT}={secret}",
            "--sweep-ms",
            "50",
        ],
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "listening on " not in line:
        proc.kill()
        pytest.fail(f"the server did not start: {line!r}\n{log.read_text()}")
    threading.Thread(target=_drain, args=(proc.stdout, log), daemon=True).start()
    srv = Server(proc, line.split("listening on ", 1)[1].strip(), secret)
    try:
        yield srv
    finally:
        await srv.api.aclose()
        proc.kill()
        proc.wait()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    data = tmp_path / "data"
    data.mkdir()
    async with running_server(str(data), tmp_path) as srv:
        yield srv


@asynccontextmanager
async def running(worker: Worker, grace_ms: int = 0) -> AsyncIterator[asyncio.Task[None]]:
    """Runs `worker` in the background for the block, then shuts it down."""
    task = asyncio.create_task(worker.run())
    RUNS.append(task)
    try:
        yield task
    finally:
        RUNS.remove(task)
        await asyncio.wait_for(worker.shutdown(grace_ms), timeout=60)
        await task


# The fault-injection suite's fixtures (test_faults_*.py), registered here.
from faults_support import pg_cluster, store_server, workers  # noqa: E402, F401

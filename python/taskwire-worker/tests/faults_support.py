"""What the fault tests (test_faults_*.py; seed 001 §12) share: the real
server on SQLite or on PostgreSQL (`store_server`, parametrized), worker
processes of tests/fault_worker.py (`WorkerProc`) that a test pauses and
kills, and signed reports sent by the test itself.

The PostgreSQL half starts one throwaway cluster per session through
scripts/pg.sh (as the Rust tests do) and a fresh database per test; it is
skipped, saying why, only when the PostgreSQL binaries are missing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TOKEN, Server, running_server

WORKER_SCRIPT = Path(__file__).resolve().parent / "fault_worker.py"


def _pg_bin() -> Path | None:
    """$PG_BIN, else the newest /usr/lib/postgresql/*/bin, else initdb's on PATH."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


PG_BIN = _pg_bin()
# Short leases: a dead worker's task is taken over within ~1.5 s.
LEASE_MS = 1000
GRACE_MS = 100
_databases = itertools.count()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def pg_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """`postgres://postgres@127.0.0.1:PORT` of a throwaway cluster, or None."""
    if PG_BIN is None or not (PG_BIN / "initdb").exists():
        yield None
        return
    env = {**os.environ, "PG_BIN": str(PG_BIN)}
    # Not under tmp_path: as root, pg.sh hands the directory to `postgres`.
    data = Path("/tmp") / f"taskwire-faults-pg-{os.getpid()}-{secrets.token_hex(3)}"
    proc = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "pg.sh"), "run", str(data), str(_free_port())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("ready "):
        code = proc.wait()
        if code == 3:
            yield None
            return
        pytest.fail(f"scripts/pg.sh could not start PostgreSQL (exit {code})")
    try:
        yield line.removeprefix("ready ").rsplit("/", 1)[0]
    finally:
        # An immediate stop (a throwaway cluster: no checkpoint to wait
        # for), then pg.sh deletes the directory once its stdin closes.
        ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
        if os.geteuid() == 0:
            ctl = ["runuser", "-u", "postgres", "--", *ctl]
        subprocess.run(ctl, capture_output=True, check=False)
        proc.stdin.close()
        proc.wait(timeout=60)


def _database(base: str) -> str:
    assert PG_BIN is not None
    name = f"tw_faults_{next(_databases)}"
    host, port = base.removeprefix("postgres://postgres@").split(":")
    subprocess.run(
        [str(PG_BIN / "createdb"), "-h", host, "-p", port, "-U", "postgres", name],
        check=True,
        capture_output=True,
    )
    return f"{base}/{name}"


@pytest.fixture(params=["sqlite", "postgres"])
async def store_server(
    request: pytest.FixtureRequest, tmp_path: Path, pg_cluster: str | None
) -> AsyncIterator[Server]:
    """The real server on a fresh SQLite directory or PostgreSQL database."""
    if request.param == "postgres":
        if pg_cluster is None:
            if os.environ.get("TASKWIRE_PG_REQUIRED") == "1":
                pytest.fail(f"no PostgreSQL binaries (PG_BIN={PG_BIN}; TASKWIRE_PG_REQUIRED=1)")
            pytest.skip(
                f"no PostgreSQL binaries (PG_BIN={PG_BIN}): scripts/setup.sh postgres installs them"
            )
        data = _database(pg_cluster)
    else:
        (tmp_path / "data").mkdir()
        data = str(tmp_path / "data")
    async with running_server(data, tmp_path) as srv:
        yield srv


class WorkerProc:
    """One tests/fault_worker.py process and what it noted."""

    def __init__(self, server: Server, root: Path, name: str, **env: str) -> None:
        self.name = name
        self.root = root
        self.notes = root / f"{name}.jsonl"
        full = {
            **os.environ,
            "FW_URL": server.url,
            "FW_TENANT": server.tenant,
            "FW_SECRET": server.secret,
            "FW_TOKEN": TOKEN,
            "FW_NAME": name,
            "FW_DIR": str(root),
            "FW_LEASE_MS": str(LEASE_MS),
            **env,
        }
        self.log = root / f"{name}.log"
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER_SCRIPT)],
            env=full,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )

    def log_text(self) -> str:
        return self.log.read_text()

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.notes.exists():
            return []
        lines = [json.loads(line) for line in self.notes.read_text().splitlines() if line]
        return [e for e in lines if event is None or e["event"] == event]

    async def wait_note(
        self, event: str, match: Callable[[dict[str, Any]], bool] = lambda e: True
    ) -> dict[str, Any]:
        end = time.monotonic() + 30
        while True:
            found = [e for e in self.events(event) if match(e)]
            if found:
                return found[0]
            if self.proc.poll() is not None:
                pytest.fail(f"{self.name} exited before {event!r}: {self.log.read_text()}")
            if time.monotonic() > end:
                pytest.fail(f"{self.name} never noted {event!r}: {self.events()}")
            await asyncio.sleep(0.02)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=30) == -signal.SIGKILL

    def freeze(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def release(self) -> None:
        """Lets a process stopped at a FW_PAUSE point go on."""
        (self.root / f"go-{self.name}").touch()

    def stop(self) -> None:
        """SIGTERM (graceful shutdown), SIGKILL if it does not exit."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workers(store_server: Server, tmp_path: Path) -> Iterator[Callable[..., WorkerProc]]:
    """Starts worker processes; every one is gone when the test ends."""
    started: list[WorkerProc] = []

    def start(name: str, **env: str) -> WorkerProc:
        proc = WorkerProc(store_server, tmp_path, name, **env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


async def create(server: Server, kind: str, steps: list[str], **fields: Any) -> dict[str, Any]:
    """A task with a plan whose dead attempts are given up on quickly."""
    body = {"workflowVersion": "faults-v1", "steps": steps, "unknownGraceMs": GRACE_MS}
    return await server.create(kind, **{**body, **fields})


async def report(server: Server, task_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """A signed report sent by the test itself (as a worker would); its answer."""
    resp = await server.signed_report(task_id, {"atMs": round(time.time() * 1000), **event})
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


def steps_of(task: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    return [(s["name"], s["status"], s.get("attempt")) for s in task["steps"]]


def within_budget(task: dict[str, Any]) -> bool:
    """used + reserved within every limit of the task's budget."""
    budget = task.get("budget") or {}
    used = task.get("used") or {}
    reserved = task.get("reserved") or {}
    for limit, field in (("maxTokens", "tokens"), ("maxCostCents", "costCents")):
        if limit in budget and used.get(field, 0) + reserved.get(field, 0) > budget[limit]:
            return False
    return True

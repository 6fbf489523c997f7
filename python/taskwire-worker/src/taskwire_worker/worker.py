"""The worker: claims tasks of the kinds it has handlers for and runs them.

Driving it:

    worker = Worker(url=..., tenant=..., secret="whsec_...")

    @worker.job("summary")
    async def summary(job: Job) -> Result: ...

    # in one task:           # on SIGTERM, in another:
    await worker.run()       await worker.shutdown(grace_ms=10_000)

`run()` holds a claim open (`wait_ms`) for as many tasks as it has free
slots (`concurrency`), runs each as a job in its own asyncio task with
heartbeats beside it, and reports how it ended. `shutdown(grace_ms)` stops
claiming, waits for running jobs up to the grace, then fires their
signals (`job.cancelled == "shutdown"`) and reports each unfinished one
as a retryable `fail` ("worker shut down"), so another worker takes it
at once instead of after a lease and a grace period. `run()` returns when
all that is done.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from .attempt import Attempt, Exhausted, Result, final_event
from .clock import ServerClock, system_now_ms
from .errors import ConfigError, ReportError
from .job import Held, Job
from .output import flush_all
from .transport import TRANSIENT_STATUSES, Transport

__all__ = ["Handler", "Worker"]

log = logging.getLogger("taskwire_worker")

Handler = Callable[[Job], Awaitable[Result | Exhausted | Mapping[str, Any]]]


def _int_in(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name}: must be an integer from {low} to {high}, got {value!r}")
    return value


def _text(name: str, value: object, max_bytes: int, blank_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name}: must be a string, got {type(value).__name__}")
    if not blank_ok and not value.strip():
        raise ConfigError(f"{name}: must not be blank")
    if len(value.encode("utf-8")) > max_bytes:
        raise ConfigError(f"{name}: at most {max_bytes} bytes, got {len(value.encode())}")
    return value


class Worker:
    """Runs taskwire tasks as jobs (see the module's docs for the call order).

    - `url`: the server's base URL; `tenant`: sent as `taskwire-tenant`;
      `secret`: the tenant's callback secret (`whsec_...`), which signs
      claims and reports alike.
    - `name`: recorded as each attempt's worker (default `hostname-pid`).
    - `concurrency`: jobs in flight at once (1-100, default 1).
    - `lease_ms`: each attempt's lease (1000-3600000, default 30000); a
      heartbeat goes every third of it.
    - `wait_ms`: how long a claim waits for work (0-30000, default 25000).
    - `now`: the local clock in ms (tests inject a skewed one); reports use
      it plus the offset measured to the server's clock.
    - `client`: an `httpx.AsyncClient` to use (default: one of its own).
    """

    def __init__(
        self,
        *,
        url: str,
        tenant: str,
        secret: str,
        name: str | None = None,
        concurrency: int = 1,
        lease_ms: int = 30_000,
        wait_ms: int = 25_000,
        now: Callable[[], float] | None = None,
        client: httpx.AsyncClient | None = None,
        workflow_versions: list[str] | None = None,
    ) -> None:
        url = _text("url", url, 2048)
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"url: must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.tenant = _text("tenant", tenant, 255)
        self.secret = _text("secret", secret, 1024)
        if not self.secret.startswith("whsec_"):
            raise ConfigError("secret: must be a Standard Webhooks secret, whsec_<base64>")
        try:
            from standardwebhooks import Webhook

            Webhook(self.secret)
        except Exception as e:
            raise ConfigError(f"secret: the part after whsec_ is not base64: {e}") from e
        default_name = f"{socket.gethostname()}-{os.getpid()}"
        self.name = _text("name", default_name if name is None else name, 255)
        self.concurrency = _int_in("concurrency", concurrency, 1, 100)
        self.lease_ms = _int_in("lease_ms", lease_ms, 1_000, 3_600_000)
        self.wait_ms = _int_in("wait_ms", wait_ms, 0, 30_000)
        # The workflow versions this code runs: its claims leave the tasks
        # planned for other versions to their own workers (PROTOCOL.md
        # §Workers, "Claim work"). None or empty: any.
        versions = [] if workflow_versions is None else workflow_versions
        if not isinstance(versions, list) or len(versions) > 16:
            raise ConfigError("workflow_versions: must be a list of at most 16 versions")
        self.workflow_versions = [
            _text(f"workflow_versions[{i}]", v, 255) for i, v in enumerate(versions)
        ]
        if now is not None and not callable(now):
            raise ConfigError("now: must be a function returning milliseconds")
        self.clock = ServerClock(now or system_now_ms)
        self._client = client
        self._handlers: dict[str, Handler] = {}
        self._runners: dict[asyncio.Task[None], Attempt] = {}
        self._stopping = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._claiming_done = asyncio.Event()
        self._run_done = asyncio.Event()
        self._started = False

    def handle(self, kind: str, handler: Handler) -> None:
        """Runs tasks of `kind` with `handler` (an async function of a `Job`)."""
        kind = _text("kind", kind, 64, blank_ok=True)
        if not callable(handler):
            raise ConfigError(f"handler: must be an async function, got {type(handler).__name__}")
        if kind in self._handlers:
            raise ConfigError(f"kind: {kind!r} already has a handler")
        self._handlers[kind] = handler

    def job(self, kind: str) -> Callable[[Handler], Handler]:
        """Decorator form of `handle`: `@worker.job("summary")`."""

        def register(handler: Handler) -> Handler:
            self.handle(kind, handler)
            return handler

        return register

    @property
    def running(self) -> int:
        """Jobs in flight now."""
        return len(self._runners)

    async def run(self) -> None:
        """Claims and runs jobs until `shutdown()`; see the module's docs.

        Raises `ReportError` when the server refuses the claim for a reason
        no retry fixes (a wrong secret or tenant: 401), after shutting the
        running jobs down.
        """
        if not self._handlers:
            raise ConfigError("handlers: register one with handle(kind, fn) before run()")
        if self._started:
            raise RuntimeError("run() was already called on this worker")
        self._started = True
        client = self._client or httpx.AsyncClient(timeout=httpx.Timeout(15.0, connect=5.0))
        transport = Transport(
            url=self.url, tenant=self.tenant, secret=self.secret, clock=self.clock, client=client
        )
        try:
            try:
                await self._claim_loop(transport)
            finally:
                self._claiming_done.set()
            await self._wait_runners()
        except BaseException:
            self._fire_all("shutdown")
            await self._wait_runners()
            raise
        finally:
            if self._client is None:
                await client.aclose()
            self._run_done.set()

    async def shutdown(self, grace_ms: int = 10_000) -> None:
        """Stops claiming, lets running jobs finish for up to `grace_ms`, then
        cancels the rest (each reported as a retryable `fail`), and returns
        once `run()` has returned.

        A claim held open at that moment is abandoned: a task the server
        handed out in that very instant is queued again after its lease and
        grace period.
        """
        _int_in("grace_ms", grace_ms, 0, 3_600_000)
        self._stopping.set()
        if not self._started:
            return
        await self._claiming_done.wait()
        runners = list(self._runners)
        if runners:
            await asyncio.wait(runners, timeout=grace_ms / 1000.0)
        self._fire_all("shutdown")
        await self._wait_runners()
        await self._run_done.wait()

    def _fire_all(self, reason: str) -> None:
        for attempt in self._runners.values():
            attempt.fire(reason)

    async def _wait_runners(self) -> None:
        while self._runners:
            await asyncio.gather(*self._runners, return_exceptions=True)

    async def _until_stopping(self, aw: Awaitable[Any]) -> asyncio.Task[Any] | None:
        """Runs `aw` unless `shutdown()` comes first (then cancels it: None)."""
        task = asyncio.ensure_future(aw)
        stop = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()  # run() itself was cancelled: take the claim down with it
            raise
        finally:
            stop.cancel()
        if task.done():
            return task
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return None

    async def _claim_loop(self, transport: Transport) -> None:
        kinds = sorted(self._handlers)
        failures = 0
        while not self._stopping.is_set():
            free = self.concurrency - len(self._runners)
            if free <= 0:
                self._slot_freed.clear()
                await self._until_stopping(self._slot_freed.wait())
                continue
            claim = transport.claim(
                worker=self.name,
                kinds=kinds,
                max_tasks=free,
                wait_ms=self.wait_ms,
                lease_ms=self.lease_ms,
                workflow_versions=self.workflow_versions,
            )
            done = await self._until_stopping(claim)
            if done is None:
                break
            try:
                tasks = done.result()
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as e:
                why = f"{type(e).__name__}: {e}"
            except ReportError as e:
                if e.status not in TRANSIENT_STATUSES:
                    raise
                why = str(e)
            else:
                failures = 0
                for task in tasks:
                    self._start(transport, task)
                continue
            wait = transport.backoff_ms(failures)
            failures += 1
            log.warning("claim failed (%s); claiming again in %.0f ms", why, wait)
            await self._until_stopping(asyncio.sleep(wait / 1000.0))

    def _start(self, transport: Transport, task: dict[str, Any]) -> None:
        attempt = Attempt(task, transport, self.lease_ms)
        runner = asyncio.create_task(self._run_job(attempt, task))
        self._runners[runner] = attempt

        def finished(t: asyncio.Task[None]) -> None:
            self._runners.pop(t, None)
            self._slot_freed.set()
            if not t.cancelled() and t.exception() is not None:
                log.error("task %s: the worker's runner failed", task["id"], exc_info=t.exception())

        runner.add_done_callback(finished)

    async def _run_job(self, attempt: Attempt, task: dict[str, Any]) -> None:
        job = Job(task, attempt)
        handler = self._handlers.get(job.kind)
        if handler is None:
            # The server gave a kind this worker did not ask for: let another
            # worker take it rather than fail the task.
            await attempt.send_final(
                {"type": "fail", "error": f"no handler for kind {job.kind!r}", "retryable": True}
            )
            return
        log.info("task %s attempt %d: started (%s)", job.id, job.attempt, job.kind)
        handler_task = asyncio.create_task(self._call(handler, job))
        attempt.bind(handler_task)
        heartbeats = asyncio.create_task(attempt.heartbeats())
        try:
            await asyncio.wait({handler_task})
        except asyncio.CancelledError:
            handler_task.cancel()
            raise
        finally:
            heartbeats.cancel()
            await asyncio.gather(heartbeats, return_exceptions=True)
        returned: Any = None
        error: BaseException | None = None
        if handler_task.cancelled():
            error = asyncio.CancelledError()
        elif handler_task.exception() is not None:
            error = handler_task.exception()
        else:
            returned = handler_task.result()
        if isinstance(error, Held):
            error = None
        elif error is not None and not isinstance(error, asyncio.CancelledError):
            log.warning("task %s attempt %d failed", job.id, job.attempt, exc_info=error)
        event = final_event(attempt.cancelled, attempt.held, returned, error)
        if event is not None:
            # The whole text before the end: a follower never sees a
            # closed stream short of what the job wrote.
            await flush_all(attempt.outputs)
            await attempt.send_final(event)

    @staticmethod
    async def _call(handler: Handler, job: Job) -> Any:
        result = handler(job)
        if not isinstance(result, Awaitable):
            raise TypeError(f"the handler of {job.kind!r} must be an async function")
        return await result

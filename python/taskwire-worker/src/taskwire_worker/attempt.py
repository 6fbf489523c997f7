"""One claimed attempt: its lease, its reports, its signal and its last report.

Driving it (what `Worker` does for each claimed task):

1. `Attempt(task, transport, lease_ms)` from the claim answer's task.
2. `bind(handler_task)` once the job's asyncio task exists, then
   `heartbeats()` beside it until the handler ends.
3. The job reports through `send(...)` (progress, hold); every answer's
   `next` may `fire` the signal: `cancel` and `stop` cancel the handler's
   task, so a cancel reaches a running job within one heartbeat.
4. When the handler ended, `final_event(...)` (a pure function) says what
   to report last, and `send_final(...)` reports it.

Why a signal fired is `cancelled`; a stronger reason replaces a weaker one
(`stop`/`lease-lost` over `cancel` over `shutdown`): a job stopped during a
shutdown because it was replaced must not report as if it were merely
shut down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import ReportError, classify, describe
from .transport import Answer, GaveUp, Transport

__all__ = ["Attempt", "Exhausted", "Result", "final_event", "signal_for"]

log = logging.getLogger("taskwire_worker")

# Why a signal fired, weakest first.
REASONS = ("shutdown", "cancel", "lease-lost", "stop")
# Reasons after which this attempt reports nothing more.
SILENT = frozenset({"stop", "lease-lost"})
SHUTDOWN_ERROR = "worker shut down"
# Reports after which the attempt goes on, so an answer's `stop` stops it.
GOING_ON = frozenset(
    {"progress", "heartbeat", "start", "cannot_cancel", "step", "reserve", "settle", "effect"}
)


@dataclass(frozen=True)
class Result:
    """What a handler returns on success: where the result is, and its hash.

    A plain mapping `{"resultRef": ..., "resultHash": ...}` works too.
    """

    result_ref: str
    result_hash: str


@dataclass(frozen=True)
class Exhausted:
    """What a handler returns when the task's budget ran out (made by
    `budget_exhausted`): reported as `exhaust`, so the task ends `failed`
    with the error `budget-exhausted`, keeping `partial` as its result."""

    partial: Result | None = None


def _result_fields(value: Any) -> tuple[str, str] | str:
    """The result's ref and hash, or why the value is not a result."""
    ref: Any
    digest: Any
    if isinstance(value, Result):
        ref, digest = value.result_ref, value.result_hash
    elif isinstance(value, Mapping):
        ref, digest = value.get("resultRef"), value.get("resultHash")
    else:
        return f"the handler returned {type(value).__name__}, not a Result or a mapping"
    for name, field in (("resultRef", ref), ("resultHash", digest)):
        if not isinstance(field, str) or not field.strip():
            return f"the handler's result.{name}: must be a non-blank string, got {field!r}"
    return ref, digest


def final_event(
    cancelled: str | None,
    held: bool,
    returned: Any = None,
    error: BaseException | None = None,
) -> dict[str, Any] | None:
    """The last event of an attempt whose handler ended (without `atMs`).

    `returned` is the handler's value when it returned, `error` what it
    raised (an `asyncio.CancelledError` when its task was cancelled).
    None: report nothing (held already, or told to stop).
    """
    if held or cancelled in SILENT:
        return None
    if error is None and isinstance(returned, Exhausted):
        # After a cancel too: the server ends the task cancelled, keeping
        # the partial result, as it does a result.
        if returned.partial is None:
            return {"type": "exhaust"}
        partial = _result_fields(returned.partial)
        if isinstance(partial, str):
            return {"type": "fail", "error": partial, "retryable": False}
        return {"type": "exhaust", "resultRef": partial[0], "resultHash": partial[1]}
    if error is None:
        fields = _result_fields(returned)
        if isinstance(fields, str):
            # A programming error: retrying the same code cannot help.
            return {"type": "fail", "error": fields, "retryable": False}
        # Also after a cancel: the server ends the task cancelled and
        # keeps the resultRef, so the work done can be compensated.
        return {"type": "succeed", "resultRef": fields[0], "resultHash": fields[1]}
    if cancelled == "cancel":
        return {"type": "ack_cancel"}
    if cancelled == "shutdown":
        return {"type": "fail", "error": SHUTDOWN_ERROR, "retryable": True}
    if isinstance(error, asyncio.CancelledError):
        # Cancelled by someone other than this library: nothing says the
        # work is wrong, so another attempt may run it.
        return {"type": "fail", "error": "the job's task was cancelled", "retryable": True}
    return {"type": "fail", "error": describe(error), "retryable": classify(error)}


def signal_for(next_: str, event_type: str) -> str | None:
    """Why an answer's `next` fires the job's signal, if it does.

    `continue`: nothing. `cancel`: `"cancel"` (the worker answers
    `ack_cancel`). `stop`: `"stop"`, except after the attempt's own last
    report (a hold, a result, a fail, an `ack_cancel`), for which `stop` is
    the expected answer (after a `cannot_cancel` the job goes on, so a
    `stop` there stops it; a `step` report renews the lease as `progress`
    does; after a `reserve`, `settle` or `effect` the job goes on too).
    Only `next` is read, never `reason`.
    """
    if next_ == "cancel":
        return "cancel"
    if next_ == "stop" and event_type in GOING_ON:
        return "stop"
    return None


def _running_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class Attempt:
    """The reporting side of one claimed attempt (see the module's docs)."""

    def __init__(self, task: Mapping[str, Any], transport: Transport, lease_ms: int) -> None:
        self.task_id: str = task["id"]
        self.number: int = task["attempts"]
        self.transport = transport
        given = task.get("lease")
        lease: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        self.lease_ms = float(lease.get("leaseMs", lease_ms))
        clock_now = transport.clock.now_ms()
        expires = lease.get("expiresAtMs")
        # On the server's clock. Each report the server accepted moves it to
        # (the report's send time + leaseMs): the server counts from receipt,
        # so this is never later than the server's own end.
        self.lease_until = (
            float(expires) if isinstance(expires, int | float) else (clock_now + self.lease_ms)
        )
        grace = task.get("unknownGraceMs")
        # After the lease, the task waits `unknownGraceMs` in `unknown`, where a
        # report of this attempt still brings it back; without the task's own
        # value, the server's default is unknown here, so none is counted.
        self.grace_ms = float(grace) if isinstance(grace, int | float) else 0.0
        self.cancelled: str | None = None
        self.held = False
        self._handler: asyncio.Task[Any] | None = None
        # The job's output streams by name (output.py), flushed before the
        # attempt's last report.
        self.outputs: dict[str, Any] = {}

    def bind(self, handler: asyncio.Task[Any]) -> None:
        self._handler = handler
        if self.cancelled is not None:
            handler.cancel()

    def fire(self, reason: str) -> None:
        """Fires the job's signal (or strengthens its reason).

        The job's task is cancelled, unless it is the task running now: an
        answer to the job's own report (a `progress`, a `step`), whose
        caller raises `Cancelled` through `check()` right after. Cancelling
        the running task as well would leave a cancellation pending that
        `uncancel()` does not take back before Python 3.13, so a
        `cannot_cancel` answering that cancel would itself be cancelled at
        its first `await`.
        """
        current = self.cancelled
        if current is not None and REASONS.index(reason) <= REASONS.index(current):
            return
        self.cancelled = reason
        if current is None:
            log.info("task %s attempt %d: signal fired (%s)", self.task_id, self.number, reason)
            if (
                self._handler is not None
                and not self._handler.done()
                and self._handler is not _running_task()
            ):
                self._handler.cancel()

    def resume(self) -> None:
        """Takes back a `cancel` the job cannot honour (after `cannot_cancel`):
        the signal is clear again and the job's task may await normally."""
        if self.cancelled != "cancel":
            return
        self.cancelled = None
        if self._handler is not None and self._handler is asyncio.current_task():
            while self._handler.uncancel() > 0:
                pass

    @property
    def silent(self) -> bool:
        return self.cancelled in SILENT

    def give_up_at_ms(self) -> float:
        return self.lease_until + self.grace_ms

    async def send(self, event_type: str, **fields: Any) -> Answer | None:
        """Reports one event of this attempt; None when it was not delivered
        (the signal then fired `lease-lost`) or the attempt must be silent."""
        if self.silent:
            return None
        clock = self.transport.clock

        def make_event() -> dict[str, Any]:
            return {
                "type": event_type,
                "atMs": round(clock.now_ms()),
                "attempt": self.number,
                **fields,
            }

        sent_at = clock.now_ms()
        try:
            answer = await self.transport.report(self.task_id, make_event, self.give_up_at_ms())
        except (GaveUp, ReportError, httpx.HTTPError) as e:
            # Either way this attempt can no longer report; for the server
            # its lease lapses and, after the grace, another attempt runs.
            log.warning("task %s attempt %d: %s", self.task_id, self.number, e)
            self.fire("lease-lost")
            return None
        if answer.next == "continue":
            self.lease_until = max(self.lease_until, sent_at + self.lease_ms)
        reason = signal_for(answer.next, event_type)
        if reason is not None:
            self.fire(reason)
        return answer

    async def heartbeats(self) -> None:
        """A heartbeat every third of the lease until cancelled or silent."""
        while not self.silent:
            await asyncio.sleep(self.lease_ms / 3000.0)
            await self.send("heartbeat")

    async def send_final(self, event: Mapping[str, Any]) -> Answer | None:
        fields = {k: v for k, v in event.items() if k != "type"}
        answer = await self.send(str(event["type"]), **fields)
        if answer is not None:
            log.info(
                "task %s attempt %d: %s -> %s (%s)",
                self.task_id,
                self.number,
                event["type"],
                answer.state,
                answer.reason,
            )
        return answer

"""What a handler gets: the claimed task, and the few calls a job makes.

The job never sees a signature, a lease, a heartbeat or a retry: the
worker does those. Cancellation arrives as asyncio's own: the job's task
is cancelled (`asyncio.CancelledError` at its next `await`) and
`job.cancelled` says why. Code that runs long between awaits calls
`job.check()`; seed 001 asks for a check before and after each tool call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn, TypeVar

from .attempt import Attempt
from .budget import Amount, effect, recorded_effect, spend
from .errors import Cancelled, ConfigError
from .output import Output, flush_all
from .steps import Checkpoint, StepOutput, Steps, Usage, run_step

__all__ = ["Held", "Job"]

T = TypeVar("T")
R = TypeVar("R")


class Held(BaseException):
    """Raised by `Job.hold()` to end the handler: the task waits for a person.

    A `BaseException`, like `asyncio.CancelledError`, so a handler's
    `except Exception` does not swallow it and go on working on a task that
    is no longer its own. The worker catches it; a handler never needs to.
    """


class Job:
    """One attempt at one task, as a handler sees it.

    - `id`, `kind`, `input`: the task's.
    - `attempt`: the attempt this job runs (the claimed task's `attempts`);
      every report carries it, so a replaced job cannot overwrite its
      successor.
    - `task`: the claimed task as the server sent it: `decision`,
      `decisionReason`, `artifactRef`, `artifactHash` after a person
      decided on a hold; `error` after a failed attempt; `deadlineAtMs`.
    - `cancelled`: None while the job may go on; else why it must stop:
      `"cancel"` (a person cancelled; the worker answers `ack_cancel`),
      `"stop"` (the attempt was replaced or ended: nothing more is
      reported), `"lease-lost"` (the worker could not reach the server
      before the lease ran out), `"shutdown"` (the worker is shutting
      down; the task goes back to the queue).
    """

    def __init__(self, task: Mapping[str, Any], attempt: Attempt) -> None:
        self.task: Mapping[str, Any] = task
        self.id: str = task["id"]
        self.kind: str = str(task.get("kind", ""))
        self.input: Any = task.get("input")
        self.attempt: int = task["attempts"]
        self._attempt = attempt
        self._steps = Steps(task)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, kind={self.kind!r}, attempt={self.attempt})"

    @property
    def cancelled(self) -> str | None:
        return self._attempt.cancelled

    @property
    def deadline_at_ms(self) -> float | None:
        """The task's execution deadline on the server's clock, if it has one."""
        value = self.task.get("deadlineAtMs")
        return float(value) if isinstance(value, int | float) else None

    def now_ms(self) -> float:
        """The server's clock as this worker knows it (compare with deadlines)."""
        return self._attempt.transport.clock.now_ms()

    def key(self, step: str, action: str) -> str:
        """An idempotency key for an external write: `"<taskId>:<step>:<action>"`.

        The same in every attempt of the task, so a vendor or a table with a
        unique key turns a write repeated by a later attempt into a no-op.
        """
        for name, value in (("step", step), ("action", action)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name}: must be a non-blank string, got {value!r}")
        return f"{self.id}:{step}:{action}"

    def output(self, name: str) -> Output:
        """The writer on the task's output stream `name` (`"draft"`, `"log"`;
        PROTOCOL.md §Live output): `await job.output("draft").write(token)`.
        Small writes are batched; what is buffered is sent before the
        attempt's last report. The same name gives the same writer."""
        out = self._attempt.outputs.get(name)
        if out is None:
            out = Output(self._attempt, name)
            self._attempt.outputs[name] = out
        return out

    def check(self) -> None:
        """Raises `Cancelled` if the job's signal fired; cheap, call it often."""
        reason = self._attempt.cancelled
        if reason is not None:
            raise Cancelled(reason)

    async def checkpoint(self) -> None:
        """`check()` after letting the event loop run once, so that a cancel
        answered to a heartbeat meanwhile is seen here."""
        await asyncio.sleep(0)
        self.check()

    def step_checkpoint(self, name: str) -> Checkpoint | None:
        """Step `name`'s checkpoint, when an earlier attempt (or this one)
        finished it with one; else None. (Named apart from `checkpoint()`,
        the cancel check; the Node library calls it `stepCheckpoint`.)"""
        if not isinstance(name, str):
            raise ConfigError(f"name: must be a string, got {type(name).__name__}")
        return self._steps.checkpoints.get(name)

    def step_done(self, name: str) -> bool:
        """True when step `name` is finished (succeeded or skipped), as the
        claimed task says or this attempt reported: no report moves it again."""
        if not isinstance(name, str):
            raise ConfigError(f"name: must be a string, got {type(name).__name__}")
        return name in self._steps.finished

    async def step(
        self,
        name: str,
        run: Callable[[], Awaitable[StepOutput]],
        *,
        label: str | None = None,
    ) -> Checkpoint:
        """Runs step `name` of the task's plan (PROTOCOL.md §Steps), unless
        it is finished with a checkpoint: then returns that checkpoint and
        does not call `run`, so a new attempt starts at the first step not
        yet finished.

        Otherwise reports the step `running` (with `label`, what the page
        shows; it renews the lease), awaits `run()`, and reports it
        `succeeded` with the `StepOutput`'s checkpoint and usage; returns
        the checkpoint. When `run` raises, the step is reported `failed`
        and the error re-raised as is: the attempt ends as that error says.
        A cancel raises `Cancelled`, as `progress` does. A report the
        server refuses raises `StepError` (final) before `run` is called:
        `reason` is `"unknown-step"`, `"no-plan"` or `"step-conflict"`.
        """
        return await run_step(self._attempt, self._steps, self.check, name, run, label)

    async def spend(
        self,
        name: str,
        estimate: Amount,
        call: Callable[[], Awaitable[tuple[T, Usage]]],
        *,
        step: str | None = None,
    ) -> T:
        """Runs one paid call within the task's budget (PROTOCOL.md §Budgets
        and side effects): reserves `estimate` (the call's ceiling: give the
        model the same max tokens), awaits `call()`, which returns
        `(value, Usage)`, settles that usage (releasing the rest of the
        reservation) and returns the value. A call that raises settles
        nothing used, releasing the whole reservation, and its error is
        re-raised.

        `name` names the call within the attempt (`"draft"`,
        `"draft-retry-1"`): the reservation's id is `"<attempt>:<name>"`, so
        a resent report is a duplicate and a new attempt reserves afresh.
        `step` charges it to a step of the plan. A refused reservation
        raises `OverBudget` (final) and the call is not made.
        """
        return await spend(self._attempt, self.check, name, estimate, call, step)

    async def effect(self, step: str, action: str, write: Callable[[str], Awaitable[str]]) -> str:
        """Makes one external write at most once for the task: `write(key)`
        gets `key(step, action)` (the same in every attempt: pass it to the
        outside system, which must deduplicate by it) and returns the id of
        what it wrote. The write is then recorded under `(step, action)`, and
        the id recorded first is returned: a write made again after a crash
        between the write and its record answers with the first one's id.

        A write the claimed task already records is not made again. A record
        the server refuses raises `FatalError` naming its reason.
        """
        key = self.key(step, action)
        return await effect(self._attempt, self.check, self.task, key, step, action, write)

    def recorded_effect(self, step: str, action: str) -> str | None:
        """The resource id the claimed task records under `(step, action)`:
        what `effect` returns without writing."""
        return recorded_effect(self.task, step, action)

    async def progress(self, percent: int, cursor: str = "") -> None:
        """Reports progress (an integer 0-100, only upward) and a cursor.

        The answer may carry a cancel: the job's task is then cancelled,
        and this call raises `Cancelled`.
        """
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
            raise ConfigError(f"percent: must be an integer from 0 to 100, got {percent!r}")
        if not isinstance(cursor, str):
            raise ConfigError(f"cursor: must be a string, got {type(cursor).__name__}")
        self.check()
        await self._attempt.send("progress", progress=percent, cursor=cursor)
        self.check()

    async def cannot_cancel(self, reason: str | None = None) -> None:
        """Answers a cancel the work cannot honour (an external write already
        done, say): the task shows `cancel_ineffective` and the job goes on.

        Call it from the handler, in the `except asyncio.CancelledError` of
        a `"cancel"`; the job's task is then uncancelled. Whatever the job
        ends with, the task ends `cancelled` (a result is kept for
        compensation, never delivered).
        """
        if self._attempt.cancelled != "cancel":
            raise RuntimeError(
                f"cannot_cancel: only after a cancel, but job.cancelled is {self.cancelled!r}"
            )
        if reason is not None and not isinstance(reason, str):
            raise ConfigError(f"reason: must be a string, got {type(reason).__name__}")
        fields: dict[str, Any] = {} if reason is None else {"reason": reason}
        self._attempt.resume()
        await self._attempt.send("cannot_cancel", **fields)
        self.check()

    async def hold(
        self, artifact_ref: str, artifact_hash: str, question: str | None = None
    ) -> NoReturn:
        """Ends the job: the task waits in `waiting_approval` for a person.

        A decision (`approve`, `request_changes`) queues the task again; the
        next attempt reads it in `job.task["decision"]` and
        `job.task["decisionReason"]`, with this artifact in
        `job.task["artifactRef"]`/`["artifactHash"]`. Never returns.
        """
        for name, value in (("artifact_ref", artifact_ref), ("artifact_hash", artifact_hash)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name}: must be a non-blank string, got {value!r}")
        if question is not None and not isinstance(question, str):
            raise ConfigError(f"question: must be a string, got {type(question).__name__}")
        self.check()
        await flush_all(self._attempt.outputs)
        fields: dict[str, Any] = {"artifactRef": artifact_ref, "artifactHash": artifact_hash}
        if question is not None:
            fields["question"] = question
        await self._attempt.send("hold", **fields)
        # A cancel answered to the hold (the task was cancelling) is still
        # to be acknowledged; an undelivered hold is `lease-lost`.
        self.check()
        self._attempt.held = True
        raise Held()

    async def vendor(
        self,
        step: str,
        *,
        submit: Callable[[str], Awaitable[T]],
        poll: Callable[[T], Awaitable[R | object]],
        lookup: Callable[[str], Awaitable[T | None]] | None = None,
        timeout_ms: float | None = None,
        first_delay_ms: float = 1000.0,
        max_delay_ms: float = 30000.0,
    ) -> R:
        """Submit once, then poll: see `taskwire_worker.vendor.submit_once_then_poll`."""
        from .vendor import submit_once_then_poll

        return await submit_once_then_poll(
            self,
            step,
            submit=submit,
            poll=poll,
            lookup=lookup,
            timeout_ms=timeout_ms,
            first_delay_ms=first_delay_ms,
            max_delay_ms=max_delay_ms,
        )

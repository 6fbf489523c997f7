"""Submit once, query many: a vendor's asynchronous job inside a taskwire job.

OCR, video and batch model APIs take a job (`submit`) and are then asked
about it (`poll`) until it ends (seed 004). The helper keeps the three
rules that stop a second paid job:

1. `submit(key)` is called with `job.key(step, "submit")`, the same key
   in every attempt of the task: a vendor that dedups by it makes a new
   attempt's submit a no-op.
2. A submit whose outcome is unknown (the request may have reached the
   vendor, but no answer came back) is never repeated blindly. With
   `lookup(key)` the helper asks the vendor what it has under the key and
   polls that; without, it fails the job final with `SubmitUnknownError`,
   so a person (or a lookup added later) decides. A submit that surely
   never arrived (connection refused, a 4xx, 429 or 503) raises as any
   error: it is classified, and a retryable one gets a new attempt.
3. Polls back off exponentially with jitter, up to `max_delay_ms`, until
   the task's deadline or `timeout_ms`; up to 5 retryable poll errors in
   a row are waited out, the next one or any final one ends the job.

| submit error | outcome |
|---|---|
| `SubmitUnknownError` raised by `submit` | unknown |
| `httpx.ReadTimeout`, `WriteTimeout`, `ReadError`, `WriteError`, `RemoteProtocolError` | unknown |
| `TimeoutError`, `ConnectionResetError`, `BrokenPipeError` | unknown |
| HTTP 500, 502, 504 | unknown |
| anything else (`ConnectError`, `ConnectTimeout`, 4xx, 429, 503, ...) | not submitted |
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import httpx

from .errors import (
    ConfigError,
    RetryableError,
    SubmitUnknownError,
    VendorTimeoutError,
    classify,
    describe,
    http_status,
)

if TYPE_CHECKING:
    from .job import Job

__all__ = ["MAX_POLL_ERRORS", "PENDING", "outcome_unknown", "submit_once_then_poll"]

T = TypeVar("T")
R = TypeVar("R")


class _Pending:
    """What `poll` returns while the vendor's job runs."""

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()
MAX_POLL_ERRORS = 5

_UNKNOWN_TYPES = (
    SubmitUnknownError,
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    TimeoutError,
    ConnectionResetError,
    BrokenPipeError,
)


def outcome_unknown(exc: BaseException) -> bool:
    """Whether a submit that raised `exc` may have created the vendor's job
    (the module's table)."""
    if isinstance(exc, _UNKNOWN_TYPES):
        return True
    return http_status(exc) in (500, 502, 504)


def _bad_delay(name: str, value: float) -> ConfigError:
    return ConfigError(f"{name}: must be a number > 0, got {value!r}")


async def submit_once_then_poll(
    job: Job,
    step: str,
    *,
    submit: Callable[[str], Awaitable[T]],
    poll: Callable[[T], Awaitable[R | object]],
    lookup: Callable[[str], Awaitable[T | None]] | None = None,
    timeout_ms: float | None = None,
    first_delay_ms: float = 1000.0,
    max_delay_ms: float = 30000.0,
) -> R:
    """Submits the vendor job of `step` once, then polls it to its result.

    `submit(key)` returns a handle (the vendor's job id, say); `poll(handle)`
    returns `PENDING` while the job runs, its result when done, and raises
    when the vendor says it failed. `lookup(key)` returns the handle of the
    job the vendor has under `key`, or None when it has none. See the
    module's docs for what happens on each error.
    """
    for name, value in (("first_delay_ms", first_delay_ms), ("max_delay_ms", max_delay_ms)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise _bad_delay(name, value)
    if timeout_ms is not None and (
        isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float) or timeout_ms <= 0
    ):
        raise ConfigError(f"timeout_ms: must be a number > 0 or None, got {timeout_ms!r}")
    key = job.key(step, "submit")
    job.check()
    try:
        handle = await submit(key)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        if not outcome_unknown(e):
            raise
        handle = await _resolve_unknown(job, step, key, lookup, e)
    job.check()
    return await _poll_until_done(job, step, handle, poll, timeout_ms, first_delay_ms, max_delay_ms)


async def _resolve_unknown(
    job: Job,
    step: str,
    key: str,
    lookup: Callable[[str], Awaitable[T | None]] | None,
    error: Exception,
) -> T:
    why = describe(error)
    if lookup is None:
        raise SubmitUnknownError(
            f"step {step!r}: the submit under key {key!r} may or may not have reached the "
            f"vendor ({why}); it is not repeated blindly: resolve it with the vendor, or give "
            "the helper a lookup(key)"
        ) from error
    job.check()
    found = await lookup(key)
    job.check()
    if found is None:
        # Known now: nothing was created. A new attempt submits under the
        # same key, which the vendor dedups should the first one land late.
        raise RetryableError(
            f"step {step!r}: the submit under key {key!r} failed ({why}) and the vendor "
            "has no job under that key"
        ) from error
    return found


async def _poll_until_done(
    job: Job,
    step: str,
    handle: T,
    poll: Callable[[T], Awaitable[R | object]],
    timeout_ms: float | None,
    first_delay_ms: float,
    max_delay_ms: float,
) -> R:
    ends: list[float] = []
    if timeout_ms is not None:
        ends.append(job.now_ms() + timeout_ms)
    if job.deadline_at_ms is not None:
        ends.append(job.deadline_at_ms)
    end = min(ends) if ends else None
    rng = random.Random()
    delay = first_delay_ms
    errors = 0
    while True:
        job.check()
        try:
            value = await poll(handle)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            errors += 1
            if not classify(e) or errors > MAX_POLL_ERRORS:
                raise
        else:
            errors = 0
            if value is not PENDING:
                return cast(R, value)
        job.check()
        wait = min(delay, max_delay_ms) * rng.uniform(0.5, 1.0)
        if end is not None and job.now_ms() + wait > end:
            raise VendorTimeoutError(
                f"step {step!r}: the vendor's job {handle!r} was still pending at "
                + ("the task's deadline" if end == job.deadline_at_ms else f"{timeout_ms} ms")
            )
        await asyncio.sleep(wait / 1000.0)
        delay = min(delay * 2.0, max_delay_ms)

"""What a job's error means for its task: retried by a new attempt, or final.

A job that raises is reported as a `fail`; whether that `fail` is
`retryable` decides whether the server queues the task again (while
attempts are left) or fails it for good. Raise `RetryableError` or
`FatalError` to say so yourself; anything else goes through `classify`,
whose table is the README's:

| error | retryable |
|---|---|
| `RetryableError` | yes |
| `FatalError` (and `SubmitUnknownError`, `StepError`) | no |
| `httpx.TimeoutException`, `httpx.NetworkError`, `httpx.RemoteProtocolError` | yes |
| `TimeoutError` (`asyncio.timeout` too), `ConnectionError` | yes |
| `httpx.HTTPStatusError` or any error with an `int` `status_code`/`status`: 408, 429, 5xx | yes |
| the same with any other status (400, 401, 403, 404, 409, 422, ...) | no |
| an `ExceptionGroup` | yes when every member is |
| anything else (`ValueError`, `KeyError`, `TypeError`, a JSON error, ...) | no |

A programming error or bad input fails at once instead of burning every
attempt on the same bug (seed 001 section 7).
"""

from __future__ import annotations

import asyncio

import httpx

__all__ = [
    "Cancelled",
    "ConfigError",
    "FatalError",
    "ReportError",
    "RetryableError",
    "SubmitUnknownError",
    "VendorTimeoutError",
    "classify",
    "describe",
    "http_status",
]


class RetryableError(Exception):
    """The work may succeed if tried again: a new attempt takes the task."""


class FatalError(Exception):
    """Trying again cannot help: the task fails now, whatever attempts are left."""


class SubmitUnknownError(FatalError):
    """A vendor submit may or may not have happened (the answer was lost).

    Final on purpose: submitting again could start a second paid job. Give
    the vendor helper a `lookup(key)` to resolve it, or resolve it by hand.
    """


class VendorTimeoutError(FatalError):
    """A vendor job was still pending at the helper's timeout or the task's deadline."""


class ConfigError(ValueError):
    """A bad worker option or argument; the message names the field."""


class ReportError(Exception):
    """The server refused a report or a claim for a reason no retry can fix.

    `status` and `code` are the HTTP status and the error `code` the server
    answered (`code` is empty when the body was not a taskwire error).
    """

    def __init__(self, message: str, status: int, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Cancelled(asyncio.CancelledError):
    """Raised by `Job.check()` once the job's signal fired.

    A subclass of `asyncio.CancelledError`, so one `except
    asyncio.CancelledError` (or none) handles both this and the task
    cancellation the worker sends at the same time. `reason` is
    `job.cancelled`: `"cancel"`, `"stop"`, `"lease-lost"` or `"shutdown"`.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"job cancelled: {reason}")
        self.reason = reason


RETRYABLE_STATUSES = frozenset({408, 429})


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an error carries: httpx's, or a vendor SDK's
    `status_code`/`status` attribute (most SDKs name it one of these)."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code
    for name in ("status_code", "status"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _status_retryable(status: int) -> bool:
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


def classify(exc: BaseException) -> bool:
    """Whether `exc` is worth another attempt (the module's table)."""
    if isinstance(exc, RetryableError):
        return True
    if isinstance(exc, FatalError):
        return False
    if isinstance(exc, BaseExceptionGroup):
        return all(classify(inner) for inner in exc.exceptions)
    if isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError):
        return True
    if isinstance(exc, TimeoutError | ConnectionError):
        return True
    status = http_status(exc)
    if status is not None:
        return _status_retryable(status)
    return False


# A fail's `error` is free text; a bound keeps a huge message (a whole
# response body in an exception) well under the server's 64 KiB body limit.
MAX_ERROR_CHARS = 2000


def describe(exc: BaseException) -> str:
    """The `error` text of a `fail`: the error's type and message."""
    text = str(exc)
    name = type(exc).__name__
    described = f"{name}: {text}" if text else name
    if len(described) > MAX_ERROR_CHARS:
        described = described[: MAX_ERROR_CHARS - 3] + "..."
    return described

"""Live output (PROTOCOL.md §Live output): a job's text as it writes it.

`job.output("draft")` gives an `Output`; `await out.write(text)` only
buffers. The buffer goes out as one chunk when it reaches `FLUSH_UNITS`,
`FLUSH_AFTER_S` after its first write, on `flush()`, and before the
attempt's last report, so a handler writing a token at a time sends a few
requests a second, and a follower never sees the end before the text.

Each chunk is addressed by `(attempt, offset)` in UTF-16 code units, so a
resend is safe: one whose first send landed is a `duplicate-chunk`. A
chunk is resent under the same address after a network error, 408, 429
or 503, until the attempt's lease could no longer be alive. A newer
attempt (`stale-attempt`) or the task's end (`output-closed`) ends the
stream: later writes raise `Cancelled`; any other refusal `ReportError`.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

import httpx

from .errors import Cancelled, ConfigError, ReportError
from .transport import TRANSIENT_STATUSES, _encode, _error_of, new_id, retry_after_ms

if TYPE_CHECKING:
    from .attempt import Attempt

__all__ = ["FLUSH_AFTER_S", "FLUSH_UNITS", "Output", "utf16_len"]

FLUSH_UNITS = 4096
FLUSH_AFTER_S = 0.1
# The most units one request carries (the server's limit is 65,536).
CHUNK_UNITS = 16 * 1024
_NAME = re.compile(r"[a-z0-9_-]{1,64}")
_FENCED = ("stale-attempt", "output-closed")


def utf16_len(text: str) -> int:
    """The length of `text` in UTF-16 code units (the protocol's offsets)."""
    return len(text.encode("utf-16-le")) // 2


def _cut(text: str, units: int) -> int:
    """How many characters make at most `units` UTF-16 units (never half one)."""
    count = 0
    for i, ch in enumerate(text):
        count += 2 if ord(ch) > 0xFFFF else 1
        if count > units:
            return i
    return len(text)


class Output:
    """A job's writer on one output stream (see the module's docs)."""

    def __init__(self, attempt: Attempt, name: str) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(
                f"stream: must be 1 to 64 characters of a-z, 0-9, - and _, got {name!r}"
            )
        self.name = name
        self._attempt = attempt
        self.acknowledged = 0
        self._pending = ""
        self._timer: asyncio.TimerHandle | None = None
        self._ended: BaseException | None = None
        self._sending = asyncio.Lock()

    async def write(self, text: str) -> None:
        """Adds `text`; sent at once past `FLUSH_UNITS`, else within
        `FLUSH_AFTER_S`. Raises what ended the stream, if it ended."""
        if not isinstance(text, str):
            raise ConfigError(f"text: must be a string, got {type(text).__name__}")
        if self._ended is not None:
            raise self._ended
        self._pending += text
        if utf16_len(self._pending) >= FLUSH_UNITS:
            await self.flush()
        elif self._timer is None and self._pending:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(FLUSH_AFTER_S, self._flush_later)

    def _flush_later(self) -> None:
        self._timer = None
        task = asyncio.ensure_future(self.flush())
        # An error is kept in `_ended` and raised to the next write.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def flush(self) -> None:
        """Sends what is buffered; returns when the server holds it."""
        async with self._sending:
            while self._pending:
                if self._ended is not None:
                    raise self._ended
                cut = _cut(self._pending, CHUNK_UNITS)
                chunk, self._pending = self._pending[:cut], self._pending[cut:]
                try:
                    await self._send(self.acknowledged, chunk)
                except BaseException as e:
                    self._pending = chunk + self._pending
                    if isinstance(e, Cancelled | ReportError):
                        self._ended = e
                    raise
                self.acknowledged += utf16_len(chunk)
            if self._ended is not None:
                raise self._ended

    async def _send(self, offset: int, text: str) -> None:
        a = self._attempt
        t = a.transport
        chunk = {"attempt": a.number, "offset": offset, "text": text}
        body = _encode({"taskId": a.task_id, "stream": self.name, **chunk})
        path = f"/v1/tasks/{a.task_id}/output/{self.name}"
        failures = 0
        while True:
            try:
                resp = await t._post(path, new_id("out"), body)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as e:
                wait, why = t.backoff_ms(failures), f"{type(e).__name__}: {e}"
            else:
                if resp.status_code == 200:
                    return
                code, message = _error_of(resp)
                if code in _FENCED:
                    raise Cancelled("stop")
                if resp.status_code not in TRANSIENT_STATUSES:
                    raise ReportError(
                        f"output {self.name}: {resp.status_code} {code}: {message}",
                        resp.status_code,
                        code,
                    )
                wait = max(retry_after_ms(resp), t.backoff_ms(failures))
                why = f"{resp.status_code} {code}"
            failures += 1
            if t.clock.now_ms() + wait > a.give_up_at_ms():
                raise ReportError(f"output {self.name}: not delivered in time: {why}", 0, "gave-up")
            await asyncio.sleep(wait / 1000.0)


async def flush_all(outputs: dict[str, Any]) -> None:
    """Sends every stream's buffer (before the attempt's last report);
    a stream that cannot be sent is logged by its writer's next call."""
    for out in list(outputs.values()):
        try:
            await out.flush()
        except (Cancelled, ReportError):
            pass

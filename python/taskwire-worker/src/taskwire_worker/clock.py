"""The server's clock as seen from the worker.

A report's `atMs` and its `webhook-timestamp` must be within 5 minutes of
the server's clock (PROTOCOL.md, Workers > Reports), so a worker whose
local clock is 10 minutes off would be refused every report. The worker
therefore never sends its local time: it keeps an offset to the server's
clock, measured from each claim answer's `nowMs` (to the millisecond),
or from an answer's `Date` header (to the second) when a report was
refused for its time before any claim answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

__all__ = ["ServerClock", "system_now_ms"]


def system_now_ms() -> float:
    """The local wall clock in milliseconds since the epoch."""
    return time.time() * 1000.0


class ServerClock:
    """Local time plus an offset: the server's clock, as well as it is known.

    `now` is the local clock (injectable: a test runs a worker whose clock
    is 10 minutes off). The offset starts at 0 and is set by `observe`.
    """

    def __init__(self, now: Callable[[], float] = system_now_ms) -> None:
        self._now = now
        self._offset_ms = 0.0

    @property
    def offset_ms(self) -> float:
        """How far the server's clock is ahead of the local one."""
        return self._offset_ms

    def local_ms(self) -> float:
        """The local clock, uncorrected."""
        return self._now()

    def now_ms(self) -> float:
        """The server's clock as estimated now."""
        return self._now() + self._offset_ms

    def observe(self, server_ms: float, local_ms: float | None = None) -> None:
        """Takes the server's `nowMs`, read when the answer arrived.

        The answer's arrival (not the request's midpoint) is the local
        reading: a held claim is answered up to 25 s after it was sent, and
        the server reads its clock when it answers.
        """
        local = self._now() if local_ms is None else local_ms
        self._offset_ms = server_ms - local

    def observe_date(self, date_header: str | None) -> bool:
        """Resynchronises from an HTTP `Date` header (second precision).

        Used only when the server refused a report for its time: the `Date`
        of that very answer is the server's clock. Returns whether the
        header could be read.
        """
        if not date_header:
            return False
        try:
            server = parsedate_to_datetime(date_header)
        except (TypeError, ValueError, IndexError):
            return False
        # The header is truncated to the second: add half a second, the
        # expected truncation, so the estimate is off by at most 0.5 s.
        self.observe(server.timestamp() * 1000.0 + 500.0)
        return True

"""Signed requests to the server: claims and reports, with their retries.

Both are signed as Standard Webhooks (PROTOCOL.md, Executor callback):
the content `"{webhook-id}.{webhook-timestamp}.{body}"`, HMAC-SHA256 with
the tenant's callback secret. The rules that make retries safe:

- A report that met a network error, 408, 429, 502, 503 or 504 is sent
  again with the SAME `webhook-id` and the SAME body, re-signed with a
  fresh `webhook-timestamp`: if the first one was applied, the server
  answers `duplicate-callback` and nothing happens twice; the same signed
  bytes twice would only be a replay. `Retry-After` is honoured, the
  backoff is exponential with jitter, and it gives up at `give_up_at_ms`
  (the last moment the attempt's lease could still be alive).
- A report or claim refused for its time (401 naming `webhook-timestamp`,
  400 `clock-skew`) was not recorded: the clock is resynchronised from the
  answer's `Date` header and the request rebuilt and sent once more.
- A claim is never resent as it was (the server answers the same signed
  bytes `claim-replayed`): each try is a new request with a new id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from standardwebhooks import Webhook

from .clock import ServerClock
from .errors import ReportError

__all__ = ["TRANSIENT_STATUSES", "Answer", "GaveUp", "Transport", "new_id"]

log = logging.getLogger("taskwire_worker")

# Answers that judged nothing: the same request may be sent again. 502 and
# 504 come from a proxy in front of the server; resending is safe because
# the id is the same.
TRANSIENT_STATUSES = frozenset({408, 429, 502, 503, 504})
NEXT_VALUES = ("continue", "cancel", "stop")


def new_id(prefix: str) -> str:
    """A fresh request id (`cb_…`, `clm_…`): 128 random bits."""
    return f"{prefix}_{secrets.token_urlsafe(16)}"


class GaveUp(Exception):
    """A report could not be delivered before its attempt's lease ran out."""


@dataclass(frozen=True)
class Answer:
    """A judged report: what the executor does `next`, and why."""

    next: str
    attempt: int | None
    reason: str
    changed: bool
    duplicate: bool
    state: str
    body: Mapping[str, Any] = field(repr=False)
    # For an `effect`: the resource id recorded first under its key (core's
    # answer), which may not be the one this report sent.
    resource_id: str | None = None

    @property
    def taken(self) -> bool:
        """Whether the report was taken: it changed the task, or repeated
        what the task says already (`duplicate`, a resend included). One
        that is neither was refused, and `reason` says why; `next` speaks
        of the attempt, not of the report (core's `work::report_taken`,
        PROTOCOL.md §Steps)."""
        return self.changed or self.duplicate

    @staticmethod
    def parse(body: Any) -> Answer:
        if not isinstance(body, dict):
            raise ReportError("answer: not a JSON object", 200, "bad-answer")
        nxt = body.get("next")
        if nxt not in NEXT_VALUES:
            # Never a silent default: a server without `next` predates the
            # worker protocol, and guessing from `reason` is what `next`
            # exists to avoid.
            raise ReportError(
                f"answer.next: must be one of continue, cancel, stop, got {nxt!r}",
                200,
                "bad-answer",
            )
        attempt = body.get("attempt")
        return Answer(
            next=nxt,
            attempt=attempt if isinstance(attempt, int) else None,
            reason=str(body.get("reason", "")),
            changed=bool(body.get("changed", False)),
            duplicate=bool(body.get("duplicate", False)),
            state=str(body.get("state", "")),
            body=body,
            resource_id=resource if isinstance(resource := body.get("resourceId"), str) else None,
        )


def _encode(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _error_of(resp: httpx.Response) -> tuple[str, str]:
    """The taskwire error's `code` and `message`, or ("", body text)."""
    try:
        err = resp.json().get("error", {})
        return str(err.get("code", "")), str(err.get("message", ""))
    except (ValueError, AttributeError):
        return "", resp.text[:500]


def _is_time_refusal(status: int, code: str, message: str) -> bool:
    """A request refused only for its time, so a resync can fix it."""
    if status == 400 and code == "clock-skew":
        return True
    return status == 401 and "webhook-timestamp" in message and "clock" in message


def retry_after_ms(resp: httpx.Response) -> float:
    """`Retry-After` in ms (seconds on the wire), 0 when absent; capped at a minute."""
    value = resp.headers.get("retry-after", "")
    try:
        return min(max(float(value), 0.0), 60.0) * 1000.0
    except ValueError:
        return 0.0


class Transport:
    """One worker's signed requests, over one pooled `httpx.AsyncClient`."""

    BACKOFF_BASE_MS = 200.0
    BACKOFF_CAP_MS = 5000.0

    def __init__(
        self,
        *,
        url: str,
        tenant: str,
        secret: str,
        clock: ServerClock,
        client: httpx.AsyncClient,
        rng: random.Random | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.tenant = tenant
        self.clock = clock
        self.client = client
        self._webhook = Webhook(secret)
        self._rng = rng or random.Random()

    def backoff_ms(self, failures: int) -> float:
        """Exponential from 200 ms, capped at 5 s, with jitter (50-100 %)."""
        ceiling = min(self.BACKOFF_CAP_MS, self.BACKOFF_BASE_MS * 2.0 ** min(failures, 16))
        return ceiling * self._rng.uniform(0.5, 1.0)

    def sign(self, msg_id: str, body: str) -> dict[str, str]:
        """The three Standard Webhooks headers for `body`, timestamped now
        on the server's clock (seconds)."""
        seconds = int(self.clock.now_ms() // 1000)
        stamp = datetime.fromtimestamp(seconds, tz=UTC)
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(seconds),
            "webhook-signature": self._webhook.sign(msg_id, stamp, body),
            "content-type": "application/json",
        }

    async def _post(
        self, path: str, msg_id: str, body: str, limits: httpx.Timeout | None = None
    ) -> httpx.Response:
        headers = self.sign(msg_id, body)
        headers["taskwire-tenant"] = self.tenant
        kwargs: dict[str, Any] = {"content": body.encode("utf-8"), "headers": headers}
        if limits is not None:
            kwargs["timeout"] = limits
        return await self.client.post(f"{self.url}{path}", **kwargs)

    async def claim(
        self,
        *,
        worker: str,
        kinds: list[str],
        max_tasks: int,
        wait_ms: int,
        lease_ms: int,
        workflow_versions: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """One claim (`POST /v1/work/claim`): the tasks it took, maybe none.

        Raises `httpx.TransportError` or `ReportError`; the caller decides
        whether to try again (a `ReportError` whose `status` is in
        `TRANSIENT_STATUSES` is worth it).
        """
        body = _encode(
            {
                "worker": worker,
                "kinds": kinds,
                "max": max_tasks,
                "waitMs": wait_ms,
                "leaseMs": lease_ms,
                **({"workflowVersions": workflow_versions} if workflow_versions else {}),
            }
        )
        # The hold plus a margin: a read timeout below the hold would cut
        # every idle claim, and a task claimed in a cut answer waits out a
        # lease and a grace period before anyone else may take it.
        timeout = httpx.Timeout(wait_ms / 1000.0 + 15.0, connect=5.0)
        resynced = False
        while True:
            resp = await self._post("/v1/work/claim", new_id("clm"), body, timeout)
            received = self.clock.local_ms()
            if resp.status_code == 200:
                return self._claimed(resp, received)
            code, message = _error_of(resp)
            if not resynced and _is_time_refusal(resp.status_code, code, message):
                resynced = self.clock.observe_date(resp.headers.get("date"))
                if resynced:
                    log.warning("claim refused for its time; clock resynchronised: %s", message)
                    continue
            raise ReportError(
                f"claim: {resp.status_code} {code}: {message}", resp.status_code, code
            )

    def _claimed(self, resp: httpx.Response, received_local_ms: float) -> list[dict[str, Any]]:
        try:
            body = resp.json()
        except ValueError as e:
            raise ReportError(f"claim answer: not JSON: {e}", 200, "bad-answer") from e
        tasks = body.get("tasks") if isinstance(body, dict) else None
        now_ms = body.get("nowMs") if isinstance(body, dict) else None
        if not isinstance(tasks, list) or not isinstance(now_ms, int | float):
            raise ReportError("claim answer: needs tasks (a list) and nowMs", 200, "bad-answer")
        self.clock.observe(float(now_ms), received_local_ms)
        for i, task in enumerate(tasks):
            if not isinstance(task, dict) or not isinstance(task.get("id"), str):
                raise ReportError(f"claim answer: tasks[{i}].id: missing", 200, "bad-answer")
            if not isinstance(task.get("attempts"), int):
                raise ReportError(f"claim answer: tasks[{i}].attempts: missing", 200, "bad-answer")
        return tasks

    async def report(
        self,
        task_id: str,
        make_event: Callable[[], dict[str, Any]],
        give_up_at_ms: float | None,
    ) -> Answer:
        """Sends one event for `task_id` until it is judged.

        `make_event` builds the event (its `atMs` read from the server's
        clock); it is called again only when the server refused the event
        for its time, which records nothing, so the id may stay the same.
        Raises `GaveUp` past `give_up_at_ms` (server clock) and
        `ReportError` for a refusal no retry can fix.
        """
        msg_id = new_id("cb")
        body = _encode({**make_event(), "taskId": task_id})
        path = f"/v1/tasks/{task_id}/callbacks"
        resynced = False
        failures = 0
        while True:
            try:
                resp = await self._post(path, msg_id, body)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as e:
                wait, why = self.backoff_ms(failures), f"{type(e).__name__}: {e}"
            else:
                if resp.status_code == 200:
                    try:
                        return Answer.parse(resp.json())
                    except ValueError as e:
                        raise ReportError(f"answer: not JSON: {e}", 200, "bad-answer") from e
                code, message = _error_of(resp)
                if resp.status_code in TRANSIENT_STATUSES:
                    wait = max(retry_after_ms(resp), self.backoff_ms(failures))
                    why = f"{resp.status_code} {code}"
                elif not resynced and _is_time_refusal(resp.status_code, code, message):
                    resynced = self.clock.observe_date(resp.headers.get("date"))
                    if not resynced:
                        raise ReportError(f"report: {message} (no Date header)", 401, code)
                    log.warning("report refused for its time; clock resynchronised: %s", message)
                    body = _encode({**make_event(), "taskId": task_id})
                    continue
                else:
                    raise ReportError(
                        f"report for {task_id}: {resp.status_code} {code}: {message}",
                        resp.status_code,
                        code,
                    )
            failures += 1
            if give_up_at_ms is not None and self.clock.now_ms() + wait > give_up_at_ms:
                raise GaveUp(f"report for {task_id} not delivered before its lease ran out: {why}")
            log.info("report for %s: %s; sending it again in %.0f ms", task_id, why, wait)
            await asyncio.sleep(wait / 1000.0)

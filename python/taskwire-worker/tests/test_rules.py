"""The library's own rules, without a server: classification, the last
event of an attempt, signing, the clock, and options named in errors."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from taskwire_worker import (
    ConfigError,
    FatalError,
    RetryableError,
    ServerClock,
    SubmitUnknownError,
    Worker,
    classify,
    outcome_unknown,
)
from taskwire_worker.attempt import final_event
from taskwire_worker.transport import Transport

SECRET = "whsec_dGFza3dpcmUtZGV2LXNlY3JldC1kby1ub3QtdXNlLWluLXByb2Q="
REQUEST = httpx.Request("POST", "http://vendor.invalid/jobs")


def status_error(status: int) -> httpx.HTTPStatusError:
    resp = httpx.Response(status, request=REQUEST)
    return httpx.HTTPStatusError(f"{status}", request=REQUEST, response=resp)


class SdkError(Exception):
    def __init__(self, status_code: int) -> None:
        super().__init__(f"vendor said {status_code}")
        self.status_code = status_code


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (RetryableError("x"), True),
        (FatalError("x"), False),
        (SubmitUnknownError("x"), False),
        (httpx.ConnectError("refused", request=REQUEST), True),
        (httpx.ReadTimeout("slow", request=REQUEST), True),
        (httpx.RemoteProtocolError("cut", request=REQUEST), True),
        (TimeoutError(), True),
        (ConnectionResetError(), True),
        (status_error(408), True),
        (status_error(429), True),
        (status_error(500), True),
        (status_error(503), True),
        (status_error(400), False),
        (status_error(401), False),
        (status_error(404), False),
        (status_error(422), False),
        (SdkError(502), True),
        (SdkError(403), False),
        (ExceptionGroup("g", [TimeoutError(), status_error(503)]), True),
        (ExceptionGroup("g", [TimeoutError(), KeyError("k")]), False),
        (ValueError("bad input"), False),
        (KeyError("field"), False),
        (TypeError("bug"), False),
    ],
)
def test_errors_are_classified_by_the_documented_table(
    error: BaseException, retryable: bool
) -> None:
    assert classify(error) is retryable


@pytest.mark.parametrize(
    ("error", "unknown"),
    [
        (httpx.ReadTimeout("slow", request=REQUEST), True),
        (httpx.RemoteProtocolError("cut", request=REQUEST), True),
        (httpx.WriteError("half", request=REQUEST), True),
        (TimeoutError(), True),
        (status_error(500), True),
        (status_error(504), True),
        (SubmitUnknownError("said so"), True),
        (httpx.ConnectError("refused", request=REQUEST), False),
        (httpx.ConnectTimeout("no route", request=REQUEST), False),
        (status_error(503), False),
        (status_error(429), False),
        (status_error(400), False),
        (ValueError("bug"), False),
    ],
)
def test_submit_outcomes_are_unknown_only_when_the_request_may_have_arrived(
    error: BaseException, unknown: bool
) -> None:
    assert outcome_unknown(error) is unknown


RESULT = {"resultRef": "mem://r", "resultHash": "sha256:1"}
CANCELLED = asyncio.CancelledError()


@pytest.mark.parametrize(
    ("cancelled", "held", "returned", "error", "expected"),
    [
        (None, False, RESULT, None, {"type": "succeed", **RESULT}),
        ("cancel", False, RESULT, None, {"type": "succeed", **RESULT}),
        ("shutdown", False, RESULT, None, {"type": "succeed", **RESULT}),
        ("stop", False, RESULT, None, None),
        ("lease-lost", False, None, CANCELLED, None),
        (None, True, None, None, None),
        ("cancel", False, None, CANCELLED, {"type": "ack_cancel"}),
        ("cancel", False, None, ValueError("x"), {"type": "ack_cancel"}),
        (
            "shutdown",
            False,
            None,
            CANCELLED,
            {"type": "fail", "error": "worker shut down", "retryable": True},
        ),
        (
            None,
            False,
            None,
            TimeoutError(),
            {"type": "fail", "error": "TimeoutError", "retryable": True},
        ),
        (
            None,
            False,
            None,
            KeyError("doc"),
            {"type": "fail", "error": "KeyError: 'doc'", "retryable": False},
        ),
    ],
)
def test_the_last_event_of_an_attempt_follows_why_it_ended(
    cancelled: str | None,
    held: bool,
    returned: Any,
    error: BaseException | None,
    expected: dict[str, Any] | None,
) -> None:
    assert final_event(cancelled, held, returned, error) == expected


def test_a_result_without_its_hash_is_a_final_failure_naming_the_field() -> None:
    event = final_event(None, False, {"resultRef": "mem://r"}, None)
    assert event is not None and event["retryable"] is False
    assert "result.resultHash" in event["error"]


def test_reports_are_signed_as_standard_webhooks_on_the_server_clock() -> None:
    clock = ServerClock(now=lambda: 1_000_000.0)
    clock.observe(1_600_000.0)  # the server is 10 minutes ahead
    transport = Transport(
        url="http://x", tenant="t", secret=SECRET, clock=clock, client=httpx.AsyncClient()
    )
    headers = transport.sign("cb_1", '{"taskId":"t1"}')
    assert headers["webhook-timestamp"] == "1600"
    stamp = datetime.fromtimestamp(1600, tz=UTC)
    assert headers["webhook-signature"] == Webhook(SECRET).sign("cb_1", stamp, '{"taskId":"t1"}')


def test_the_clock_resyncs_from_a_date_header() -> None:
    clock = ServerClock(now=lambda: 0.0)
    assert clock.observe_date("Wed, 02 Dec 2026 16:00:00 GMT")
    expected = datetime(2026, 12, 2, 16, 0, tzinfo=UTC).timestamp() * 1000 + 500
    assert clock.now_ms() == expected
    assert not clock.observe_date("not a date")
    assert not clock.observe_date(None)


def test_backoff_grows_is_capped_and_jittered() -> None:
    transport = Transport(
        url="http://x",
        tenant="t",
        secret=SECRET,
        clock=ServerClock(),
        client=httpx.AsyncClient(),
        rng=random.Random(7),
    )
    waits = [transport.backoff_ms(n) for n in range(12)]
    for n, wait in enumerate(waits):
        ceiling = min(5000.0, 200.0 * 2**n)
        assert ceiling / 2 <= wait <= ceiling


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"url": "ftp://x"}, "url"),
        ({"tenant": " "}, "tenant"),
        ({"secret": "hunter2"}, "secret"),
        ({"secret": "whsec_***"}, "secret"),
        ({"concurrency": 0}, "concurrency"),
        ({"lease_ms": 500}, "lease_ms"),
        ({"wait_ms": 30_001}, "wait_ms"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_options_are_refused_naming_the_field(options: dict[str, Any], field: str) -> None:
    base: dict[str, Any] = {"url": "http://127.0.0.1:1", "tenant": "t", "secret": SECRET}
    with pytest.raises(ConfigError, match=f"^{field}:"):
        Worker(**{**base, **options})


async def test_run_without_a_handler_is_refused() -> None:
    worker = Worker(url="http://127.0.0.1:1", tenant="t", secret=SECRET)
    with pytest.raises(ConfigError, match=r"^handlers:"):
        await worker.run()
    with pytest.raises(ConfigError, match=r"^kind:"):
        worker.handle("k" * 65, lambda job: None)  # type: ignore[arg-type, return-value]

"""The shared vectors (tests/vectors/ at the repository's root) that pin
`next`: every answer they expect is one this library acts on as
PROTOCOL.md §Workers says, so the server and the library cannot drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from taskwire_worker.attempt import signal_for
from taskwire_worker.transport import Answer

VECTORS = Path(__file__).resolve().parents[3] / "tests" / "vectors"


def answers_with_next() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    found = []
    for path in sorted(VECTORS.glob("*.json")):
        vector = json.loads(path.read_text())
        for step in vector.get("steps", []):
            expect = step.get("expect")
            if step.get("op") == "apply" and isinstance(expect, dict) and "next" in expect:
                found.append((f"{path.stem}:{len(found)}", step["event"], expect))
    return found


CASES = answers_with_next()


def test_the_vectors_pin_every_next_value() -> None:
    assert {expect["next"] for _, _, expect in CASES} == {"continue", "cancel", "stop"}


@pytest.mark.parametrize(("name", "event", "expect"), CASES, ids=[c[0] for c in CASES])
def test_each_expected_answer_moves_the_job_as_the_protocol_says(
    name: str, event: dict[str, Any], expect: dict[str, Any]
) -> None:
    answer = Answer.parse({**expect, "state": expect.get("task", {}).get("state", "")})
    fired = signal_for(answer.next, event["type"])
    if answer.next == "continue":
        assert fired is None
    elif answer.next == "cancel":
        assert fired == "cancel"
    elif event["type"] in ("progress", "heartbeat", "start", "cannot_cancel", "step"):
        # Replaced, ended or never started: the job stops, reports nothing more.
        assert fired == "stop", expect.get("reason")
    else:
        # The attempt's own last report: `stop` is the expected answer.
        assert fired is None

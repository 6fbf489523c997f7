"""Budgets and side effects (PROTOCOL.md §Budgets and side effects; seed
001 §5, §8): `Job.spend` reserves before a paid call and settles after it,
`Job.effect` makes an external write under its idempotency key and records
it once, and `budget_exhausted` ends a job whose budget ran out with what
it has.

The rules (whether a reservation fits, which record of a key wins) are
core's, judged by the server; this module only reports them through the
attempt's report path and reads each answer's `taken`, `reason` and
`resource_id`. The Rust worker's `Job::spend`, `Job::effect` and
`Done::budget_exhausted` do the same, step for step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .attempt import Exhausted, Result
from .errors import Cancelled, ConfigError, FatalError
from .steps import MAX_COUNTER, Usage

if TYPE_CHECKING:
    from .attempt import Attempt
    from .transport import Answer

__all__ = ["Amount", "OverBudget", "budget_exhausted", "effect", "recorded_effect", "spend"]

T = TypeVar("T")


@dataclass(frozen=True)
class Amount:
    """A reservation's estimate: the call's ceiling in tokens and cents.

    Each an integer from 0 to 2^53 - 1; a bad one raises `ConfigError`
    naming it, here rather than as a refused report later.
    """

    tokens: int = 0
    cost_cents: int = 0

    def __post_init__(self) -> None:
        for field in ("tokens", "cost_cents"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{field}: must be an integer, got {value!r}")
            if not 0 <= value <= MAX_COUNTER:
                raise ConfigError(f"{field}: must be from 0 to {MAX_COUNTER}, got {value}")


class OverBudget(FatalError):
    """A reservation the server refused; `Job.spend` did not make the call.

    `reason` is the server's: `"over-budget"` (the task's budget cannot
    cover it), or `"not-running"` (a cancel was asked),
    `"reservation-conflict"`, `"unknown-step"`, `"ledger-full"`,
    `"stale-attempt"`. `reservation` is the reservation's id. Final: the
    handler may degrade (a smaller context, an optional step skipped) or
    end the task with what it has (`return budget_exhausted(partial)`);
    raised on, another attempt would meet the same budget.
    """

    def __init__(self, reservation: str, reason: str) -> None:
        super().__init__(f"reservation {reservation!r} refused: {reason}")
        self.reservation = reservation
        self.reason = reason


def budget_exhausted(partial: Result | None = None) -> Exhausted:
    """What a handler returns when the budget ran out: the task ends
    `failed` with the error `budget-exhausted` (`cancelled` after a cancel),
    keeping `partial` as its result so the work done is not lost. Reported
    as `exhaust`, the attempt's last report."""
    if partial is not None:
        if not isinstance(partial, Result):
            raise ConfigError(f"partial: must be a Result or None, got {type(partial).__name__}")
        for name, value in (
            ("partial.result_ref", partial.result_ref),
            ("partial.result_hash", partial.result_hash),
        ):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name}: must be a non-blank string, got {value!r}")
    return Exhausted(partial)


def _non_blank(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{field}: must be a non-blank string, got {value!r}")
    return value


async def _send(attempt: Attempt, check: Callable[[], None], event: str, **fields: Any) -> Answer:
    """One report; an attempt that can no longer report raises `Cancelled`."""
    answer = await attempt.send(event, **fields)
    if answer is None:
        # Not delivered, or the attempt must be silent: the signal fired
        # (`check` raises its reason); the lease is the only other one.
        check()
        raise Cancelled(attempt.cancelled or "lease-lost")
    return answer


async def spend(
    attempt: Attempt,
    check: Callable[[], None],
    name: str,
    estimate: Amount,
    call: Callable[[], Awaitable[tuple[T, Usage]]],
    step: str | None,
) -> T:
    """`Job.spend` (see its docs): `check` is the job's `check()`."""
    _non_blank("name", name)
    if not isinstance(estimate, Amount):
        raise ConfigError(f"estimate: must be an Amount, got {type(estimate).__name__}")
    if not callable(call):
        raise ConfigError(f"call: must be an async callable, got {type(call).__name__}")
    if step is not None:
        _non_blank("step", step)
    # Per attempt: a resent reserve is the same reservation (a duplicate),
    # and a new attempt reserves afresh while the server charges the old
    # attempt's open reservations in full.
    reservation = f"{attempt.number}:{name}"
    check()
    fields: dict[str, Any] = {"reservation": reservation}
    if step is not None:
        fields["step"] = step
    fields.update(tokens=estimate.tokens, costCents=estimate.cost_cents)
    answer = await _send(attempt, check, "reserve", **fields)
    if not answer.taken:
        raise OverBudget(reservation, answer.reason)
    check()
    try:
        ran = await call()
        if not (isinstance(ran, tuple) and len(ran) == 2 and isinstance(ran[1], Usage)):
            raise ConfigError(
                f"spend {name!r}: call must return (value, Usage), got {type(ran).__name__}"
            )
    except (Exception, asyncio.CancelledError):
        # A call that failed used nothing it can report: the whole
        # reservation is released, and the call's error is what the
        # handler sees, never the settle's.
        await _settle_released(attempt, reservation)
        raise
    value, used = ran
    await _send(attempt, check, "settle", reservation=reservation, **used.to_wire())
    return value


async def _settle_released(attempt: Attempt, reservation: str) -> None:
    try:
        await attempt.send("settle", reservation=reservation, **Usage().to_wire())
    except (Exception, asyncio.CancelledError):
        # The attempt's own end follows; the server charges an open
        # reservation when the next attempt starts.
        pass


def recorded_effect(task: Mapping[str, Any], step: str, action: str) -> str | None:
    """The resource id the claimed task records under `(step, action)`."""
    effects = task.get("effects")
    for e in effects if isinstance(effects, list) else []:
        if isinstance(e, Mapping) and e.get("step") == step and e.get("action") == action:
            resource = e.get("resourceId")
            return resource if isinstance(resource, str) else None
    return None


async def effect(
    attempt: Attempt,
    check: Callable[[], None],
    task: Mapping[str, Any],
    key: str,
    step: str,
    action: str,
    write: Callable[[str], Awaitable[str]],
) -> str:
    """`Job.effect` (see its docs): `key` is `job.key(step, action)`."""
    known = recorded_effect(task, step, action)
    if known is not None:
        return known
    if not callable(write):
        raise ConfigError(f"write: must be an async callable, got {type(write).__name__}")
    check()
    resource_id = _non_blank("resource_id (what write returned)", await write(key))
    answer = await _send(attempt, check, "effect", step=step, action=action, resourceId=resource_id)
    if not answer.taken:
        raise FatalError(
            f"side effect {step}/{action} ({resource_id}) not recorded: {answer.reason}"
        )
    # The first write's id: a write made again after a crash between the
    # write and its record is answered with the id recorded first.
    return answer.resource_id if answer.resource_id is not None else resource_id

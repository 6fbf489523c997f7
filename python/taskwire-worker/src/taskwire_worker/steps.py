"""Steps with checkpoints (PROTOCOL.md §Steps): `job.step` runs one step
of the task's plan at most once across attempts.

A step an earlier attempt finished is not run again: its checkpoint
(where its output is, and the output's hash) comes with the claimed task,
so a new attempt after a lapse, a retry or an approval starts at the
first step not yet finished. The rules (what a report does, that a
finished step never moves) are the server's; this module only reports
them, and turns the answers that refuse a step into a `StepError`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import Cancelled, ConfigError, FatalError

if TYPE_CHECKING:
    from .attempt import Attempt

__all__ = [
    "REFUSALS",
    "Checkpoint",
    "StepError",
    "StepOutput",
    "Steps",
    "Usage",
    "run_step",
]

log = logging.getLogger("taskwire_worker")

# The wire's counters are integers from 0 to 2^53 - 1 (JSON numbers).
MAX_COUNTER = 2**53 - 1

# What each reason that refuses a step report means, for the error's
# message. Whether a report was refused is `Answer.taken` (neither changed
# nor a duplicate), never the reason's wording: the answer's `next` still
# says `continue`.
REFUSALS: Mapping[str, str] = {
    "unknown-step": "the task's plan has no step of that name",
    "no-plan": "the task has no plan (give workflowVersion and steps when creating it)",
    "step-conflict": (
        "the step is finished already (skipped, or succeeded with another "
        "checkpoint or none) and never moves again"
    ),
}


def _non_blank(field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{field}: must be a non-blank string, got {value!r}")
    return value


@dataclass(frozen=True)
class Checkpoint:
    """A succeeded step's output: where it is stored and its content hash,
    the facts the next step starts from (never the prompt)."""

    output_ref: str
    output_hash: str


@dataclass(frozen=True)
class Usage:
    """What a step used: its own totals so far (not an increment).

    Each an integer from 0 to 2^53 - 1; a bad one raises `ConfigError`
    naming it, here rather than as a refused report later.
    """

    tokens: int = 0
    cost_cents: int = 0
    tool_calls: int = 0

    def __post_init__(self) -> None:
        for field in ("tokens", "cost_cents", "tool_calls"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{field}: must be an integer, got {value!r}")
            if not 0 <= value <= MAX_COUNTER:
                raise ConfigError(f"{field}: must be from 0 to {MAX_COUNTER}, got {value}")

    def to_wire(self) -> dict[str, int]:
        return {"tokens": self.tokens, "costCents": self.cost_cents, "toolCalls": self.tool_calls}


@dataclass(frozen=True)
class StepOutput:
    """What a step's `run` returns: its checkpoint and, optionally, what it used.

    `output_ref` and `output_hash` are non-blank strings (`ConfigError`
    naming the field otherwise), checked where the step builds them.
    """

    output_ref: str
    output_hash: str
    usage: Usage | None = None

    def __post_init__(self) -> None:
        _non_blank("output_ref", self.output_ref)
        _non_blank("output_hash", self.output_hash)
        if self.usage is not None and not isinstance(self.usage, Usage):
            raise ConfigError(f"usage: must be a Usage, got {type(self.usage).__name__}")


class StepError(FatalError):
    """The server refused a step report: `reason` is `"unknown-step"`,
    `"no-plan"` or `"step-conflict"` (PROTOCOL.md §Steps), `step` its name.

    Final (a `FatalError`): the handler's steps and the task's plan
    disagree, and running the same code again cannot change that.
    """

    def __init__(self, step: str, reason: str) -> None:
        why = REFUSALS.get(reason, "refused")
        super().__init__(f"step {step!r}: {reason}: {why}")
        self.step = step
        self.reason = reason


class Steps:
    """The task's steps as this attempt knows them: as claimed, plus the
    ones this attempt finished (so a step is not run twice in one attempt)."""

    def __init__(self, task: Mapping[str, Any]) -> None:
        self.finished: set[str] = set()
        self.checkpoints: dict[str, Checkpoint] = {}
        steps = task.get("steps")
        for step in steps if isinstance(steps, list) else []:
            if not isinstance(step, Mapping) or not isinstance(step.get("name"), str):
                continue
            name = step["name"]
            if step.get("status") in ("succeeded", "skipped"):
                self.finished.add(name)
            ref, digest = step.get("outputRef"), step.get("outputHash")
            if (
                step.get("status") == "succeeded"
                and isinstance(ref, str)
                and isinstance(digest, str)
            ):
                self.checkpoints[name] = Checkpoint(ref, digest)

    def record(self, name: str, checkpoint: Checkpoint) -> None:
        self.finished.add(name)
        self.checkpoints[name] = checkpoint


async def _report(
    attempt: Attempt,
    check: Callable[[], None],
    recorded: Callable[[], None] | None = None,
    **fields: Any,
) -> None:
    """Sends one `step` event through the attempt's report path (signed,
    fenced by attempt, resent after a lost answer); raises `Cancelled`
    when the answer (or its absence) stopped the job, `StepError` when
    the report was refused. `recorded` is called when the server holds
    the report, before a cancel in the same answer is raised: a handler
    that goes on after `cannot_cancel` must not run that step again."""
    answer = await attempt.send("step", **fields)
    if answer is not None and answer.taken and recorded is not None:
        recorded()
    # `next` first, as for every report: a cancel wins over a refusal.
    check()
    if answer is None:
        # Not delivered, or the attempt must be silent: the signal fired
        # (`check` raised); the lease is the only other reason.
        raise Cancelled(attempt.cancelled or "lease-lost")
    if not answer.taken:
        raise StepError(fields["name"], answer.reason)


async def run_step(
    attempt: Attempt,
    steps: Steps,
    check: Callable[[], None],
    name: str,
    run: Callable[[], Awaitable[StepOutput]],
    label: str | None,
) -> Checkpoint:
    """`Job.step` (see its docs): `check` is the job's `check()`."""
    _non_blank("name", name)
    if label is not None and not isinstance(label, str):
        raise ConfigError(f"label: must be a string, got {type(label).__name__}")
    if not callable(run):
        raise ConfigError(f"run: must be an async callable, got {type(run).__name__}")
    done = steps.checkpoints.get(name)
    if done is not None:
        return done
    check()
    running: dict[str, Any] = {"name": name, "status": "running"}
    if label is not None:
        running["label"] = label
    await _report(attempt, check, **running)
    try:
        output = await run()
        if not isinstance(output, StepOutput):
            raise ConfigError(
                f"step {name!r}: run must return a StepOutput, got {type(output).__name__}"
            )
    except (Exception, asyncio.CancelledError) as e:
        if not attempt.held:
            await _report_failed(attempt, name, e)
        raise
    checkpoint = Checkpoint(output.output_ref, output.output_hash)
    succeeded: dict[str, Any] = {
        "name": name,
        "status": "succeeded",
        "outputRef": checkpoint.output_ref,
        "outputHash": checkpoint.output_hash,
    }
    if output.usage is not None:
        succeeded["usage"] = output.usage.to_wire()
    await _report(attempt, check, lambda: steps.record(name, checkpoint), **succeeded)
    return checkpoint


async def _report_failed(attempt: Attempt, name: str, error: BaseException) -> None:
    """Best effort: the attempt's own end (its `fail` or `ack_cancel`)
    follows, and `run`'s error is what the handler sees, never this one's."""
    try:
        await attempt.send("step", name=name, status="failed")
    except (Exception, asyncio.CancelledError) as e:
        log.info(
            "task %s: step %r failed (%r); its report too: %r", attempt.task_id, name, error, e
        )

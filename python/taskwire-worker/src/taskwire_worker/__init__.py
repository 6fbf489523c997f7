"""taskwire-worker: run taskwire tasks as asyncio jobs.

The library owns the plumbing (claims, signed reports, heartbeats, leases,
retries of lost answers, the clock offset, cancellation); a job is a plain
async function of a `Job`. See the README for the whole picture.
"""

from .attempt import Exhausted, Result
from .budget import Amount, OverBudget, budget_exhausted
from .clock import ServerClock
from .errors import (
    Cancelled,
    ConfigError,
    FatalError,
    ReportError,
    RetryableError,
    SubmitUnknownError,
    VendorTimeoutError,
    classify,
)
from .job import Held, Job
from .output import Output
from .steps import Checkpoint, StepError, StepOutput, Usage
from .vendor import PENDING, outcome_unknown, submit_once_then_poll
from .worker import Handler, Worker

__all__ = [
    "PENDING",
    "Amount",
    "Cancelled",
    "Checkpoint",
    "ConfigError",
    "Exhausted",
    "FatalError",
    "Handler",
    "Held",
    "Job",
    "Output",
    "OverBudget",
    "ReportError",
    "Result",
    "RetryableError",
    "ServerClock",
    "StepError",
    "StepOutput",
    "SubmitUnknownError",
    "Usage",
    "VendorTimeoutError",
    "Worker",
    "budget_exhausted",
    "classify",
    "outcome_unknown",
    "submit_once_then_poll",
]

__version__ = "0.1.0"

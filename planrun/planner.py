"""The seam between the scheduler and a planner: what the planner is asked, what it answers.

The answer is a value the scheduler applies; a planner never changes the run itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from planrun.model import Plan
from planrun.status import Reason


@dataclass(frozen=True)
class Failure:
    """A step that failed with `on_failure: replan`."""

    step_id: str
    error: str


@dataclass(frozen=True)
class ReplanRequest:
    """What the planner is told: the plan now, what failed, what is done, what was tried."""

    plan: Plan
    failures: list[Failure]  # in the order they failed; the first is `failed_step`
    completed: list[str]  # steps the revision keeps (succeeded, ignored, skipped)
    results: dict[str, Any]  # step id -> result of the completed steps that ran
    variables: dict[str, Any]
    revisions: list[dict[str, Any]]  # the revisions made so far (in this and earlier runs)
    calls_left: int  # planner calls this run may still make (limits.max_replans)


@dataclass(frozen=True)
class Revision:
    """The planner's valid answer: the new plan, and the revision as it is stored."""

    plan: Plan
    record: dict[str, Any]  # {revision, diff, error, failed_step, steps}
    calls: int


@dataclass(frozen=True)
class ReplanStop:
    """No usable answer: the run ends with this reason."""

    reason: Reason
    error: str
    calls: int


class Replanner(Protocol):
    async def __call__(self, request: ReplanRequest) -> Revision | ReplanStop: ...

"""The seam between the scheduler and a planner: what the planner is asked, what it answers.

The answer is a value the scheduler applies; a planner never changes the run itself. The
values are NamedTuples, not dataclasses: every run imports this module, and four frozen
dataclasses cost ~2 ms of start-up to build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from planrun.plan.definition import Plan
from planrun.run.scope import StepRecord
from planrun.status import COMPLETED, Reason, Status


class Failure(NamedTuple):
    """A step that failed with `on_failure: replan`."""

    step_id: str
    error: str


class ReplanRequest(NamedTuple):
    """What the planner is told: the plan now, what failed, what is done, what was tried."""

    plan: Plan
    failures: list[Failure]  # in the order they failed; the first is `failed_step`
    completed: list[str]  # steps the revision keeps (succeeded, ignored, skipped)
    results: dict[str, Any]  # step id -> result of the completed steps that ran
    variables: dict[str, Any]
    revisions: list[dict[str, Any]]  # the revisions made so far (in this and earlier runs)
    calls_left: int  # planner calls this run may still make (limits.max_replans)
    limit: str = ""  # the limit that bounds calls_left, as the error names it


class Revision(NamedTuple):
    """The planner's valid answer: the new plan, and the revision as it is stored."""

    plan: Plan
    record: dict[str, Any]  # {revision, diff, error, failed_step, steps}
    calls: int


class ReplanStop(NamedTuple):
    """No usable answer: the run ends with this reason."""

    reason: Reason
    error: str
    calls: int


class Replanner(Protocol):
    async def __call__(self, request: ReplanRequest) -> Revision | ReplanStop: ...


def replan_request(
    plan: Plan,
    order: list[str],
    records: Mapping[str, StepRecord],
    failures: list[tuple[str, str]],  # (step id, error)
    variables: dict[str, Any],
    revisions: list[dict[str, Any]],
    calls_left: int,
    limit: str = "",
) -> ReplanRequest:
    """The planner's view of a run: copies, so that nothing it does reaches the run."""
    completed = [sid for sid in order if records[sid].status in COMPLETED]
    return ReplanRequest(
        plan=plan,
        failures=[Failure(step_id, error) for step_id, error in failures],
        completed=completed,
        results={
            sid: records[sid].result for sid in completed if records[sid].status != Status.SKIPPED
        },
        variables=dict(variables),
        revisions=list(revisions),
        calls_left=calls_left,
        limit=limit,
    )

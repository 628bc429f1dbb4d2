"""The statuses of steps and runs, and the reasons a run ends: one vocabulary for every module.

Members are `str`s, so they compare equal to the words in state files and JSON documents and
are written as those words.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What a step or a run is (a run is only ever running, succeeded, failed, interrupted or
    blocked; `blocked` is a run's, the others up to `interrupted` are a step's)."""

    PENDING = "pending"  # not started (yet)
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # its `when` was false, or a step it depends on failed
    IGNORED = "ignored"  # failed with `on_failure: ignore`: done, result null
    INTERRUPTED = "interrupted"  # stopped while running (abort, Ctrl-C, a "no" at approval)
    BLOCKED = "blocked"  # a run stopped because approval was needed and not given
    CACHED = "cached"  # its outputs were restored from the cache instead of running it


STEP_STATUSES = frozenset(
    (
        Status.PENDING,
        Status.RUNNING,
        Status.SUCCEEDED,
        Status.FAILED,
        Status.SKIPPED,
        Status.IGNORED,
        Status.INTERRUPTED,
        Status.CACHED,
    )
)
RUN_STATUSES = frozenset(
    (Status.RUNNING, Status.SUCCEEDED, Status.FAILED, Status.INTERRUPTED, Status.BLOCKED)
)
# Done, and done well enough for its dependents to go on (`cached` is succeeded, restored).
COMPLETED = frozenset((Status.SUCCEEDED, Status.IGNORED, Status.SKIPPED, Status.CACHED))
CONDITION_FALSE = "condition false"  # the skip reason of a step whose `when` was false


class Reason(StrEnum):
    """Why a run ended (the document's `reason`)."""

    COMPLETED = "completed"
    STEP_FAILED = "step_failed"
    STEP_BUDGET = "step_budget"
    REPLAN_BUDGET = "replan_budget"
    NO_PLAN = "no_plan"  # the planner returned no steps
    INTERRUPTED = "interrupted"
    APPROVAL_REQUIRED = "approval_required"
    DENIED = "denied"

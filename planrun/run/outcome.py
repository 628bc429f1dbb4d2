"""How a run ended, and the run document built from it (`--output json`, the MCP server)."""

from __future__ import annotations

from typing import Any

from planrun.run.scope import StepRecord
from planrun.status import Reason, Status


class Outcome:
    """How a run ended: its status, why, the one-line error (if any) and how long it took."""

    __slots__ = ("status", "reason", "error", "duration_s")
    status: Status
    reason: Reason
    error: str | None
    duration_s: float

    def __init__(
        self, status: Status, reason: Reason, error: str | None, duration_s: float
    ) -> None:
        self.status = status
        self.reason = reason
        self.error = error
        self.duration_s = duration_s


def verdict(stop: Reason | None, failed_any: bool) -> tuple[Status, Reason]:
    """The run's status and reason from why it stopped (None: it ran out of steps)."""
    if stop == Reason.INTERRUPTED:
        return Status.INTERRUPTED, stop
    if stop in (Reason.DENIED, Reason.APPROVAL_REQUIRED):
        return Status.BLOCKED, stop
    if stop in (Reason.STEP_BUDGET, Reason.REPLAN_BUDGET, Reason.NO_PLAN):
        return Status.FAILED, stop
    if failed_any or stop == Reason.STEP_FAILED:
        return Status.FAILED, Reason.STEP_FAILED
    return Status.SUCCEEDED, Reason.COMPLETED


def first_failure(order: list[str], records: dict[str, StepRecord]) -> str | None:
    """The error of a failed run that no stop explains: its first failed step's."""
    failed = next((sid for sid in order if records[sid].status == Status.FAILED), None)
    return None if failed is None else f"step '{failed}' failed: {records[failed].error}"


def result_document(
    plan_name: str,
    order: list[str],
    records: dict[str, StepRecord],
    outcome: Outcome,
    variables: dict[str, Any],
) -> dict[str, Any]:
    """The run document: {plan, status, reason, duration_s, error, steps, variables}."""
    return {
        "plan": plan_name,
        "status": outcome.status,
        "reason": outcome.reason,
        "duration_s": outcome.duration_s,
        "error": outcome.error,
        "steps": [
            {
                "id": sid,
                "status": records[sid].status,
                "attempts": records[sid].attempts,
                "duration_s": records[sid].duration_s,
                "result": records[sid].result,
                "error": records[sid].error,
            }
            for sid in order
        ],
        "variables": variables,
    }

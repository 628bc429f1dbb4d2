"""How a run ended, and the run document built from it (`--output json`, the MCP server)."""

from __future__ import annotations

from typing import Any

from planrun.record import Record
from planrun.scope import StepRecord
from planrun.status import Reason, Status


class Outcome(Record):
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

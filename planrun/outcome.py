"""How a run ended, and the run document built from it (`--output json`, the MCP server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planrun.scope import StepRecord
from planrun.status import Reason, Status


@dataclass
class Outcome:
    status: Status
    reason: Reason
    error: str | None
    duration_s: float


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

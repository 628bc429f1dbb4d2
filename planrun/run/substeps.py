"""Sub-plan steps (ids PARENT/CHILD) in run documents: collected from events, listed after their
parent step, so `run --output json` and `status` show the same rows in the same order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from planrun.run.events import (
    PlanDiff,
    RunEvent,
    StepFailed,
    StepInterrupted,
    StepResumed,
    StepSkipped,
    StepStarted,
    StepSucceeded,
    present,
)

SEPARATOR = "/"


def tree_order(ids: Iterable[str]) -> list[str]:
    """Ids in their given order, each PARENT/CHILD id moved right after its parent's subtree
    (first seen first); an id whose parent is not listed keeps its place at the end."""
    ids = list(ids)
    children: dict[str, list[str]] = {}
    top: list[str] = []
    known = set(ids)
    for sid in ids:
        head, sep, _ = sid.rpartition(SEPARATOR)
        if sep and head in known:
            children.setdefault(head, []).append(sid)
        else:
            top.append(sid)
    out: list[str] = []
    stack = list(reversed(top))
    while stack:
        sid = stack.pop()
        out.append(sid)
        stack.extend(reversed(children.get(sid, ())))
    return out


def row_order(ids: Iterable[str]) -> list[str]:
    """The rows of every view of a run (`--output json`, `status`, JUnit, the report): each
    step followed by its foreach instances (in index order) and its sub-plan's steps, an
    instance by its own (`subs[0]`, `subs[0]/c1`, `subs[1]`...), as the run document lists them."""
    from planrun.plan.instances import group_instances

    return tree_order(group_instances(ids))


def pending_row(sid: str) -> dict[str, Any]:
    """A step's row in a run document before anything happened to it."""
    return {
        "id": sid,
        "status": "pending",
        "attempts": 0,
        "duration_s": None,
        "result": None,
        "error": None,
    }


class SubStepRows:
    """Event subscriber: the last known row of every sub-plan step of a run."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def __call__(self, event: RunEvent) -> None:
        step = event.step
        if isinstance(event, PlanDiff):
            if step is not None:  # a sub-plan's (parent.py)
                for sid in event.removed or ():
                    self.rows.pop(str(sid), None)  # routed around, as the top plan's steps
            return
        if step is None or SEPARATOR not in step:
            return  # the run's own events, and its own steps': most events, looked at once
        match event:
            case StepStarted(attempt=attempt):
                self._row(step).update(status="running", attempts=int(attempt or 1))
            case StepSkipped(reason=reason):
                upstream = isinstance(reason, str) and reason.startswith("upstream failed")
                self._row(step).update(status="skipped", error=reason if upstream else None)
            case (
                StepSucceeded() | StepFailed() | StepInterrupted() | StepResumed()
            ):  # resumed: kept
                self._row(step).update(
                    status=event.status,
                    attempts=event.attempts,
                    duration_s=event.duration_s,
                    result=present(event.result),
                    error=present(getattr(event, "error", None)),
                )

    def _row(self, sid: str) -> dict[str, Any]:
        return self.rows.get(sid) or self.rows.setdefault(sid, pending_row(sid))

    def merge_into(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`steps` (the plan's own rows) with the sub-plan rows after their parents."""
        if not self.rows:
            return steps
        by_id = {row["id"]: row for row in steps} | self.rows
        return [by_id[sid] for sid in tree_order([*(r["id"] for r in steps), *self.rows])]

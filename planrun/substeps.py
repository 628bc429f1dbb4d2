"""Sub-plan steps (ids PARENT/CHILD) in run documents: collected from events, listed after their
parent step, so `run --output json` and `status` show the same rows in the same order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from planrun.events import Event

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

    def __call__(self, event: Event) -> None:
        sid = event.step
        if event.event == "plan.diff" and sid is not None:  # a sub-plan's (planrun.parent)
            for removed in event.data.get("removed") or ():
                self.rows.pop(str(removed), None)  # routed around, as the top plan's steps
            return
        if sid is None or SEPARATOR not in sid or not event.event.startswith("step."):
            return
        kind = event.event.removeprefix("step.")
        if kind in ("output", "retrying"):
            return
        d = event.data
        row = self.rows.get(sid) or self.rows.setdefault(sid, pending_row(sid))
        if kind == "started":
            row.update(status="running", attempts=int(d.get("attempt") or 1))
        elif kind == "skipped":
            reason = d.get("reason")
            upstream = isinstance(reason, str) and reason.startswith("upstream failed")
            row.update(status="skipped", error=reason if upstream else None)
        elif kind in ("succeeded", "failed", "interrupted", "resumed"):  # resumed: kept
            row.update(
                status=d.get("status") or kind,
                attempts=d.get("attempts", row["attempts"]),
                duration_s=d.get("duration_s"),
                result=d.get("result"),
                error=d.get("error"),
            )

    def merge_into(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`steps` (the plan's own rows) with the sub-plan rows after their parents."""
        if not self.rows:
            return steps
        by_id = {row["id"]: row for row in steps} | self.rows
        return [by_id[sid] for sid in tree_order([*(r["id"] for r in steps), *self.rows])]

"""Applying recorded changes to a run state: a step's new state, a planner's revision, the run's end."""

from __future__ import annotations

from typing import Any

from planrun.state.model import RunState, StepState
from planrun.status import Status


def apply(state: RunState, entry: dict[str, Any]) -> RunState:
    """`state` with one recorded change applied (a journal line: op step, run, revision or
    drop); ValueError for an operation it does not know. Touches no file."""
    op = entry["op"]
    if op == "step":
        _apply_step(state, str(entry["id"]), StepState.from_json(entry["state"]))
    elif op == "run":
        _apply_run(state, entry["changes"])
    elif op == "revision":
        _apply_revision(state, entry["revision"])
    elif op == "drop":
        state.steps.pop(str(entry["id"]), None)
    else:
        raise ValueError(f"unknown operation {op!r}")
    return state


def _bind_result(state: RunState, step: StepState) -> None:
    """Bind a step's result variable as the run's variable scope sees it (an ignored step binds null)."""
    if step.result_variable:
        if step.status in (Status.SUCCEEDED, Status.CACHED):
            state.variables[step.result_variable] = step.result
        elif step.status == Status.IGNORED:
            state.variables[step.result_variable] = None


def _apply_step(state: RunState, step_id: str, step: StepState) -> None:
    state.steps[step_id] = step
    _bind_result(state, step)


def _apply_revision(state: RunState, revision: dict[str, Any]) -> None:
    """Apply a planner's revision: removed steps dropped, revised ones reset to pending, new ones
    added pending, in the order of the revised plan when `steps` lists all of it."""
    state.revisions.append(revision)
    diff = revision.get("diff") or {}
    for sid in diff.get("removed") or []:
        state.steps.pop(str(sid), None)
    for sid in diff.get("revised") or []:
        if str(sid) in state.steps:
            state.steps[str(sid)] = StepState()
    listed = [
        str(s["id"]) for s in revision.get("steps") or [] if isinstance(s, dict) and "id" in s
    ]
    listed += [str(a) for a in diff.get("added") or [] if str(a) not in listed]
    if not set(state.steps) <= set(listed):
        # Only the new steps were listed: the kept ones stay first, in their order.
        listed = [*state.steps, *(sid for sid in listed if sid not in state.steps)]
    state.steps = {sid: state.steps.get(sid) or StepState() for sid in listed}


def _apply_run(state: RunState, changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if key in ("status", "reason", "error", "ended_at", "duration_s"):
            setattr(state, key, value)


def keep_step(step: StepState, d: dict[str, Any]) -> None:
    """A step kept from the previous run: as it was recorded there."""
    step.status = d.get("status") or Status.SUCCEEDED
    step.result = d.get("result")
    step.error = d.get("error")
    step.result_masked = bool(d.get("result_masked"))
    step.reason = d.get("reason") or "unchanged since last run"
    step.cache_key = d.get("key") if isinstance(d.get("key"), str) else None
    for key in ("attempts", "duration_s", "fingerprint", "result_variable"):
        if d.get(key) is not None:
            setattr(step, key, d[key])


def finish_step(step: StepState, d: dict[str, Any], ts: str) -> None:
    """A step that ended: when, after how many attempts, and under which fingerprint."""
    step.ended_at = ts
    if "attempts" in d:
        step.attempts = int(d["attempts"])
    if "duration_s" in d:
        step.duration_s = d["duration_s"]
    if d.get("fingerprint") is not None:
        step.fingerprint = d["fingerprint"]
    if d.get("result_variable") is not None:
        step.result_variable = d["result_variable"]


def log_attempt(step: StepState, d: dict[str, Any], now: float) -> None:
    """A failed attempt on the step's `attempts_log`: its number, error, stderr tail and
    duration (from when it started: `started_at` is the last attempt's start)."""
    began = _epoch(step.started_at)
    step.attempts_log.append(
        {
            "attempt": int(d.get("attempt") or d.get("attempts") or step.attempts),
            "error": d.get("error"),
            "stderr_tail": d.get("stderr_tail") or "",
            "duration_s": round(max(0.0, now - began), 3) if began is not None else None,
        }
    )


def _epoch(text: str | None) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None

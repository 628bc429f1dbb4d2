"""Applying recorded changes to a run state: a step's new state, a planner's revision, the run's end."""

from __future__ import annotations

from typing import Any

from planrun.plan.instances import parent_of
from planrun.run.events import (
    StepCached,
    StepEvent,
    StepFailed,
    StepInterrupted,
    StepResumed,
    StepRetrying,
    StepSkipped,
    StepSucceeded,
    present,
)
from planrun.run.stepcounts import KEPT_REASON
from planrun.state.model import RunState, StepState
from planrun.status import Status


def apply(state: RunState, entry: dict[str, Any]) -> RunState:
    """`state` with one recorded change applied (a journal line: op step, run, revision or
    drop); ValueError for an operation it does not know. Touches no file."""
    op = entry["op"]
    if op == "step":
        apply_step(state, str(entry["id"]), StepState.from_json(entry["state"]))
    elif op == "run":
        apply_run(state, entry["changes"])
    elif op == "revision":
        apply_revision(state, entry["revision"])
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


def apply_step(state: RunState, step_id: str, step: StepState) -> None:
    state.steps[step_id] = step
    _bind_result(state, step)


def apply_revision(state: RunState, revision: dict[str, Any]) -> None:
    """Apply a planner's revision: removed steps dropped, revised ones reset to pending, new ones
    added pending, in the order of the revised plan when `steps` lists all of it."""
    state.revisions.append(revision)
    diff = revision.get("diff") or {}
    removed = {str(sid) for sid in diff.get("removed") or []}
    revised = {str(sid) for sid in diff.get("revised") or []}
    for sid in removed:
        state.steps.pop(sid, None)
    for sid in revised:
        if sid in state.steps:
            state.steps[sid] = StepState()
    # A foreach step's instances go with it (a revised one expands afresh when it starts).
    for sid in [i for i in state.steps if parent_of(i) in removed | revised]:
        del state.steps[sid]
    listed = [
        str(s["id"]) for s in revision.get("steps") or [] if isinstance(s, dict) and "id" in s
    ]
    listed += [str(a) for a in diff.get("added") or [] if str(a) not in listed]
    if not set(state.steps) <= set(listed):
        # Only the new steps were listed: the kept ones stay first, in their order.
        listed = [*state.steps, *(sid for sid in listed if sid not in state.steps)]
    state.steps = {sid: state.steps.get(sid) or StepState() for sid in listed}


def apply_run(state: RunState, changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if key in ("status", "reason", "error", "ended_at", "duration_s"):
            setattr(state, key, value)


def apply_step_event(step: StepState, event: StepEvent, ts: str) -> bool:
    """What a step's event (not its step.started) changes in its state; False for one the
    state does not record. `ts`: the event's time as the state writes it."""
    match event:
        case StepRetrying():
            step.attempts = int(event.attempt or step.attempts)
            step.error = event.error
            log_attempt(step, event.attempt, event.error, event.stderr_tail, event.ts)
        case StepSucceeded():
            step.status = event.status or Status.SUCCEEDED
            step.result, step.error, step.detail = event.result, None, None
            step.result_masked = bool(event.result_masked)
            step.cache_key = present(event.key)
            finish_step(step, event, ts)
        case StepFailed():
            step.status = event.status or Status.FAILED
            step.result, step.error, step.detail = event.result, event.error, present(event.detail)
            step.result_masked, step.cache_key = False, None
            if present(event.stderr_tail) is not None:  # an attempt that ran (not a budget's)
                log_attempt(step, event.attempts, event.error, event.stderr_tail, event.ts)
            finish_step(step, event, ts)
        case StepSkipped():
            step.status, step.reason, step.error = Status.SKIPPED, event.reason, event.error
            step.ended_at = ts
        case StepInterrupted():
            # Stopped, not failed: an attempt's error before the stop stays in attempts_log
            # (set by StepRetrying while the step waited to retry), as the run document has it.
            step.status, step.error = Status.INTERRUPTED, None
            finish_step(step, event, ts)
        case StepCached():
            step.status = Status.CACHED
            step.result = event.result
            step.result_masked = bool(event.result_masked)
            step.fingerprint, step.cache_key = event.fingerprint, event.key
            step.result_variable = event.result_variable or step.result_variable
            step.started_at = step.ended_at = ts
            step.duration_s = event.duration_s  # 0: as the run document has it
            step.reason = str(event.reason or "cached")  # "cached (remote)" from the remote
        case StepResumed():
            keep_step(step, event)
        case _:
            return False
    return True


def keep_step(step: StepState, event: StepResumed) -> None:
    """A step kept from the previous run: as it was recorded there."""
    step.status = event.status or Status.SUCCEEDED
    step.result = event.result
    step.error = present(event.error)
    step.result_masked = bool(event.result_masked)
    step.reason = present(event.reason) or KEPT_REASON  # a skip's stays
    step.kept = True  # what every view counts as kept, skipped and cached steps too
    step.cache_key = event.key if isinstance(event.key, str) else None
    for name in ("attempts", "duration_s", "fingerprint", "result_variable"):
        if (value := getattr(event, name)) is not None:
            setattr(step, name, value)


def finish_step(
    step: StepState, event: StepSucceeded | StepFailed | StepInterrupted, ts: str
) -> None:
    """A step that ended: when, after how many attempts, and under which fingerprint."""
    step.ended_at = ts
    step.attempts = int(event.attempts)
    step.duration_s = event.duration_s
    fingerprint, variable = present(event.fingerprint), present(event.result_variable)
    if fingerprint is not None:
        step.fingerprint = fingerprint
    if variable is not None:
        step.result_variable = variable


def log_attempt(
    step: StepState, attempt: int | None, error: str | None, stderr_tail: Any, now: float
) -> None:
    """A failed attempt on the step's `attempts_log`: its number, error, stderr tail and
    duration (from when it started: `started_at` is the last attempt's start)."""
    began = _epoch(step.started_at)
    step.attempts_log.append(
        {
            "attempt": int(attempt or step.attempts),
            "error": error,
            "stderr_tail": present(stderr_tail) or "",
            "duration_s": round(max(0.0, now - began), 3) if began is not None else None,
        }
    )


def _epoch(text: str | None) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None

"""Runs that end before their first step starts are still runs, and are recorded as such.

Blocked for approval (no TTY, no --yes) or interrupted while starting (MCP servers, the
executor): the state file (so `planrun status` shows it), `--events`, `--junit` and
`--output json` get the run's start and its end with the status and reason; on `resume` the
steps recorded before keep their state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planrun.errors import ExitCode
from planrun.run.events import EventBus, RunFinished
from planrun.run.request import Finished, Prepared, RunRequest
from planrun.run.runopen import attach_reporters, open_state, started_event
from planrun.run.scope import StepRecord
from planrun.run.substeps import pending_row

__all__ = ["not_started_document", "record_blocked", "stopped_while_starting"]


def record_blocked(
    req: RunRequest, prep: Prepared, doc: dict[str, Any], kept: dict[str, StepRecord]
) -> None:
    """Write the blocked run `doc` (already masked) to the state and the report files; on
    resume, the steps it `kept` are settled as a run that starts settles them (step.resumed),
    so the state and JUnit show them as `doc` does, and the others `pending`."""
    prep, opened = open_state(req, prep)
    store = opened.store
    bus = EventBus(mask=prep.masker(prep.variables) if prep.plan.secrets else None)
    try:
        # The console stays out: the CLI says "blocked" itself, in one line.
        _, closers = attach_reporters(replace(req, console=False), bus, store, prep.plan.dotenv)
    except BaseException:
        if store is not None:
            store.release()
        raise
    try:
        resumed = opened.previous is not None
        order = [sid for sid in prep.selected if sid in kept]
        bus.emit(started_event(prep, prep.variables, resumed, kept=order))
        if order:
            from planrun.run.resume import kept_event  # Lazy import: only on resume

            steps = {s.id: s for s in prep.plan.steps}
            name = prep.plan.name or ""
            for sid in order:
                bus.emit(kept_event(name, sid, kept[sid], steps[sid]))
        finished = (doc["status"], doc["reason"], doc["duration_s"], doc["error"])
        bus.emit(RunFinished(prep.plan.name or "plan", *finished))
    finally:
        try:
            for close in closers:
                close()
        finally:
            if store is not None:
                store.close()


def not_started_document(
    prep: Prepared, status: str, reason: str, error: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The run document of a run whose steps never started (all `pending`)."""
    return {
        "plan": prep.plan.name,
        "status": status,
        "reason": reason,
        "duration_s": 0.0,
        "error": error,
        "steps": [pending_row(sid) for sid in prep.selected],
        "variables": variables if variables is not None else {},
    }


def stopped_while_starting(prep: Prepared, bus: EventBus, resumed: bool) -> Finished:
    """SIGINT/SIGTERM while MCP servers or the executor start: an interrupted run (exit 130)
    whose start and end reach the state and the reports like any other run's."""
    error = "interrupted before any step started"
    doc = not_started_document(prep, "interrupted", "interrupted", error, dict(prep.variables))
    bus.emit(started_event(prep, prep.variables, resumed))
    finished = (doc["status"], doc["reason"], doc["duration_s"], doc["error"])
    bus.emit(RunFinished(prep.plan.name or "plan", *finished))
    return Finished(doc, ExitCode.INTERRUPTED)

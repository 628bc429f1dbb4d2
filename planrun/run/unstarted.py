"""Runs that end before their first step starts are still runs, and are recorded as such.

Blocked for approval (no TTY, no --yes) or interrupted while starting (MCP servers, the
executor): the state file (so `planrun status` shows it), `--events`, `--junit` and
`--output json` get the run's start and its end with the status and reason; on `resume` the
steps it keeps are settled first (step.resumed), so every view shows them as kept and the
others `pending`, as in a resume that starts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planrun.errors import ExitCode
from planrun.run.events import EventBus, RunFinished
from planrun.run.request import Finished, Prepared, RunRequest
from planrun.run.runopen import attach_reporters, open_state, started_event
from planrun.run.scope import StepRecord

__all__ = ["record_blocked", "stopped_while_starting"]


def record_blocked(
    req: RunRequest, prep: Prepared, doc: dict[str, Any], kept: dict[str, StepRecord]
) -> None:
    """Write the blocked run `doc` (already masked) to the state and the report files (on
    resume, with the steps it `kept`)."""
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
        _start(bus, prep, opened.previous is not None, kept)
        finished = (doc["status"], doc["reason"], doc["duration_s"], doc["error"])
        bus.emit(RunFinished(prep.plan.name or "plan", *finished))
    finally:
        try:
            for close in closers:
                close()
        finally:
            if store is not None:
                store.close()


def stopped_while_starting(
    prep: Prepared, bus: EventBus, resumed: bool, kept: dict[str, StepRecord] | None = None
) -> Finished:
    """SIGINT/SIGTERM while MCP servers or the executor start: an interrupted run (exit 130)
    whose start and end reach the state and the reports like any other run's; on resume, the
    steps it `kept` are shown as what they are, the others `pending`."""
    from planrun.run.outcome import Outcome, result_document
    from planrun.status import Reason, Status

    error = "interrupted before any step started"
    kept = kept or {}
    records = {sid: kept.get(sid) or StepRecord() for sid in prep.selected}
    outcome = Outcome(Status.INTERRUPTED, Reason.INTERRUPTED, error, 0.0)
    name = prep.plan.name or ""
    doc = result_document(name, prep.selected, records, outcome, dict(prep.variables))
    _start(bus, prep, resumed, kept)
    finished = (doc["status"], doc["reason"], doc["duration_s"], doc["error"])
    bus.emit(RunFinished(prep.plan.name or "plan", *finished))
    return Finished(doc, ExitCode.INTERRUPTED)


def _start(bus: EventBus, prep: Prepared, resumed: bool, kept: dict[str, StepRecord]) -> None:
    """run.started, then (on resume) the kept steps settled as a run that starts settles them
    (step.resumed): the state and JUnit show them as the run document does, the others
    `pending`."""
    order = [sid for sid in prep.selected if sid in kept]
    bus.emit(started_event(prep, prep.variables, resumed, kept={sid: kept[sid] for sid in order}))
    if order:
        from planrun.run.resume import kept_event  # Lazy import: only on resume

        steps = {s.id: s for s in prep.plan.steps}
        for sid in order:
            bus.emit(kept_event(prep.plan.name or "", sid, kept[sid], steps[sid]))

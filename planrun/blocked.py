"""A run blocked for approval before its first step is still a run: record it.

The state file (so `planrun status` shows it), `--events` and `--junit` get the run's start
and its end with status `blocked`, reason `approval_required`; on `resume` the steps recorded
before keep their state.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planrun.events import Event, EventBus
from planrun.request import Prepared, RunRequest

__all__ = ["record_blocked"]


def record_blocked(req: RunRequest, prep: Prepared, doc: dict[str, Any]) -> None:
    """Write the blocked run `doc` (already masked) to the state and the report files."""
    from planrun.launch import _started_event, attach_reporters, open_state

    prep, opened = open_state(req, prep)
    store = opened.store
    bus = EventBus(mask=prep.masker(prep.variables) if prep.plan.secrets else None)
    try:
        # The console stays out: the CLI says "blocked" itself, in one line.
        _, closers = attach_reporters(replace(req, console=False), bus, store)
    except BaseException:
        if store is not None:
            store.release()
        raise
    try:
        bus.emit(_started_event(prep, prep.variables, opened.previous is not None))
        finished = {key: doc[key] for key in ("status", "reason", "duration_s", "error")}
        bus.emit(Event("run.finished", prep.plan.name or "plan", None, finished))
    finally:
        try:
            for close in closers:
                close()
        finally:
            if store is not None:
                store.close()

"""What a run opens before its first step: the locked state (with what resume takes from it),
the reporters its events go to, and the run.started event that describes it."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the console, JSON Lines, JUnit reporters and
# the state store only when the run asks for them.
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from planrun.errors import UsageError
from planrun.plan.digest import plan_digest
from planrun.run.events import EventBus, RunStarted
from planrun.run.request import Prepared, RunRequest, abs_path
from planrun.run.runstate import no_saved_state, previous_steps, revised_prep
from planrun.state.model import StepState

if TYPE_CHECKING:
    from planrun.run.scope import StepRecord
    from planrun.state import StateStore


class OpenedState:
    """The locked state store of a run (None with --no-state) and what resume needs from it."""

    __slots__ = ("store", "previous", "revisions")
    store: StateStore | None
    previous: dict[str, StepState] | None
    revisions: list[dict[str, Any]]

    def __init__(
        self,
        store: StateStore | None,
        previous: dict[str, StepState] | None = None,
        revisions: list[dict[str, Any]] | None = None,
    ) -> None:
        self.store = store
        self.previous = previous
        self.revisions = [] if revisions is None else revisions


def open_state(req: RunRequest, prep: Prepared) -> tuple[Prepared, OpenedState]:
    """Lock the state file; on resume, load it: the previous steps, results and revisions."""
    if req.no_state:
        if req.resume:
            raise UsageError("--resume needs state: drop --no-state")
        return prep, OpenedState(None)
    from planrun.state import StateStore, default_state_path

    name = prep.plan.name or "plan"
    path = abs_path(req.state, req.cwd) if req.state else str(default_state_path(req.cwd, name))
    store = StateStore(path, name)
    store.acquire()
    opened = OpenedState(store)
    try:
        left = store.left_running()
        if left is not None:  # the run before died with steps running: their commands live on
            from planrun.run.leftovers import stop_left_running

            stop_left_running(*left)
        if not req.resume:
            return prep, opened
        old = store.load()
        if old is None:
            raise no_saved_state(req, name, path)
        opened.previous = previous_steps(old)
        if old.revisions:
            prep = revised_prep(prep, old.revisions, req, path)
            opened.revisions = list(old.revisions)
    except BaseException:
        store.release()
        raise
    return prep, opened


def attach_reporters(
    req: RunRequest,
    bus: EventBus,
    store: StateStore | None,
    dotenv: list[str],
    explain: bool = False,
    resume_hint: str | None = None,
    matrix_steps: frozenset[str] = frozenset(),
) -> tuple[Any, list[Callable[[], None]]]:
    """Subscribe the console, the state store, --events, --junit and library subscribers.
    `explain`: the console says why each step runs, `cache off` included; `matrix_steps`: the
    fan-out steps the console and JUnit call matrix steps (the others are foreach steps).

    Returns (console, closers). Sub-plans' steps reach them all, as PARENT_STEP/CHILD_STEP.
    UsageError, before any file is touched, when a report file names a file the run reads
    (`dotenv`: the plan's dotenv items) or another report file.
    """
    _refuse_clobbering(req, store, dotenv)
    closers: list[Callable[[], None]] = []
    console = None
    if req.console:
        from planrun.reporters.console import ConsoleReporter

        console = ConsoleReporter(
            sys.stderr,
            quiet=req.quiet,
            stream_output=req.stream,
            resume_hint=(resume_hint or req.plan) if store is not None else None,
            explain=explain,
            matrix_steps=matrix_steps,
        )
        bus.subscribe(console.handle)
        closers.append(console.close)
    if store is not None:
        bus.subscribe(store.handle)
    try:
        if req.events:
            from planrun.reporters.jsonl import JsonLinesReporter

            jl = JsonLinesReporter(abs_path(req.events, req.cwd), req.report_failures)
            bus.subscribe(jl.handle)
            closers.append(jl.close)
        if req.junit:
            from planrun.reporters.junit import JUnitReporter

            ju = JUnitReporter(abs_path(req.junit, req.cwd), req.report_failures, matrix_steps)
            bus.subscribe(ju.handle)
            closers.append(ju.close)
    except OSError as exc:
        for close in closers:
            close()
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None
    for fn in req.subscribers:
        bus.subscribe(fn)
    return console, closers


def _refuse_clobbering(req: RunRequest, store: StateStore | None, dotenv: list[str]) -> None:
    outputs = [(o, p) for o, p in (("--events", req.events), ("--junit", req.junit)) if p]
    if req.report:
        outputs.append(("--report", req.report))
    if not outputs:
        return
    from planrun.reporters.outpaths import refuse_clobbering

    inputs = [("the dotenv file", item.removesuffix("?")) for item in dotenv]
    if req.text is None:
        inputs.append(("the plan file", req.plan))
    if req.vars_file:
        inputs.append(("the vars file", req.vars_file))
    if store is not None:
        inputs += [("the state file", store.path), ("the state journal", store.journal_path)]
    refuse_clobbering(outputs, inputs, req.cwd)


def started_event(
    prep: Prepared,
    variables: dict[str, Any],
    resumed: bool,
    jobs: int | None = None,
    run_id: str | None = None,
    kept: Mapping[str, StepRecord] | None = None,
) -> RunStarted:
    """`run.started`. On resume, `kept` holds the steps kept from the previous run: the others
    start this run as `pending`, whatever the previous one recorded for them; the titles read
    the kept steps' results, as the resume binds them."""
    from planrun.run.scope import titles_before_run

    plan = prep.plan
    selected = set(prep.selected)
    results = None
    if resumed and kept:
        from planrun.run.resume import kept_results  # Lazy import: only on resume

        results = kept_results(plan, prep.selected, kept)
    titles = titles_before_run(plan.steps, prep.variables, prep.environment(), results)
    steps = [
        {"id": s.id, "title": titles[s.id], "tool": s.tool, "depends_on": prep.graph.deps[s.id]}
        for s in plan.steps
        if s.id in selected
    ]
    return RunStarted(
        plan.name or "plan",
        run_id or new_run_id(),
        prep.checked.digest() if plan is prep.checked.plan else plan_digest(plan),
        resumed,
        plan.title,
        jobs,
        variables,
        steps,
        prep.targets,
        list(kept or ()) if resumed else None,
    )


def new_run_id() -> str:
    """12 random hex digits (uuid4's first 12; no uuid import)."""
    return os.urandom(6).hex()

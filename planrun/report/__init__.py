"""The HTML run report: `planrun report` and `run --report FILE` (built from a run's state)."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the HTML page (jinja2), the graph and
# validation only when a report is written.
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planrun.errors import PlanInvalid, UsageError
from planrun.report.model import PlanInfo, build_report
from planrun.run.events import RunEvent, RunStarted, iso_ts
from planrun.state import RunState, default_state_path, no_state, read_state
from planrun.text import command_shown

if TYPE_CHECKING:
    from planrun.plan.definition import Plan

__all__ = ["PlanInfo", "ReportOnExit", "check_report_path", "render_report", "write_report"]


def check_report_path(path: str) -> None:
    """UsageError now, before anything runs, if a report could not be written at `path`."""
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"cannot write the report {path}: it is a directory")
    _only_regular(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write the report {path}: no such directory: {parent}")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write the report {path}: directory {parent} is not writable")


def _only_regular(path: str) -> None:
    """The report replaces a regular file only: never a device, FIFO, socket or symlink."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot write the report {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a symlink" if stat.S_ISLNK(mode) else "not a regular file"
        raise UsageError(f"cannot write the report {path}: it is {kind}; not replacing it")


def render_report(state: RunState, plan: PlanInfo) -> str:
    """The report page for the run in `state`."""
    from planrun.report.html import render_html

    now = time.time()
    return render_html(build_report(state, plan, now), iso_ts(now))


def write_report(path: str, html: str) -> None:
    """Write the page atomically (temp file + rename): a reader never sees half a report."""
    from planrun.atomicwrite import atomic_write

    _only_regular(path)  # again: it may have appeared during the run
    try:
        # A value may hold half a surrogate pair (a Jinja literal or JSON can spell "\ud800"):
        # written as that escape, never an encoding error.
        atomic_write(path, html.encode("utf-8", "backslashreplace"))
    except OSError as exc:
        raise UsageError(f"cannot write the report {path}: {exc.strerror or exc}") from None


def plan_info(plan: Plan, variables: Mapping[str, Any]) -> PlanInfo:
    """Titles (rendered with the run's `variables`: what reads a result not known stays as
    written, what reads a foreach or matrix element is a placeholder), tools and effective
    dependencies of a loaded Plan."""
    from planrun.plan.graph import PlanGraph
    from planrun.run.scope import rendered_title

    graph = PlanGraph.build(plan.steps)
    matrix = frozenset(s.id for s in plan.steps if s.matrix is not None)
    scope = {**variables, "env": {}, "steps": {}}
    titles = {s.id: rendered_title(s, lambda: scope) for s in plan.steps}
    return PlanInfo(plan.title or "", titles, dict(graph.tools), dict(graph.deps), matrix)


def report_for_plan(plan_path: str, state: str | None, cwd: str, out: str | None = None) -> str:
    """`planrun report`: the page for the last run of the plan at `plan_path`; UsageError when
    `out` (where it goes) is the plan file or the state file."""
    from planrun.plan.validate import default_name, load_plan, written_plan

    info = PlanInfo()
    unreadable = None
    plan: Plan | None = None
    try:
        plan = load_plan(plan_path)
        name = plan.name or default_name(plan_path)
    except PlanInvalid:
        # A plan that needs --var values, or an edited, broken one, still has its last run
        # under its own name.
        from planrun.run.stepcounts import matrix_steps_of

        written = written_plan(plan_path)
        name, unreadable = written.name, written.unreadable
        info = PlanInfo(matrix=matrix_steps_of(written.steps))
    path = _state_file(state, cwd, name)
    if out is not None:
        from planrun.reporters.outpaths import refuse_clobbering

        inputs = [("the plan file", plan_path), ("the state file", str(path))]
        refuse_clobbering([("-o", out)], inputs, cwd)
    recorded = read_state(path, name)
    if recorded is None:
        first = command_shown("planrun", "run", plan_path)
        raise no_state(name, str(path), plan_path, first, unreadable)
    if plan is not None:
        info = plan_info(plan, recorded.variables)
    return render_report(recorded, info)


class ReportOnExit:
    """Bus subscriber for `run --report`: remembers the run's steps, writes the page at the end."""

    def __init__(self, out: str, state: str | None, cwd: str, plan_file: str = "") -> None:
        self.out = out
        self.state = state
        self.cwd = cwd
        self.plan_file = plan_file  # read for its matrix steps (run.started names no kind)
        self.plan: str | None = None
        self.info = PlanInfo()

    def handle(self, event: RunEvent) -> None:
        if not isinstance(event, RunStarted) or self.plan is not None:
            return
        self.plan = event.plan
        steps = [s for s in event.steps or [] if isinstance(s, dict)]
        self.info = PlanInfo(
            title=str(event.title or ""),
            titles={str(s.get("id")): str(s.get("title") or s.get("id")) for s in steps},
            tools={str(s.get("id")): str(s.get("tool") or "") for s in steps},
            deps={str(s.get("id")): [str(d) for d in s.get("depends_on") or []] for s in steps},
            matrix=self._matrix_steps(),
        )

    def _matrix_steps(self) -> frozenset[str]:
        from planrun.run.stepcounts import matrix_steps_in

        return (
            matrix_steps_in(os.path.join(self.cwd, self.plan_file))
            if self.plan_file
            else frozenset()
        )

    def write(self) -> bool:
        """Write the report if a run started; False if none did (nothing to report)."""
        if self.plan is None:
            return False
        recorded = read_state(_state_file(self.state, self.cwd, self.plan), self.plan)
        if recorded is None:
            return False
        write_report(self.out, render_report(recorded, self.info))
        return True


def _state_file(state: str | None, cwd: str, name: str) -> Path:
    """The `--state` file (relative to `cwd`), else the plan's own under `cwd`."""
    return Path(cwd, state) if state else Path(default_state_path(cwd, name))

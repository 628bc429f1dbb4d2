"""What the console knows of a run, kept from its events: pure bookkeeping (event in, counts
out), no terminal, no clock; the console reporter only formats and writes what it says."""

from __future__ import annotations

from typing import Any

from planrun.plan.instances import parent_of
from planrun.reporters.lines import TERMINAL
from planrun.run.events import (
    PlanDiff,
    RunEvent,
    RunFinished,
    RunStarted,
    StepCached,
    StepEvent,
    StepFailed,
    StepInterrupted,
    StepOutput,
    StepResumed,
    StepRetrying,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from planrun.run.stepcounts import StepCounts, count_steps
from planrun.status import Status
from planrun.text import first_line


class RunTally:
    """A run's steps as its events leave them: statuses, errors, the steps running now.

    Only the root plan (the first `run.started`) is counted; a sub-plan's steps (PARENT/CHILD)
    are tracked while they run, and foreach instances are counted apart from the plan's steps.
    """

    def __init__(self) -> None:
        self.root: str | None = None  # the plan of the first run.started; others are sub-plans
        self.run_ts: float | None = None  # when it started
        self.tools: dict[str, str] = {}  # step id -> tool, in plan order (also the step list)
        self.titles: dict[tuple[str, str], str] = {}  # (plan, step id) -> rendered title
        self.status: dict[str, str] = {}  # step id -> last status, root plan only
        self.errors: dict[str, str] = {}  # failed step id -> error (first line)
        self.kept: set[str] = set()  # steps kept from the previous run
        self.instances: dict[str, str] = {}  # foreach instance id -> last status
        self.running: dict[str, tuple[float, int]] = {}  # step id -> (start ts, attempt)
        self.done = 0  # root-plan steps in a terminal status

    def apply(self, event: RunEvent) -> None:
        """Take one event into account (events the tally does not count are ignored)."""
        if not isinstance(event, StepOutput | RunStarted | PlanDiff | RunFinished):
            title = event.title  # every event about a step carries its rendered title
            if isinstance(title, str) and title:  # (a cached or kept one too)
                key = (event.plan, event.step)
                # first_line keeps its own result as it is: a title already kept is not cut
                # again (a step's every event carries it, most often unchanged)
                if self.titles.get(key) != title:
                    self.titles[key] = first_line(title)
        match event:
            case RunStarted():
                self._run_started(event)
            case StepStarted():
                self._step_started(event)
            case StepRetrying():
                if self._set_status(event, "retrying"):
                    self.running.pop(event.step, None)
            case StepFailed():
                self._step_failed(event)
            case StepResumed():
                self._step_resumed(event)
            case PlanDiff():
                self._plan_diff(event)
            case StepSucceeded() | StepSkipped() | StepInterrupted() | StepCached():
                self._set_status(event, event.status)

    # -- what it says ------------------------------------------------------------------------

    def step_counts(self) -> StepCounts:
        """The run's steps and foreach instances by status, counted as every view counts
        them (planrun.run.stepcounts); a step listed at the start and not started is pending."""
        statuses = {sid: self.status.get(sid, Status.PENDING) for sid in self.tools}
        statuses.update(self.status)  # and steps never listed (added by the planner)
        statuses.update(self.instances)
        return count_steps(statuses, self.kept)

    def title(self, plan: str, step: str) -> str | None:
        return self.titles.get((plan, step))

    # -- events ------------------------------------------------------------------------------

    def _set_status(self, event: StepEvent, status: str) -> bool:
        """Record a step's status; False for a step not shown as the root plan's (a sub-plan's
        own run, or a foreach instance once it has ended)."""
        step = event.step
        if event.plan != self.root:
            return False
        if status != Status.RUNNING:
            self.running.pop(step, None)
        if parent_of(step) is not None:
            # A foreach instance: shown while it runs, counted apart from the plan's steps.
            self.instances[step] = status
            return status == Status.RUNNING
        if "/" in step:  # a sub-plan's step: shown, but not counted among the plan's own
            return True
        old = self.status.get(step)
        self.status[step] = status
        if status in TERMINAL and old not in TERMINAL:
            self.done += 1
        return True

    def _run_started(self, event: RunStarted) -> None:
        steps: list[Any] = event.steps or []
        for step in steps:  # a title not renderable yet waits for its step's events
            title = step.get("title") if isinstance(step, dict) else None
            if isinstance(title, str) and "${" not in title:
                self.titles[(event.plan, str(step.get("id")))] = first_line(title)
        if self.root is None:
            self.root = event.plan
            self.run_ts = event.ts
            for step in steps:
                self.tools[step.get("id")] = step.get("tool") or ""

    def _step_started(self, event: StepStarted) -> None:
        step = event.step
        instances = event.instances
        if event.plan == self.root and isinstance(instances, list):
            # A foreach step names its instances as it starts: those that never start (an
            # abort under -j 1) are still the step's, pending, in the closing count.
            for sid in instances:
                self.instances.setdefault(str(sid), Status.PENDING)
        if self._set_status(event, Status.RUNNING):
            self.running[step] = (event.ts, event.attempt or 1)
            self.kept.discard(step)

    def _step_failed(self, event: StepFailed) -> None:
        status = event.status or Status.FAILED
        counted = self._set_status(event, status)
        if status != Status.IGNORED and counted and "/" not in event.step:
            self.errors[event.step] = first_line(event.error) or "failed"

    def _step_resumed(self, event: StepResumed) -> None:
        status = str(event.status or Status.SUCCEEDED)
        if self._set_status(event, status):
            self.kept.add(event.step)

    def _plan_diff(self, event: PlanDiff) -> None:
        if event.plan != self.root:
            return
        for step_id in event.removed or ():
            if self.status.get(step_id) in (None, Status.PENDING):
                self.tools.pop(step_id, None)
                self.status.pop(step_id, None)
            elif self.status.get(step_id) == Status.FAILED:
                # the planner routed around it: not a failure of the run any more
                self.status[step_id] = "replaced"
                self.errors.pop(step_id, None)
        for step_id in event.added or ():
            self.tools.setdefault(step_id, "")

"""The scheduler's side of `foreach`: expanding a ready step into instances, and closing it.

The scheduler runs each instance `ID[N]` like any step; this object turns a foreach step into
those instances when its dependencies are done (deciding, on resume, which instances are kept
from the previous run), and records what the step comes to when the last of them is done
(events, result list, result variable). The rules live in planrun.plan.fanout.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the resume rules only on resume.
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from planrun.cache import FORCED, OFF, step_cached
from planrun.plan.definition import Plan, Step
from planrun.plan.expressions import ExpressionError
from planrun.plan.fanout import (
    FanOutError,
    InstanceScope,
    bindings,
    expansion_fingerprint,
    fans_out,
    instance_id,
    instance_step,
    resolve_elements,
    summarize,
)
from planrun.plan.graph import PlanGraph
from planrun.plan.instances import grouped, parent_of
from planrun.run.events import (
    RunEvent,
    StepFailed,
    StepInterrupted,
    StepResumed,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from planrun.run.resume import resumed_event
from planrun.run.scope import StepRecord, instance_views
from planrun.run.settings import RunSettings
from planrun.status import Status

if TYPE_CHECKING:
    from planrun.run.resume import ResumePlan

PER_INSTANCE = "each instance asks the cache"
"""A cached foreach step's reason to start: the cache decides per instance, and each says."""


class Host(Protocol):
    """The scheduler, as far as foreach needs it."""

    plan: Plan
    steps: dict[str, Step]
    records: dict[str, StepRecord]
    graph: PlanGraph
    variables: dict[str, Any]
    reasons: dict[str, str]
    settings: RunSettings
    resume: ResumePlan | None

    @property
    def mask(self) -> Callable[[Any], Any] | None: ...
    def scope(self, sid: str | None = None) -> Mapping[str, Any]: ...
    def title(self, step: Step) -> str: ...
    def emit(self, event: RunEvent) -> None: ...
    def skip_if_upstream_failed(self, sid: str, step: Step) -> bool: ...
    def fail_before_start(self, sid: str, error: str) -> None: ...
    def note_failed(self) -> None: ...


class _Expansion:
    """One expanded foreach step: its instance ids, when it expanded, the ids not yet done."""

    __slots__ = ("ids", "started", "open")

    def __init__(self, ids: list[str], started: float, open: set[str]) -> None:
        self.ids = ids
        self.started = started
        self.open = open


class ForeachSteps:
    """The foreach steps of one scheduler's run."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._expansions: dict[str, _Expansion] = {}
        self._bindings: dict[str, dict[str, Any]] = {}  # instance id -> {as: element, index: n}
        self._running: dict[str, int] = {}  # step id -> its instances running now

    def held(self, sid: str) -> bool:
        """Whether instance `sid` must wait: its step's `max_parallel` instances are running."""
        parent = parent_of(sid)
        step = self.host.steps.get(parent) if parent is not None else None
        limit = step.max_parallel if step is not None else None
        return limit is not None and self._running.get(parent or "", 0) >= limit

    def started(self, sid: str) -> None:
        parent = parent_of(sid)
        if parent is not None:
            self._running[parent] = self._running.get(parent, 0) + 1

    def ended(self, sid: str) -> bool:
        """Note that `sid` stopped running; True when it was an instance."""
        parent = parent_of(sid)
        if parent is None or not self._running.get(parent):
            return False
        self._running[parent] -= 1
        return True

    def waiting(self, sid: str) -> bool:
        """Whether `sid` is a foreach step still to expand (it is ready when asked); a step
        the planner put back (pending again) is expanded afresh."""
        step = self.host.steps.get(sid)
        return step is not None and fans_out(step) and self.host.records[sid].status == "pending"

    def scope(self, sid: str, base: Mapping[str, Any]) -> Mapping[str, Any]:
        """`base` with the element and index on top when `sid` is an instance."""
        names = self._bindings.get(sid)
        return InstanceScope(base, names) if names is not None else base

    def expand(self, sid: str) -> list[str] | None:
        """The instances of a ready foreach step, now registered with the scheduler; None when
        the step is settled at once instead (upstream failed, bad list, empty list)."""
        host = self.host
        step = host.steps[sid]
        if host.skip_if_upstream_failed(sid, step):  # its instances' `when` decides about the rest
            return None
        scope = host.scope()
        try:
            items = resolve_elements(step, scope)
        except (ExpressionError, FanOutError) as exc:
            message = exc.message if isinstance(exc, ExpressionError) else str(exc)
            host.fail_before_start(sid, f"step '{sid}': {message}")
            return None
        views = instance_views(step, items, scope, host.mask)
        ids = []
        for n, item in enumerate(items):
            inst = instance_step(step, n)
            ids.append(inst.id)
            self._bindings[inst.id] = bindings(step, item, n)
            host.steps[inst.id], host.records[inst.id] = inst, StepRecord()
            host.graph.deps[inst.id] = host.graph.deps[sid]
        self._expansions[sid] = _Expansion(list(ids), time.monotonic(), set(ids))
        rec = host.records[sid]
        rec.status = Status.RUNNING
        rec.fingerprint = expansion_fingerprint(step, views)
        reason, again = self._why(sid, step)
        title, fp = host.title(step), rec.fingerprint
        name = host.plan.name or ""
        matrix = True if step.matrix is not None else None  # how its views word it
        host.emit(
            StepStarted(name, sid, rec.status, 1, fp, step.tool, title, reason, again, ids, matrix)
        )
        if host.resume is not None:
            self._keep_instances(sid, ids, views)
        if not ids:
            self.finish_step(sid)
            return None
        return ids

    def _why(self, sid: str, step: Step) -> tuple[str, bool | None]:
        """Why the step runs, as any step's step.started says: on resume, why it runs again;
        else whether the cache is asked (for each instance: each says what it found)."""
        if sid in self.host.reasons:
            return self.host.reasons[sid], True
        covered = self.host.settings.cache is not None and step_cached(step)
        return (PER_INSTANCE if covered else OFF), None

    def _keep_instances(
        self, sid: str, ids: list[str], views: list[tuple[bool | None, str | None]]
    ) -> None:
        """On resume: keep each instance that would do what it did last time (it is settled
        when the scheduler reaches it); the others get the reason they run again."""
        from planrun.run.resume import Seen, kept_record, why_run_again  # Lazy import: on resume

        host = self.host
        assert host.resume is not None
        deps_ran = any(not host.records[d].kept for d in host.graph.deps[sid] if d in host.records)
        for iid, (cond, fp) in zip(ids, views, strict=True):
            prev = host.resume.previous.get(iid)
            # The step's list is made again from its instances, and what reads it runs again:
            # an instance whose recorded result had a secret masked in it runs again too.
            why = why_run_again(
                prev, Seen(cond, fp), dependency_runs=deps_ran, read_by_a_step_to_run=True
            )
            if why is None and host.resume.is_forced(iid):
                why = FORCED
            if why is None and prev is not None:
                self._restore(iid, kept_record(prev))
            elif why is not None:
                host.reasons[iid] = why

    def _title(self, sid: str) -> str:
        """A step's or instance's rendered title (an instance of a step kept whole is not
        registered with the scheduler: its step's title, rendered with its element)."""
        step = self.host.steps.get(sid)
        if step is None:
            parent = self.host.steps[parent_of(sid) or sid]
            step = replace(parent, id=sid)  # what instance_step makes, for its title only
        return self.host.title(step)

    def _restore(self, iid: str, rec: StepRecord) -> None:
        self.host.records[iid] = rec
        self.host.emit(resumed_event(self.host.plan.name or "", iid, rec, title=self._title(iid)))

    def keep(self, sid: str, resume: ResumePlan) -> None:
        """A foreach step kept whole from the previous run: its instances are kept with it."""
        from planrun.run.resume import kept_record  # Lazy import: only on resume

        step, rec = self.host.steps.get(sid), self.host.records[sid]
        if step is None or not fans_out(step) or not isinstance(rec.result, list):
            return
        ids = [instance_id(sid, n) for n in range(len(rec.result))]
        try:  # its dependencies are kept too, so the list reads as it did; only for the titles
            items = resolve_elements(step, self.host.scope())
        except (ExpressionError, FanOutError):
            items = []
        for n, item in enumerate(items[: len(ids)]):
            self._bindings[ids[n]] = bindings(step, item, n)
        for n, iid in enumerate(ids):
            prev = resume.previous.get(iid)
            if prev is not None:
                self._restore(iid, kept_record(prev))
            else:  # not in the state (an older planrun wrote it): its result is the step's
                self._restore(iid, replace(rec, result=rec.result[n], attempts=1))
        self._expansions[sid] = _Expansion(ids, time.monotonic(), set())  # every one done

    def settled(self, sid: str) -> str | None:
        """Note that instance `sid` is done; its step's id when that was the last one (the
        step is then finished), else None."""
        parent = parent_of(sid)
        expansion = self._expansions.get(parent) if parent is not None else None
        if parent is None or expansion is None or sid not in expansion.open:
            return None
        expansion.open.discard(sid)
        if expansion.open:
            return None
        self.finish_step(parent)
        return parent

    def finish_step(self, sid: str) -> None:
        """Record what a foreach step came to from its instances, and bind its result list."""
        host = self.host
        step, rec, expansion = host.steps[sid], host.records[sid], self._expansions[sid]
        expansion.open.clear()
        ids = list(expansion.ids)  # the events get lists of their own
        verdict = summarize(ids, host.records)
        duration = round(time.monotonic() - expansion.started, 3)
        kept = bool(ids) and all(host.records[i].kept for i in ids)
        rec.status, rec.result, rec.error = Status(verdict.status), verdict.result, verdict.error
        rec.duration_s, rec.kept = duration, kept
        rec.attempts = 0 if kept else 1
        rec.result_masked = any(host.records[i].result_masked for i in ids if i in host.records)
        name, title = host.plan.name or "", host.title(step)
        # its list is not the value when masked: resume makes it again when read
        data: dict[str, Any] = {
            "status": rec.status,
            "attempts": rec.attempts,
            "duration_s": duration,
            "result": verdict.result,
            "result_variable": step.result_variable,
            "instances": ids,
            "fingerprint": rec.fingerprint,
            "title": title,
            "result_masked": True if rec.result_masked else None,
        }
        if verdict.status == Status.SUCCEEDED:
            if step.result_variable:
                host.variables[step.result_variable] = verdict.result
            host.emit((StepResumed if kept else StepSucceeded)(name, sid, **data))
        elif verdict.status == Status.FAILED:
            host.note_failed()
            host.emit(StepFailed(name, sid, error=verdict.error, **data))
        elif verdict.status == Status.SKIPPED:
            reason = "condition false for every instance"
            rec.reason = reason
            host.emit(StepSkipped(name, sid, rec.status, reason, title=title))
        else:
            host.emit(StepInterrupted(name, sid, **data))

    def open_instances(self, sid: str) -> list[str]:
        """The instances of expanded step `sid` not yet done, in order (none once it is
        finished)."""
        expansion = self._expansions.get(sid)
        if expansion is None or self.host.records[sid].status != Status.RUNNING:
            return []
        return [iid for iid in expansion.ids if iid in expansion.open]

    def close(self, keep_open: Callable[[str], bool] | None = None) -> None:
        """After a stop: a foreach step with unfinished instances is recorded as it stands
        (but for the steps `keep_open` names: they go on later)."""
        for sid in [sid for sid, e in self._expansions.items() if e.open]:
            if keep_open is not None and keep_open(sid):
                continue
            rec = self.host.records.get(sid)
            if rec is not None and rec.status == Status.RUNNING:
                self.finish_step(sid)

    def grouped(self, order: list[str]) -> list[str]:
        """`order` with each expanded step's instances right after it."""
        instances = {sid: e.ids for sid, e in self._expansions.items()}
        return [sid for sid in grouped(order, instances) if sid in self.host.records]

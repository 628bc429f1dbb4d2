"""Resume: which steps are kept from the previous run, and why each other one runs again.

`why_run_again` is the one place that decides, with one reason per step; the scheduler
puts that reason on the step's `step.started` event, and the console shows it from there.
Everything is decided before the first step starts, so every report of a stopped resumed
run shows the kept steps as what they are (succeeded, ignored, skipped), never pending.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from planrun.cache import ALL_FORCED, FORCED  # --force [ID]: run again, whatever was left
from planrun.plan.definition import Plan, Step
from planrun.plan.expressions import ExpressionError
from planrun.plan.fanout import fans_out
from planrun.plan.graph import PlanGraph, data_sources
from planrun.plan.instances import parent_of
from planrun.run.events import ABSENT, Absent, StepResumed
from planrun.run.scope import Scope, StepRecord, foreach_fingerprint, step_args, step_condition
from planrun.state.model import StepState
from planrun.status import CONDITION_FALSE, Status

NOT_IN_PREVIOUS = "not in the previous run"
DEPENDENCY_RAN = "a step it depends on ran again"
CHANGED = "its tool or arguments changed"
CONDITION_CHANGED = "its condition changed"
HELD_SECRET = "result held a secret"


def skipped_by_condition(prev: StepState) -> bool:
    """Whether the previous run skipped the step because its `when` was false."""
    return prev.status == Status.SKIPPED and prev.reason == CONDITION_FALSE


class Seen(NamedTuple):
    """What a step would do now: its condition (None: cannot be evaluated) and, when it would
    run, the fingerprint of its arguments (None: they cannot be resolved)."""

    condition: bool | None
    fingerprint: str | None = None


def why_run_again(
    prev: StepState | None,
    seen: Seen | None,
    *,
    dependency_runs: bool,
    read_by_a_step_to_run: bool = False,
) -> str | None:
    """None when the step is kept as the previous run recorded it, else why it runs again.

    `seen` is what the step would do now (None when a step it depends on runs again, so
    that nothing else matters); `read_by_a_step_to_run`: a step that runs reads its result.
    """
    if prev is None:
        return NOT_IN_PREVIOUS
    if dependency_runs or seen is None:
        return DEPENDENCY_RAN
    if skipped_by_condition(prev):
        return None if seen.condition is False else CONDITION_CHANGED
    if prev.status not in (Status.SUCCEEDED, Status.IGNORED, Status.CACHED):
        return f"{prev.status} last time"
    if seen.condition is not True:
        return CONDITION_CHANGED
    if seen.fingerprint != prev.fingerprint:
        return CHANGED
    if prev.result_masked and read_by_a_step_to_run:
        return HELD_SECRET
    return None


class ResumePlan:
    """The decision for every selected step: kept (with its record) or run again (why)."""

    __slots__ = ("kept", "reasons", "previous", "forced")
    kept: dict[str, StepRecord]
    reasons: dict[str, str]
    # what the previous run recorded, for foreach instances (decided when their step expands)
    previous: Mapping[str, StepState]
    forced: frozenset[str]  # --force IDs (ALL_FORCED: every step)

    def __init__(
        self,
        kept: dict[str, StepRecord] | None = None,
        reasons: dict[str, str] | None = None,
        previous: Mapping[str, StepState] | None = None,
        forced: frozenset[str] = frozenset(),
    ) -> None:
        self.kept = {} if kept is None else kept
        self.reasons = {} if reasons is None else reasons
        self.previous = {} if previous is None else previous
        self.forced = forced

    def is_forced(self, sid: str) -> bool:
        """`--force`, or `--force ID` naming this step, this instance or its foreach step (a
        foreach step with one instance forced is not kept whole: it expands again)."""
        if not self.forced:
            return False
        if ALL_FORCED in self.forced or sid in self.forced or parent_of(sid) in self.forced:
            return True
        return any(parent_of(f) == sid for f in self.forced)


def plan_resume(
    steps: Mapping[str, Step],
    order: list[str],
    graph: PlanGraph,
    previous: Mapping[str, StepState],
    variables: dict[str, Any],
    env: dict[str, str],
    mask: Callable[[Any], Any] | None = None,
    forced: frozenset[str] = frozenset(),
    results_read: bool = False,
) -> ResumePlan:
    """Decide, in dependency order, what the previous run leaves done.

    A step is kept when it completed (succeeded, ignored, or skipped by its condition), the
    steps it depends on are all kept, and it would do the same now (same condition, same
    fingerprint). Its kept record and result variable are visible to the steps after it.
    Then a kept step whose recorded result had a secret masked in it runs again when a
    step that runs reads it: the masked result is not the value (and so on, to a fixpoint).
    A step `forced` (`--force [ID]`) is never kept.
    """
    selected = set(order)
    deps = {sid: [d for d in graph.deps[sid] if d in selected] for sid in order}
    records = {sid: StepRecord() for sid in order}
    scratch = dict(variables)
    scope = Scope(scratch, env, records)
    seen: dict[str, Seen | None] = {}
    why: dict[str, str | None] = {}
    plan = ResumePlan(previous=previous, forced=forced)
    for sid in (s for s in graph.topo_order() if s in selected):
        prev = previous.get(sid)
        runs = any(why[d] is not None for d in deps[sid])
        seen[sid] = None if runs or prev is None else _see(steps[sid], prev, scope, mask)
        why[sid] = why_run_again(prev, seen[sid], dependency_runs=runs)
        if why[sid] is None and plan.is_forced(sid):
            why[sid] = FORCED
        if why[sid] is None and prev is not None:
            records[sid] = kept_record(prev)
            _bind(scratch, steps[sid], records[sid])
    _rerun_masked_results(steps, order, deps, previous, seen, why, results_read)
    for sid in order:
        reason = why[sid]
        if reason is None:
            plan.kept[sid] = records[sid]
        else:
            plan.reasons[sid] = reason
    return plan


def _see(step: Step, prev: StepState, scope: Scope, mask: Callable[[Any], Any] | None) -> Seen:
    if fans_out(step):  # its instances' conditions and args, as one fingerprint
        return Seen(True, foreach_fingerprint(step, scope, mask))
    try:
        condition = step_condition(step, scope)
    except ExpressionError:
        return Seen(None)
    if not condition or skipped_by_condition(prev):
        return Seen(condition)
    try:
        return Seen(True, step_args(step, scope, mask)[1])
    except ExpressionError:
        return Seen(True, None)


def _rerun_masked_results(
    steps: Mapping[str, Step],
    order: list[str],
    deps: dict[str, list[str]],
    previous: Mapping[str, StepState],
    seen: dict[str, Seen | None],
    why: dict[str, str | None],
    results_read: bool = False,
) -> None:
    """Run again the kept steps whose masked result a step that runs reads, and what depends
    on them, until nothing changes. `results_read`: every result variable is read (a
    sub-plan's final variables are the result of the `plan` step that runs it again)."""
    if not any(p.result_masked for p in previous.values()):
        return
    binders: dict[str, list[str]] = {}
    for sid in order:
        if steps[sid].result_variable:
            binders.setdefault(steps[sid].result_variable or "", []).append(sid)
    known = set(order)
    reads = {sid: {p for _, p in data_sources(steps[sid], binders, known)} for sid in order}
    changed = True
    while changed:
        changed = False
        wanted = {p for sid in order if why[sid] is not None for p in reads[sid]}
        if results_read:
            wanted.update(sid for sid in order if steps[sid].result_variable)
        for sid in order:
            if why[sid] is not None:
                continue
            runs = any(why[d] is not None for d in deps[sid])
            why[sid] = why_run_again(
                previous.get(sid),
                None if runs else seen[sid],
                dependency_runs=runs,
                read_by_a_step_to_run=sid in wanted,
            )
            changed = changed or why[sid] is not None


def kept_record(prev: StepState) -> StepRecord:
    """The record of a step kept as the previous run left it."""
    status = Status(prev.status)
    return StepRecord(
        status=status,
        attempts=prev.attempts,
        result=prev.result if status in (Status.SUCCEEDED, Status.CACHED) else None,
        error=prev.error if status == Status.IGNORED else None,
        duration_s=prev.duration_s,
        fingerprint=prev.fingerprint,
        kept=True,
        result_masked=prev.result_masked,
        reason=prev.reason if status == Status.SKIPPED else None,
        cache_key=prev.cache_key,
    )


def _bind(variables: dict[str, Any], step: Step, record: StepRecord) -> None:
    """A kept step's result variable, as its run bound it (ignored: null; skipped: unbound)."""
    if step.result_variable and record.status in (
        Status.SUCCEEDED,
        Status.IGNORED,
        Status.CACHED,
    ):
        variables[step.result_variable] = record.result


def bind_kept(
    variables: dict[str, Any], steps: Mapping[str, Step], kept: dict[str, StepRecord]
) -> None:
    """Bind the kept steps' result variables into the run's variables."""
    for sid, record in kept.items():
        _bind(variables, steps[sid], record)


def kept_results(plan: Plan, selected: list[str], kept: Mapping[str, Any]) -> dict[str, Any]:
    """The result variables that the steps a resume keeps bound, as it binds them; not one
    that a step still to run binds too (its value is not known before the run). What the
    resume's run.started titles and `resume --dry-run` read."""
    bound: dict[str, Any] = {}
    bind_kept(bound, {s.id: s for s in plan.steps}, dict(kept))
    rebound = {plan.step(sid).result_variable for sid in selected if sid not in kept}
    return {k: v for k, v in bound.items() if k not in rebound}


def kept_event(plan: str, sid: str, record: StepRecord, step: Step) -> StepResumed:
    """The `step.resumed` event of a kept step: everything its reports show, as recorded."""
    return resumed_event(
        plan, sid, record, result_variable=step.result_variable, key=record.cache_key
    )


def resumed_event(
    plan: str,
    sid: str,
    record: StepRecord,
    *,
    result_variable: str | None = None,
    key: str | None | Absent = ABSENT,
    title: str | None = None,
) -> StepResumed:
    """The `step.resumed` event of a step kept as `record` holds it. A foreach instance or a
    sub-plan's step binds no result variable of its own and has no key."""
    return StepResumed(
        plan,
        sid,
        record.status,
        record.attempts,
        record.duration_s,
        record.result,
        record.error,
        record.reason,
        record.fingerprint,
        result_variable,
        record.result_masked,
        key,
        title=title,
    )


def kept_sub_steps(plan: str, sid: str, previous: Mapping[str, StepState]) -> list[StepResumed]:
    """The `step.resumed` events of the sub-plan steps the previous run recorded under step
    `sid` (a `plan` step, or its foreach instances), which the resume keeps whole: they are
    kept with it, as its instances are, so every view still shows them."""
    from planrun.run.runtree import STEP_SEPARATOR  # Lazy import: only for kept sub-plans

    def under(row: str) -> bool:
        head, sep, _ = row.partition(STEP_SEPARATOR)
        return bool(sep) and (head == sid or parent_of(head) == sid)

    return [
        resumed_event(plan, row, kept_record(prev), title=prev.title)
        for row, prev in previous.items()
        if under(row)
    ]

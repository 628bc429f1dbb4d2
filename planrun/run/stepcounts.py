"""How a run's steps are counted, the one definition every view uses (console summary,
`status`, the HTML report, JUnit): the plan's own steps by status, a `foreach` or `matrix`
step counted once as a step and its instances (`ID[N]`) counted apart as "foreach instances"
("matrix instances" when all are a matrix step's; the plan says which steps are), a
sub-plan's steps (`PARENT/CHILD`) not at all (their parent step is counted).

Kept free of heavy imports: `planrun status` reads it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from planrun.plan.instances import parent_of
from planrun.text import counted

# Summary order, with the word used for each status.
SUMMARY_ORDER = (
    ("succeeded", "succeeded"),
    ("cached", "cached"),
    ("ignored", "ignored"),
    ("failed", "failed"),
    ("interrupted", "interrupted"),
    ("running", "unfinished"),
    ("skipped", "skipped"),
    ("pending", "pending"),
    ("replaced", "replaced by the planner"),
)
_WORDS = dict(SUMMARY_ORDER)
KEPT_REASON = "unchanged since last run"  # a state's reason for a step kept from the last run
_FINAL = frozenset(("succeeded", "cached", "failed", "ignored", "skipped", "interrupted"))


class StepCounts:
    """Steps and foreach instances by status; `kept`: steps kept from the previous run."""

    __slots__ = ("steps", "instances", "kept", "fanned")
    steps: dict[str, int]
    instances: dict[str, int]
    kept: int
    fanned: frozenset[str]  # the steps whose instances are counted

    def __init__(
        self,
        steps: dict[str, int] | None = None,
        instances: dict[str, int] | None = None,
        kept: int = 0,
        fanned: frozenset[str] = frozenset(),
    ) -> None:
        self.steps = {} if steps is None else steps
        self.instances = {} if instances is None else instances
        self.kept = kept
        self.fanned = fanned

    def kind(self, matrix_steps: Collection[str]) -> str:
        """The word for the instances in a count: `matrix` when all are a matrix step's
        (`matrix_steps`: the plan's), `foreach` when none is, "" for a mix."""
        matrices = sum(1 for sid in self.fanned if sid in matrix_steps)
        if matrices and matrices == len(self.fanned):
            return "matrix"
        return "" if matrices else "foreach"

    @property
    def total(self) -> int:
        return sum(self.steps.values())

    @property
    def total_instances(self) -> int:
        return sum(self.instances.values())


def count_steps(statuses: Mapping[str, str], kept: Iterable[str] = ()) -> StepCounts:
    """Count `statuses` ({id: status}, steps and instances in any order). A step still
    retrying counts as running (`unfinished`); `kept`: ids kept from the previous run, of which
    the plan's own steps are counted (an instance kept is counted as what it is, not as kept)."""
    steps: dict[str, int] = {}
    instances: dict[str, int] = {}
    fanned: set[str] = set()
    for sid, status in statuses.items():
        if "/" in sid:
            continue
        key = "running" if status == "retrying" else str(status)
        parent = parent_of(sid)
        if parent is not None:
            fanned.add(parent)
        into = instances if parent is not None else steps
        into[key] = into.get(key, 0) + 1
    # kept steps, as the steps' part of the count they end: not instances, nor sub-plan steps
    n_kept = sum(
        1
        for sid in set(kept)
        if statuses.get(sid) in _FINAL and "/" not in sid and parent_of(sid) is None
    )
    return StepCounts(steps, instances, n_kept, frozenset(fanned))


def status_parts(by_status: Mapping[str, int]) -> list[str]:
    """ "N succeeded", "M failed"... in summary order (unknown statuses last, as they are)."""
    parts = [f"{by_status[key]} {word}" for key, word in SUMMARY_ORDER if by_status.get(key)]
    parts += [f"{n} {key}" for key, n in by_status.items() if key not in _WORDS and n]
    return parts


def step_parts(counts: StepCounts) -> list[str]:
    """The steps' "N succeeded"... with the kept ones said last."""
    parts = status_parts(counts.steps)
    if counts.kept and parts:  # kept steps count as what they are; say how many were kept
        parts[-1] += f"; {counts.kept} kept from the previous run"
    return parts


def steps_text(counts: StepCounts) -> str:
    """`7 steps (5 succeeded, 2 cached; 1 kept from the previous run)`."""
    n = counts.total
    parts = step_parts(counts)
    text = counted(n, "step")
    return f"{text} ({', '.join(parts)})" if parts else text


def instances_text(counts: StepCounts, kind: str = "foreach") -> str:
    """`3 foreach instances (2 succeeded, 1 failed)`, or "" when the run has none. `kind`: the
    word before `instances` (`matrix` when every instance is a matrix step's; "" for a mix)."""
    n = counts.total_instances
    if not n:
        return ""
    word = f"{kind} instance" if kind else "instance"
    return f"{counted(n, word)} ({', '.join(status_parts(counts.instances))})"


def matrix_steps_of(steps: Any, revisions: Any = ()) -> frozenset[str]:
    """The ids of the matrix steps among a plan's `steps` as written (plain data, checked or
    not) and the steps of the last of a state's `revisions` (a planner's): how `status` and
    the report word the instances of a run, whose state holds no step's kind."""
    last = revisions[-1] if isinstance(revisions, list) and revisions else None
    revised = last.get("steps") if isinstance(last, dict) else None
    return frozenset(
        str(step.get("id", step.get("index")))
        for listed in (steps, revised)
        if isinstance(listed, list)
        for step in listed
        if isinstance(step, dict) and step.get("matrix") is not None
    )


def matrix_steps_in(plan_file: str) -> frozenset[str]:
    """The matrix steps of the plan file as written (read, not checked: `status` shows the
    last run of a plan that no longer validates too); none when it cannot be read."""
    from planrun.errors import PlanrunError
    from planrun.plan.loader import load_document

    try:
        data = load_document(plan_file).data
    except PlanrunError:
        return frozenset()
    return matrix_steps_of(data.get("steps") if isinstance(data, dict) else None)


def counts_text(counts: StepCounts, matrix_steps: Collection[str] = ()) -> str:
    """The whole count: steps, then foreach instances when there are any (matrix instances
    when they are all of `matrix_steps`)."""
    more = instances_text(counts, counts.kind(matrix_steps))
    return steps_text(counts) + (f"; {more}" if more else "")


def state_counts(steps: Mapping[str, Any]) -> StepCounts:
    """The count of a run state's steps ({id: StepState}: anything with `status`, `kept`)."""
    statuses = {sid: str(st.status) for sid, st in steps.items()}
    kept = [sid for sid, st in steps.items() if st.kept]
    return count_steps(statuses, kept)

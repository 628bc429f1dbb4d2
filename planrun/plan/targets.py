"""What a run selects: its targets (ids or `aliases`, never an `internal` step), the plan's
`default` without them, every step without either; and the steps `--force` forces.

`check_targets` is validation's part (positions and did-you-mean); `select` is the run's.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the close-match hint only for an error.
from collections.abc import Iterable, Sequence
from typing import Any

from planrun.cache import ALL_FORCED
from planrun.errors import UsageError
from planrun.plan.definition import Plan, Step
from planrun.plan.graph import PlanGraph

__all__ = ["ALL_FORCED", "Selection", "check_targets", "select", "target_names"]


def target_names(steps: Iterable[Step]) -> dict[str, str]:
    """Every name a step answers to as a target (its id and its aliases) -> its id."""
    names: dict[str, str] = {}
    for s in steps:
        names.setdefault(s.id, s.id)
        for alias in s.aliases:
            names.setdefault(alias, s.id)
    return names


def check_targets(header: Any, steps: Sequence[Step], step_paths: Sequence[int], out: Any) -> None:
    """Aliases that clash with an id or another alias; a `default` that names no step (an empty
    list would run nothing and say nothing), `default` ids that are no step's name, or name an
    internal step. `out` is validation's Collector; `header` the checked plan header (None when
    it did not check)."""
    ids = {s.id for s in steps}
    owner: dict[str, str] = {}
    for s, i in zip(steps, step_paths, strict=True):
        for j, alias in enumerate(s.aliases):
            where = ("steps", i, "aliases", j)
            if alias in ids:
                out.add(where, f"alias '{alias}' of step '{s.id}' is the id of a step")
            elif alias in owner and owner[alias] != s.id:
                message = (
                    f"alias '{alias}' of step '{s.id}' is also an alias of step '{owner[alias]}'"
                )
                out.add(where, message)
            owner.setdefault(alias, s.id)
    if header is None or header.default is None:
        return
    if not header.default:
        out.add(
            ("default",),
            "default names no step: list the steps to run, or leave it out to run every step",
        )
        return
    names = target_names(steps)
    internal = {s.id for s in steps if s.internal}
    for j, name in enumerate(header.default):
        if name not in names:
            from planrun.suggest import did_you_mean  # Lazy import: only for an error

            hint = did_you_mean(name, set(names) - internal)
            out.add(("default", j), f"default: no step '{name}'", hint=hint)
        elif names[name] in internal:
            sid = names[name]
            out.add(("default", j), f"default: step '{sid}' is internal{_as_alias(name, sid)}")


class Selection:
    """The steps a run selects (in graph order), its targets as ids, and the ids it forces."""

    __slots__ = ("selected", "targets", "forced")

    def __init__(self, selected: list[str], targets: list[str] | None, forced: list[str]) -> None:
        self.selected = selected
        self.targets = targets  # None: no target was given (the default, or every step)
        self.forced = forced


def select(
    plan: Plan,
    graph: PlanGraph,
    only: Sequence[str],
    force: Sequence[str],
    label: str,
    *,
    internal: bool = False,
) -> Selection:
    """The selection of `only` (targets, as given: ids or aliases) and the ids `force` forces
    (`*`, a bare --force: the targets, else the default steps, else every step). UsageError
    (exit 2) for an unknown or internal target (`internal`: an internal step may be named, for
    `show`, which runs nothing). `label` names the plan in messages."""
    names = target_names(s for s in plan.steps if s.id in graph.deps)
    targets: list[str] | None = None
    if only:
        targets = [_target(name, names, plan, label, internal) for name in only]
        roots = targets
    elif plan.default is not None:
        roots = [names[name] for name in plan.default if name in names]
    else:
        roots = list(graph.order)
    keep = graph.upstream(roots)
    selected = [sid for sid in graph.order if sid in keep]
    forced = [names.get(f, f) for f in force if f != ALL_FORCED]
    if ALL_FORCED in force:
        forced += [r for r in roots if r not in forced]
    return Selection(selected, _unique(targets), forced)


def _target(name: str, names: dict[str, str], plan: Plan, label: str, internal: bool) -> str:
    sid = names.get(name)
    if sid is None:
        from planrun.suggest import did_you_mean  # Lazy import: only for an error

        shown = {n for n, i in names.items() if internal or not plan.step(i).internal}
        hint = did_you_mean(name, shown)
        raise UsageError(f"no step '{name}' in {label}" + (f" ({hint})" if hint else ""))
    if plan.step(sid).internal and not internal:
        raise UsageError(
            f"step '{sid}' is internal{_as_alias(name, sid)}: it runs as a dependency of the "
            "steps that need it, not as a target"
        )
    return sid


def _as_alias(name: str, sid: str) -> str:
    """` ('su' is its alias)` when a step was named by an alias, so a message names the step by
    its id (as `list` shows it) and still shows the word that was typed."""
    return "" if name == sid else f" ('{name}' is its alias)"


def _unique(ids: list[str] | None) -> list[str] | None:
    return None if ids is None else list(dict.fromkeys(ids))

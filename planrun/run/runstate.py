"""Resume at the run path's edges: the previous run as the resume rules read it, the decision
for the run about to start, and the steps the approval gate no longer needs to ask about.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the state reader, the resume rules and the
# revision check only on resume.
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from planrun.errors import StateError
from planrun.plan.graph import PlanGraph
from planrun.plan.targets import select, target_names
from planrun.run.request import Prepared, abs_path
from planrun.run.scope import StepRecord
from planrun.state.model import StepState

if TYPE_CHECKING:
    from planrun.plan.definition import Plan
    from planrun.run.request import Prepared, RunRequest
    from planrun.run.resume import ResumePlan
    from planrun.state import RunState


def previous_steps(state: RunState) -> dict[str, StepState]:
    """What the recorded run says of each step: a copy of its record (the state store updates
    its own records in place as this run goes on)."""
    return {sid: replace(st) for sid, st in state.steps.items()}


def decide_resume(
    prep: Prepared,
    previous: dict[str, StepState] | None,
    mask: Callable[[Any], Any] | None,
    forced: Iterable[str] = (),
    results_read: bool = False,
) -> ResumePlan | None:
    """On resume, which steps the previous run leaves done and why the others run again;
    `forced`: the run's --force IDs (`*` for a bare --force), which are never kept;
    `results_read`: a sub-plan, whose final variables its parent reads."""
    if previous is None:
        return None
    from planrun.run.resume import plan_resume  # Lazy import: only on resume

    steps = {s.id: s for s in prep.plan.steps}
    env = prep.environment()
    return plan_resume(
        steps,
        prep.selected,
        prep.graph,
        previous,
        prep.variables,
        env,
        mask,
        frozenset(forced),
        results_read,
    )


def no_saved_state(req: RunRequest, name: str, path: str) -> StateError:
    """The error of a resume with no state to continue (exit 4): it says how to start one."""
    return StateError(
        f"no saved state for plan '{name}' at {path}: start it with {req.how_to_start()}"
    )


def kept_on_resume(req: RunRequest, prep: Prepared) -> dict[str, StepRecord]:
    """The steps a resume keeps, for the approval gate (a kept step is not asked about again).

    Reads the state without taking its lock; StateError when there is none (exit 4, before
    any question of approval) or it cannot be read.
    """
    decided = resume_decision(req, prep)[1]
    return decided.kept if decided is not None else {}


def resume_decision(req: RunRequest, prep: Prepared) -> tuple[Prepared, ResumePlan | None]:
    """The plan a resume would run (as last revised) and what it keeps, from the state read
    without its lock (also for `resume --dry-run`); StateError when there is none."""
    from planrun.state import default_state_path, read_state

    name = prep.plan.name or "plan"
    path = abs_path(req.state, req.cwd) if req.state else str(default_state_path(req.cwd, name))
    old = read_state(path, name)
    if old is None:
        raise no_saved_state(req, name, path)
    if old.revisions:
        prep = revised_prep(prep, old.revisions, req, path)
    mask = prep.masker(prep.variables) if prep.plan.secrets else None
    return prep, decide_resume(prep, previous_steps(old), mask, prep.forced)


def revised_prep(
    prep: Prepared, revisions: list[dict[str, Any]], req: RunRequest, state_path: str
) -> Prepared:
    """On resume, continue the plan as the planner last revised it (once it passes the checks)."""
    from planrun.run.revision_check import checked_revision

    plan = checked_revision(
        prep.plan,
        revisions,
        state_path=state_path,
        planner=bool(req.planner),
        variables=prep.variables,
    )
    graph = PlanGraph.build(plan.steps)
    names = target_names(plan.steps)
    only = [t for t in prep.targets or () if t in names]  # a step the planner removed is gone
    chosen = select(plan, graph, only, [*prep.forced], req.plan)
    return Prepared(
        prep.checked,
        plan,
        prep.variables,
        chosen.selected,
        graph,
        prep.dotenv,
        prep.targets,
        chosen.forced,
        prep.environ,
    )


def recorded_targets(req: RunRequest, plan: Plan) -> list[str]:
    """The targets the last run recorded in its state (what `resume` without targets resumes);
    none when there is no state or it cannot be read (the resume itself says so)."""
    from planrun.state import default_state_path, read_state

    name = plan.name or "plan"
    path = abs_path(req.state, req.cwd) if req.state else str(default_state_path(req.cwd, name))
    try:
        old = read_state(path, name)
    except StateError:
        return []
    if old is None or not old.targets:
        return []
    names = target_names(plan.steps)
    return [t for t in old.targets if t in names]  # a step since removed is not asked for

"""The approval gate before a run's first step: every step that needs approval, sub-plans included.

Without `--yes` and without a TTY to ask at, a run with such a step is blocked before anything
starts. A `plan` step whose `path` is written literally is looked into (recursively), so a gate
inside a sub-plan blocks the parent up front too; a sub-plan found only at run time (a computed
path, a file written by an earlier step) gets the same check when it starts.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the loader and validation only for a literal
# sub-plan path.
import os
from collections.abc import Mapping
from typing import Any

from planrun.errors import PlanrunError
from planrun.plan.conditions import false_at_start, steps_needing_approval
from planrun.plan.definition import Plan, Policy, replace
from planrun.plan.expressions import has_template
from planrun.run.parent import STEP_SEPARATOR, SUB_PLAN_TOOL, merge_policy

MAX_DEPTH = 32  # sub-plans within sub-plans looked into up front; deeper ones are checked later


def gated_steps(
    plan: Plan,
    selected: list[str],
    variables: Mapping[str, Any],
    env: Mapping[str, str],
    *,
    cwd: str,
    prefix: str = "",
    stack: tuple[str, ...] = (),
    loaded: dict[str, Any] | None = None,
) -> list[str]:
    """Ids (with their PARENT/ prefix) of the selected steps that need approval and can run,
    and of such steps in literal sub-plans. `plan.policy` is already merged with enclosing ones;
    `variables` are those known at start (a gate whose `when` is false from them is no gate)."""
    loaded = {} if loaded is None else loaded  # a sub-plan called many times is read once
    gated = set(steps_needing_approval(plan, selected, variables, env))
    bound = {s.result_variable for s in plan.steps if s.result_variable}
    known = {k: v for k, v in variables.items() if k not in bound}
    out: list[str] = []
    for sid in selected:
        step = plan.step(sid)
        if sid in gated:
            out.append(prefix + sid)
        if (
            step.tool == SUB_PLAN_TOOL
            and len(stack) < MAX_DEPTH
            and not false_at_start(step, known, env)  # a sub-plan that cannot run holds nothing up
        ):
            child = _literal_sub_plan(step.args, plan.policy, cwd, stack, loaded)
            if child is not None:
                sub, full = child
                # Known at start: its own variables under the values passed to it, less
                # those computed at run time (a `when` reading one may be true).
                given = step.args.get("variables")
                given = given if isinstance(given, dict) else {}
                sub_vars = {
                    k: v
                    for k, v in {**sub.variables, **given}.items()
                    if not has_template(given.get(k))
                }
                out += gated_steps(
                    sub,
                    [s.id for s in sub.steps],
                    sub_vars,
                    env,
                    cwd=cwd,
                    prefix=f"{prefix}{sid}{STEP_SEPARATOR}",
                    stack=(*stack, full),
                    loaded=loaded,
                )
    return out


def _literal_sub_plan(
    args: dict[str, Any],
    policy: Policy,
    cwd: str,
    stack: tuple[str, ...],
    loaded: dict[str, Any],
) -> tuple[Plan, str] | None:
    """The sub-plan a `plan` step names literally, valid and with the policy on top; else None
    (a computed path, a file not there yet, an invalid plan: the step's own run reports it)."""
    from planrun.plan.loader import load_document
    from planrun.plan.validate import check_document

    path = args.get("path")
    if not isinstance(path, str) or "${" in path:
        return None
    full = os.path.realpath(path if os.path.isabs(path) else os.path.join(cwd, path))
    if full in stack or not os.path.isfile(full):
        return None
    variables = args.get("variables")
    names = dict(variables) if isinstance(variables, dict) else {}
    key = f"{full}\0{sorted(names)}"
    if key not in loaded:
        try:
            checked = check_document(load_document(full), names)
            loaded[key] = checked.plan if checked.ok else None
        except PlanrunError:
            loaded[key] = None
    sub = loaded[key]
    if sub is None:
        return None
    return replace(sub, policy=merge_policy(policy, sub.policy)), full

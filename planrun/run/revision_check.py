"""Stored revisions are data: on resume they are validated against the current plan before use.

A state file can be edited by hand (or shipped with a repository). The steps a planner once
returned are kept in its `revisions`, and `resume` continues the plan as the last revision left
it, so those steps would run. They are therefore accepted only when the plan has a planner
(`replan:`, or `--planner` on this command), and only when the revised plan passes the same
checks a fresh revision passes: schema, tools, `policy`, references and graph. Otherwise the
run stops before anything starts (StateError, exit 4, one line). A step the plan gates with
`approval` stays gated in the revision, whatever the stored step says.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the loader and validation only on resume with
# stored revisions.
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planrun.errors import Diagnostic, PlanInvalid, StateError
from planrun.plan.definition import Plan, Step, replace


def checked_revision(
    plan: Plan,
    revisions: list[Any],
    *,
    state_path: Path | str,
    planner: bool,
    variables: Mapping[str, Any],
) -> Plan:
    """The plan as its last stored revision left it, validated; StateError when it is refused."""
    if not revisions:
        return plan
    name = plan.name or "plan"
    if plan.replan is None and not planner:
        raise StateError(
            f"state file {state_path} holds replanned steps, but plan '{name}' has no 'replan:' "
            "planner: refusing to run them (start afresh with 'planrun run')"
        )
    last = revisions[-1]
    steps = last.get("steps") if isinstance(last, dict) else None
    if not isinstance(steps, list) or not steps:
        raise StateError(f"state file {state_path} is corrupt: its last revision lists no steps")
    revised, errors = revised_plan(
        plan, steps, f"<revision {len(revisions)} in {state_path}>", variables
    )
    if revised is None:
        why = errors[0].message if errors else "it does not validate"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise StateError(
            f"state file {state_path}: the stored revision {len(revisions)} does not pass "
            f"plan '{name}''s checks: {why}{more}; refusing to run it"
        )
    return revised


def revised_plan(
    plan: Plan, steps: list[Any], label: str, variables: Mapping[str, Any]
) -> tuple[Plan | None, list[Diagnostic]]:
    """`plan` with `steps` (raw step data) in place of its own, if that passes every check of a
    plan file (read as the file `label`), with its gates kept; else (None, the errors)."""
    from planrun.plan.loader import load_text
    from planrun.plan.validate import check_document

    candidate = plan.to_dict(exclude_defaults=True)
    candidate.pop("id", None)
    candidate.update({"name": plan.name or "plan", "steps": steps})
    try:
        checked = check_document(load_text(json.dumps(candidate), label, "json"), variables)
        errors = [d for d in checked.diagnostics if d.severity == "error"]
    except PlanInvalid as exc:
        errors, checked = exc.diagnostics, None
    if errors or checked is None or checked.plan is None:
        return None, errors
    return replace(plan, steps=gates_kept(plan, checked.plan.steps)), []


def gates_kept(plan: Plan, steps: list[Step]) -> list[Step]:
    """A revision's steps, where every id `plan` gates stays gated: neither a planner's answer
    nor a stored revision can lift an approval gate by writing `approval: false`."""
    gated = {s.id for s in plan.steps if plan.needs_approval(s)}
    return [replace(s, approval=True) if s.id in gated and not s.approval else s for s in steps]

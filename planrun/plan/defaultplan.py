"""The default plan file (`planrun.yaml` and friends), and whether an argument names a plan file."""

from __future__ import annotations

import os

from planrun.errors import UsageError

DEFAULT_PLAN_NAMES = ("planrun.yaml", "planrun.yml", "planrun.json")
PLAN_EXTENSIONS = (".yaml", ".yml", ".json")


def find_default_plan(cwd: str) -> str | None:
    """The first of planrun.yaml, planrun.yml, planrun.json that exists in `cwd`, or None."""
    for name in DEFAULT_PLAN_NAMES:
        if os.path.exists(os.path.join(cwd, name)):
            return name
    return None


def given_plan(plan: str, cwd: str) -> str:
    """PLAN as given; UsageError when it does not exist."""
    if not os.path.exists(os.path.join(cwd, plan)):
        raise UsageError(f"plan file not found: {plan}")
    return plan


def looks_like_plan(arg: str, cwd: str) -> bool:
    """True when `arg` names an existing file or ends in .yaml, .yml or .json (else: a step id)."""
    if arg.lower().endswith(PLAN_EXTENSIONS):
        return True
    path = os.path.join(cwd, arg)
    return os.path.exists(path) and not os.path.isdir(path)

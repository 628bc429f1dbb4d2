"""The default plan file (`planrun.yaml` and friends) and how `run [PLAN] [ID ...]` reads its arguments."""

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


def default_plan(cwd: str) -> str:
    """The default plan's file name; UsageError naming the candidates when there is none."""
    found = find_default_plan(cwd)
    if found is None:
        raise UsageError(
            "no plan given and no planrun.yaml, planrun.yml or planrun.json in this directory "
            "(name a plan file, or create one with 'planrun init')"
        )
    return found


def plan_or_default(plan: str | None, cwd: str) -> str:
    """PLAN as given (it must exist), else the default plan."""
    if plan is None:
        return default_plan(cwd)
    if not os.path.exists(os.path.join(cwd, plan)):
        raise UsageError(f"plan file not found: {plan}")
    return plan


def looks_like_plan(arg: str, cwd: str) -> bool:
    """True when `arg` names an existing file or ends in .yaml, .yml or .json (else: a step id)."""
    if arg.lower().endswith(PLAN_EXTENSIONS):
        return True
    path = os.path.join(cwd, arg)
    return os.path.exists(path) and not os.path.isdir(path)


def split_run_args(args: tuple[str, ...] | list[str], cwd: str) -> tuple[str, list[str]]:
    """(plan, targets) from `run [PLAN] [ID ...]`: the first argument is PLAN when it looks like one."""
    if args and looks_like_plan(args[0], cwd):
        return plan_or_default(args[0], cwd), list(args[1:])
    return default_plan(cwd), list(args)
